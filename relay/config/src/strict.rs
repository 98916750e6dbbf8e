//! Strict, path-aware deserialisation: every unknown key and every type error is collected
//! with its key path (`outbox.batchSzie`, `routes[0].destination`) instead of stopping at
//! the first one, and a near miss gets a "did you mean" hint.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, Visitor};
use serde_yaml::Value;

/// One offending key of a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key path, e.g. `sources.orders.auth.secret`.
    pub path: String,
    /// The environment variable that set the key, when one did.
    pub env: Option<String>,
    pub message: String,
}

/// Every problem found in a configuration; start-up fails when there is at least one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigErrors {
    pub problems: Vec<Problem>,
}

impl ConfigErrors {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            env: None,
            message: message.into(),
        });
    }
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }
    /// True when some problem names exactly `path`.
    pub fn mentions(&self, path: &str) -> bool {
        self.problems.iter().any(|p| p.path == path)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "the configuration has {n} problem{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            match &p.env {
                Some(env) => write!(f, "\n  - {} (from {env}): {}", p.path, p.message)?,
                None => write!(f, "\n  - {}: {}", p.path, p.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigErrors> for queuebox_core::Error {
    fn from(e: ConfigErrors) -> Self {
        let path = e
            .problems
            .first()
            .map(|p| p.path.clone())
            .unwrap_or_default();
        queuebox_core::Error::Config {
            path,
            reason: e.to_string(),
        }
    }
}

/// Joins a parent path and a key.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Deserialises `value` into `T`, recording unknown keys (with a hint from `T`'s own field
/// names, else from `known`: every key of the configuration) and a type error, each under its
/// full key path (`path` joined with the key inside `value`, e.g. `server.httpPort`). `None`
/// when `T` could not be built.
pub fn typed<T: DeserializeOwned>(
    value: &Value,
    path: &str,
    known: &BTreeSet<&'static str>,
    errs: &mut ConfigErrors,
) -> Option<T> {
    let mut unknown = Vec::new();
    let mut on_ignored = |p: serde_ignored::Path| unknown.push(p.to_string());
    let result: Result<T, _> = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        value.clone(),
        &mut on_ignored,
    ));
    let own = fields_of::<T>();
    for u in unknown {
        let mut full = join(path, &render_ignored(&u));
        if full.is_empty() {
            // A key made only of serde_ignored's `?` marks (the fuzzer found one): still
            // say where, as a parse error at the top does.
            full = "<root>".to_string();
        }
        let last = full.rsplit('.').next().unwrap_or(&full).to_string();
        // A top-level key is first compared with `T`'s own fields; the keys another struct
        // takes out of the same mapping (a source's common keys, NATS login keys) are found
        // among all known keys.
        let hint = if u.contains('.') {
            suggest(&last, known.iter().copied())
        } else {
            suggest(&last, own.iter().copied()).or_else(|| suggest(&last, known.iter().copied()))
        };
        errs.push(full, unknown_message(hint));
    }
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let at = error_path(path, e.path());
            errs.push(
                if at.is_empty() {
                    "<root>".to_string()
                } else {
                    at
                },
                clean_serde_error(&e.inner().to_string()),
            );
            None
        }
    }
}

/// `parent` joined with the path serde_path_to_error tracked inside the value
/// (`routes[0].destination`); variant and unknown segments add nothing a user could type.
fn error_path(parent: &str, inner: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = parent.to_string();
    for seg in inner.iter() {
        match seg {
            Segment::Map { key } => out = join(&out, key),
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    out
}

fn unknown_message(hint: Option<String>) -> String {
    match hint {
        Some(h) => format!("unknown key; did you mean {h}?"),
        None => "unknown key".to_string(),
    }
}

/// serde_ignored renders sequence indices as `?.0`-like segments; show them as `[0]`. A
/// `?` segment is serde_ignored's mark for the inside of an `Option` (`tls.?.caFle`), not
/// a key a user could type, so it is dropped.
fn render_ignored(p: &str) -> String {
    let mut out = String::new();
    for seg in p.split('.') {
        if seg == "?" {
            continue;
        }
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    out
}

/// serde's message in the words of the file: the Rust type names become the range a
/// number must lie in, and an empty value (`key:` or an unset variable) says so.
fn clean_serde_error(s: &str) -> String {
    let mut m = s.trim().replace("unit value", "an empty value");
    for (ty, range) in [
        ("u8", "from 0 to 255"),
        ("u16", "from 0 to 65535"),
        ("u32", "from 0 to 4294967295"),
        ("u64", "from 0 to 18446744073709551615"),
        ("usize", "from 0 to 18446744073709551615"),
    ] {
        if let Some(rest) = m.strip_suffix(&format!("expected {ty}")) {
            m = format!("{rest}expected a whole number {range}");
            break;
        }
    }
    m
}

/// The closest known key to `key` (case-insensitive equality or an edit distance of at
/// most 2), for the "did you mean" hint.
pub fn suggest<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let k = key.to_ascii_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for cand in known {
        let c = cand.to_ascii_lowercase();
        let d = if c == k { 0 } else { levenshtein(&k, &c) };
        let limit = if k.len() <= 4 { 1 } else { 2 };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) && cand != key {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c.to_string())
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The field names a derived `Deserialize` of struct `T` accepts (read by a deserializer
/// that records what `deserialize_struct` is asked for).
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("probe"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _n: &'static str,
            fields: &'static [&'static str],
            _v: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("probe"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct
            newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}
