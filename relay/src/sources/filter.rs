//! `sources.<name>.filter` (proto-docs/ingest.md): header rules a message must pass to be
//! stored. Every `require` rule must hold and no `exclude` rule may; header names are
//! case-insensitive and a repeated header counts with its last value (as stored). A message
//! that does not pass is not stored: HTTP answers `202 {"status":"filtered"}`, a broker
//! message is acknowledged; both count `queuebox_inbox_filtered_total{source}`.
//!
//! The fuzz target `http_ingest` (fuzz/README.md) compiles this file too: it uses only
//! `queuebox-config`, `queuebox-core` and crates.io, never `crate::`.

use std::collections::HashMap;

use queuebox_config::{Config, HeaderFilter};

/// The filters of the sources that have one, by source name.
#[derive(Default)]
pub struct Filters {
    by_source: HashMap<String, HeaderFilter>,
}

impl Filters {
    pub fn from_config(cfg: &Config) -> Filters {
        let by_source = cfg
            .sources
            .values()
            .filter_map(|s| Some((s.name.clone(), s.common.filter.clone()?)))
            .collect();
        Filters { by_source }
    }

    /// The first rule `headers` fail, named for the log without its value, e.g.
    /// `require[0] (x-tenant equals)`; `None` when the message passes.
    pub fn first_failing(&self, source: &str, headers: &[(String, String)]) -> Option<String> {
        let f = self.by_source.get(source)?;
        let value = |name: &str| {
            headers
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let name = |list: &str, i: usize, r: &queuebox_config::HeaderRule| {
            format!("{list}[{i}] ({} {})", r.header, r.test_name())
        };
        if let Some((i, r)) = f
            .require
            .iter()
            .enumerate()
            .find(|(_, r)| !r.holds(value(&r.header)))
        {
            return Some(name("require", i, r));
        }
        f.exclude
            .iter()
            .enumerate()
            .find(|(_, r)| r.holds(value(&r.header)))
            .map(|(i, r)| name("exclude", i, r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters() -> Filters {
        let yaml = "database:\n  url: postgres://localhost/x\nsources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    topic: t\n    filter:\n      require:\n        - header: X-Tenant\n          equals: acme\n        - header: x-kind\n          in: [a, b]\n      exclude:\n        - header: x-test\n          exists: true\n        - header: x-topic\n          matches: 'debug.**'\n";
        Filters::from_config(&queuebox_config::from_yaml_with_env(yaml, &[]).expect("config"))
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn require_must_hold_and_exclude_must_not() {
        let f = filters();
        let ok = [("x-tenant", "acme"), ("X-Kind", "b")];
        assert_eq!(f.first_failing("s", &h(&ok)), None);
        assert_eq!(f.first_failing("other", &h(&[])), None, "no filter");
        assert_eq!(
            f.first_failing("s", &h(&[("x-tenant", "other"), ("x-kind", "a")])),
            Some("require[0] (X-Tenant equals)".into())
        );
        assert_eq!(
            f.first_failing("s", &h(&[("x-tenant", "acme")])),
            Some("require[1] (x-kind in)".into()),
            "a missing header fails its require rule"
        );
        let mut test = h(&ok);
        test.push(("X-Test".into(), "".into()));
        assert_eq!(
            f.first_failing("s", &test),
            Some("exclude[0] (x-test exists)".into())
        );
        let mut debug = h(&ok);
        debug.push(("x-topic".into(), "debug.a.b".into()));
        assert_eq!(
            f.first_failing("s", &debug),
            Some("exclude[1] (x-topic matches)".into())
        );
        // A repeated header counts with its last value.
        let repeated = h(&[("x-tenant", "acme"), ("x-kind", "a"), ("x-tenant", "zz")]);
        assert!(f.first_failing("s", &repeated).is_some());
    }
}
