//! Idempotency keys (and the other extracted attributes): where a message's identity comes
//! from. A rule is an ordered list of sources; the first that yields a value wins, and the
//! SHA-256 digest of the raw body is the last resort for broker sources.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::message::MAX_KEY_CHARS;

/// One place a key may come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "camelCase")]
pub enum KeySource {
    /// A header, matched case-insensitively; the value is trimmed and blank counts as missing.
    Header { name: String },
    /// A JSONPath into the body (`$.a.b`, `$.items[0].id`, `$['odd key']`).
    Path { path: String },
    /// The broker's own message id (AMQP `messageId`, Kafka record key).
    MessageId,
    /// `sha256:<hex>` of the raw body bytes. Identical bodies become one message.
    Digest,
}

/// Where the key of a message was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyOrigin {
    Header,
    Path,
    MessageId,
    Digest,
}

/// What a message offers to the extraction.
#[derive(Debug, Clone, Copy)]
pub struct KeyInput<'a> {
    pub body: &'a [u8],
    /// The parsed body, when it is JSON.
    pub json: Option<&'a Value>,
    /// Received headers as (name, value) pairs, in arrival order.
    pub headers: &'a [(String, String)],
    pub message_id: Option<&'a str>,
}

/// Runs `sources` in order and returns the first value with where it came from.
/// `Ok(None)` when none yields a value; an error when the value exceeds the column.
pub fn extract(sources: &[KeySource], input: &KeyInput<'_>) -> Result<Option<(String, KeyOrigin)>> {
    for source in sources {
        let found = match source {
            KeySource::Header { name } => header(input.headers, name).map(|v| (v, KeyOrigin::Header)),
            KeySource::Path { path } => {
                let p = JsonPath::parse(path)?;
                input.json.and_then(|j| p.select(j)).and_then(scalar_text).map(|v| (v, KeyOrigin::Path))
            }
            KeySource::MessageId => input
                .message_id
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| (s.to_string(), KeyOrigin::MessageId)),
            KeySource::Digest => Some((digest(input.body), KeyOrigin::Digest)),
        };
        if let Some((value, origin)) = found {
            let n = value.chars().count();
            if n > MAX_KEY_CHARS {
                return Err(Error::InvalidInput(format!(
                    "the idempotency key from {origin:?} has {n} characters; at most {MAX_KEY_CHARS} fit"
                )));
            }
            return Ok(Some((value, origin)));
        }
    }
    Ok(None)
}

/// `sha256:<lower-case hex>` of `body`.
pub fn digest(body: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

/// The last value of header `name` (case-insensitive), trimmed; blank is missing.
pub fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The text of a scalar JSON value: strings trimmed, numbers normalised (`515725.0` →
/// `515725`), booleans as `true`/`false`. Objects, arrays, null and blank give nothing.
pub fn scalar_text(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.to_string()
            } else if let Some(u) = n.as_u64() {
                u.to_string()
            } else {
                let f = n.as_f64()?;
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    format!("{}", f as i64)
                } else {
                    format!("{f}")
                }
            }
        }
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

/// The JSONPath subset QueueBox accepts: `$` followed by `.name`, `['name']` or `[index]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(usize),
}

impl JsonPath {
    /// Parses `path`, naming the position of the first thing it does not accept.
    pub fn parse(path: &str) -> Result<Self> {
        let bad = |at: usize, why: &str| Error::InvalidInput(format!("JSONPath `{path}` at character {at}: {why}"));
        let chars: Vec<char> = path.trim().chars().collect();
        if chars.first() != Some(&'$') {
            return Err(bad(0, "must start with `$`"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    let start = i + 1;
                    let mut j = start;
                    while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_' || chars[j] == '-') {
                        j += 1;
                    }
                    if j == start {
                        return Err(bad(i, "expected a field name after `.`"));
                    }
                    steps.push(Step::Field(chars[start..j].iter().collect()));
                    i = j;
                }
                '[' => {
                    let close = chars[i..].iter().position(|&c| c == ']').map(|p| p + i).ok_or_else(|| bad(i, "unclosed `[`"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    if let Some(q) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                        steps.push(Step::Field(q.to_string()));
                    } else if let Some(q) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                        steps.push(Step::Field(q.to_string()));
                    } else if let Ok(n) = inner.parse::<usize>() {
                        steps.push(Step::Index(n));
                    } else {
                        return Err(bad(i, "expected a quoted name or an index inside `[...]`"));
                    }
                    i = close + 1;
                }
                c => return Err(bad(i, &format!("unexpected `{c}`"))),
            }
        }
        Ok(JsonPath { steps })
    }

    /// The value at this path, if there is one.
    pub fn select<'v>(&self, mut v: &'v Value) -> Option<&'v Value> {
        for step in &self.steps {
            v = match step {
                Step::Field(f) => v.as_object()?.get(f)?,
                Step::Index(n) => v.as_array()?.get(*n)?,
            };
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_beats_path_and_digest_is_last() {
        let body = br#"{"id": 7}"#;
        let json: Value = serde_json::from_slice(body).unwrap();
        let headers = vec![("X-Idempotency-Key".to_string(), " h1 ".to_string())];
        let input = KeyInput { body, json: Some(&json), headers: &headers, message_id: None };
        let rule = [KeySource::Header { name: "x-idempotency-key".into() }, KeySource::Path { path: "$.id".into() }];
        assert_eq!(extract(&rule, &input).unwrap(), Some(("h1".into(), KeyOrigin::Header)));
        let input = KeyInput { headers: &[], ..input };
        assert_eq!(extract(&rule, &input).unwrap(), Some(("7".into(), KeyOrigin::Path)));
        let d = extract(&[KeySource::Digest], &input).unwrap().unwrap();
        assert!(d.0.starts_with("sha256:") && d.0.len() == 71);
    }

    #[test]
    fn paths_parse_and_select() {
        let v = json!({"a": {"b c": [1, {"d": 515725.0}]}});
        let p = JsonPath::parse("$.a['b c'][1].d").unwrap();
        assert_eq!(p.select(&v).and_then(scalar_text), Some("515725".into()));
        assert!(JsonPath::parse("a.b").is_err());
        assert!(JsonPath::parse("$.a[").is_err());
    }
}
