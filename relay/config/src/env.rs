//! `QUEUEBOX_*` environment overrides onto the YAML tree (docs/relay.md, "Where the
//! configuration comes from").

use serde_yaml::{Mapping, Value};

use crate::model::all_known_keys;
use crate::strict::{ConfigErrors, Problem};

/// The variable naming the configuration file when `--config` is not given (it configures
/// no key).
pub const CONFIG_FILE_ENV: &str = "QUEUEBOX_CONFIG_FILE";

/// Keys whose children are names chosen by the user, not fields.
const NAME_MAPS: [&str; 4] = ["sources", "destinations", "headers", "extraParams"];

/// Whether `var` is a `QUEUEBOX_*` variable that configures something (its presence alone
/// turns the packaged demo configuration off).
pub(super) fn configures(var: &str) -> bool {
    var.starts_with("QUEUEBOX_") && !ignored(var)
}

/// The largest list index an override may use (`QUEUEBOX_ROUTES_<n>_…`).
const MAX_LIST_INDEX: usize = 1023;

/// Variables that never configure anything.
fn ignored(var: &str) -> bool {
    let rest = &var["QUEUEBOX_".len()..];
    if var == CONFIG_FILE_ENV || rest.starts_with("TEST_") || rest.is_empty() {
        return true;
    }
    // Kubernetes service links: *_SERVICE_HOST, *_SERVICE_PORT*, *_PORT, *_PORT_<n>_<proto>*.
    if rest.ends_with("_SERVICE_HOST")
        || rest.contains("_SERVICE_PORT")
        || rest == "PORT"
        || rest.ends_with("_PORT")
    {
        return !rest.starts_with("SERVER_");
    }
    let parts: Vec<&str> = rest.split('_').collect();
    parts.windows(3).any(|w| {
        w[0] == "PORT"
            && w[1].chars().all(|c| c.is_ascii_digit())
            && matches!(w[2], "TCP" | "UDP" | "SCTP")
    })
}

/// Applies every `QUEUEBOX_*` variable; returns (key path, variable) for error messages.
pub(super) fn apply(
    root: &mut Value,
    vars: &[(String, String)],
    errs: &mut ConfigErrors,
) -> Vec<(String, String)> {
    let mut origins = Vec::new();
    let mut sorted: Vec<&(String, String)> = vars
        .iter()
        .filter(|(k, _)| k.starts_with("QUEUEBOX_") && !ignored(k))
        .collect();
    // Lists are rebuilt in index order whatever order the environment lists them in.
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    'vars: for (var, value) in sorted {
        let body = &var["QUEUEBOX_".len()..];
        let segments: Vec<String> = body
            .split("__")
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("\u{0}")
            .split('_')
            .map(|s| s.replace('\u{0}', "_").to_ascii_lowercase())
            .collect();
        if segments.iter().any(|s| s.is_empty()) {
            errs.problems.push(Problem {
                path: body.to_ascii_lowercase(),
                env: Some(var.clone()),
                message: "cannot be mapped to a configuration key".into(),
            });
            continue;
        }
        let mut node = &mut *root;
        let mut path = String::new();
        let mut parent_key: Option<String> = None;
        for (i, seg) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let is_index = seg.chars().all(|c| c.is_ascii_digit());
            if is_index
                && (node.is_sequence()
                    || node.is_null()
                    || node.as_mapping().is_some_and(|m| m.is_empty()))
            {
                // Bounded: a list is filled up to the index, so `ROUTES_22222222222222_…`
                // would take all memory (found by the fuzz target config_load).
                let Some(idx) = seg.parse().ok().filter(|i| *i <= MAX_LIST_INDEX) else {
                    errs.problems.push(Problem {
                        path: format!("{path}[{seg}]"),
                        env: Some(var.clone()),
                        message: format!(
                            "list index {seg} is too large: an environment override indexes a list up to {MAX_LIST_INDEX}"
                        ),
                    });
                    continue 'vars;
                };
                if !node.is_sequence() {
                    *node = Value::Sequence(Vec::new());
                }
                let seq = node.as_sequence_mut().expect("sequence");
                while seq.len() <= idx {
                    seq.push(Value::Null);
                }
                path.push_str(&format!("[{idx}]"));
                node = &mut seq[idx];
                parent_key = None;
            } else {
                if !node.is_mapping() {
                    *node = Value::Mapping(Mapping::new());
                }
                let map = node.as_mapping_mut().expect("mapping");
                let in_names = parent_key
                    .as_deref()
                    .is_some_and(|p| NAME_MAPS.contains(&p));
                let existing = map
                    .keys()
                    .filter_map(|k| k.as_str())
                    .find(|k| k.eq_ignore_ascii_case(seg))
                    .map(str::to_string);
                let key = existing.unwrap_or_else(|| {
                    if in_names {
                        seg.clone()
                    } else {
                        all_known_keys()
                            .iter()
                            .copied()
                            .find(|k| k.eq_ignore_ascii_case(seg))
                            .map(str::to_string)
                            .unwrap_or_else(|| seg.clone())
                    }
                });
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
                let k = Value::String(key.clone());
                if !map.contains_key(&k) {
                    map.insert(k.clone(), Value::Null);
                }
                node = map.get_mut(&k).expect("inserted");
                parent_key = Some(key);
            }
            if last {
                *node = scalar(value);
            }
        }
        origins.push((path, var.clone()));
    }
    origins
}

/// An environment value as YAML: booleans and numbers typed, everything else a string.
fn scalar(v: &str) -> Value {
    match serde_yaml::from_str::<Value>(v) {
        Ok(x @ (Value::Bool(_) | Value::Number(_))) => x,
        _ => Value::String(v.to_string()),
    }
}
