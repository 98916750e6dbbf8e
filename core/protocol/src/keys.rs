//! Idempotency keys (and the other extracted attributes): where a message's identity comes
//! from. A chain is an ordered list of [`KeySource`]s; the first that yields a value wins.
//! [`AttributeRule`] is the one rule every source (HTTP and broker) stores by: three chains,
//! for the idempotency key, the event type and the aggregate id. It is plain data, so core
//! knows nothing of the relay's configuration: the relay builds the rule of an HTTP source,
//! `queuebox-brokers` the rule of a broker source, each from its own config, and their
//! differences (HTTP tries its key header first and falls back to the digest only when the
//! source declares no key; brokers try the message id, then the digest) are the chains.

use std::str::FromStr;

use bigdecimal::BigDecimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The most characters `source`, `idempotency_key`, `aggregate_id` and `event_type` hold.
pub const MAX_KEY_CHARS: usize = 255;

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
    /// The result of a JSONata key expression for this message (`idempotencyKeyExpression`
    /// …), evaluated by the relay before the rule runs: core links no JSONata engine, so
    /// the caller offers the text (already through [`scalar_text`]) and the chain decides
    /// its place. `name` is the expression's key path; `None` means it gave no value.
    Expression { name: String, value: Option<String> },
}

/// Where the key of a message was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyOrigin {
    Header,
    Path,
    MessageId,
    Digest,
    Expression,
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

impl KeySource {
    /// The value this source yields for `input`, if any. A path that does not parse is an
    /// error (sources check their paths at startup, so this names a programming error).
    fn find(&self, input: &KeyInput<'_>) -> Result<Option<(String, KeyOrigin)>> {
        Ok(match self {
            KeySource::Header { name } => {
                header(input.headers, name).map(|v| (v, KeyOrigin::Header))
            }
            KeySource::Path { path } => {
                let p = JsonPath::parse(path)?;
                input
                    .json
                    .and_then(|j| p.select(j))
                    .and_then(scalar_text)
                    .map(|v| (v, KeyOrigin::Path))
            }
            KeySource::MessageId => input
                .message_id
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| (s.to_string(), KeyOrigin::MessageId)),
            KeySource::Digest => Some((digest(input.body), KeyOrigin::Digest)),
            KeySource::Expression { value, .. } => value
                .as_deref()
                .map(|v| (v.to_string(), KeyOrigin::Expression)),
        })
    }

    /// How a refusal names this source: `header X-Key`, `path $.id`, `message id`, `digest`.
    pub fn describe(&self) -> String {
        match self {
            KeySource::Header { name } => format!("header {name}"),
            KeySource::Path { path } => format!("path {path}"),
            KeySource::MessageId => "message id".to_string(),
            KeySource::Digest => "digest".to_string(),
            KeySource::Expression { name, .. } => format!("expression {name}"),
        }
    }
}

/// Where one source takes the attributes of an inbox row from: three chains, each tried in
/// order, the first value winning. Built once per source at startup (HTTP in the relay,
/// brokers in `queuebox-brokers`); see the module doc for why it is plain data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttributeRule {
    /// The idempotency-key chain. Without a final [`KeySource::Digest`] a message may have
    /// no key; the source then refuses it (HTTP 400, [`AttributeRule::missing_key`]).
    pub key: Vec<KeySource>,
    pub event_type: Vec<KeySource>,
    pub aggregate_id: Vec<KeySource>,
}

impl AttributeRule {
    /// Parses every path of the three chains, so a bad path fails at startup, not per message.
    pub fn check(&self) -> Result<()> {
        for s in self
            .key
            .iter()
            .chain(&self.event_type)
            .chain(&self.aggregate_id)
        {
            if let KeySource::Path { path } = s {
                JsonPath::parse(path)?;
            }
        }
        Ok(())
    }

    /// The idempotency key and where it was found; `Ok(None)` when the chain found none, an
    /// error when the key would not fit its column (see [`extract`]).
    pub fn key(&self, input: &KeyInput<'_>) -> Result<Option<(String, KeyOrigin)>> {
        extract(&self.key, input)
    }

    /// The event type, if the chain finds one. Not length-checked: [`crate::NewInboxMessage::validate`]
    /// judges every attribute of the row.
    pub fn event_type(&self, input: &KeyInput<'_>) -> Option<String> {
        first(&self.event_type, input)
    }

    /// The aggregate id, if the chain finds one (checked like [`AttributeRule::event_type`]).
    pub fn aggregate_id(&self, input: &KeyInput<'_>) -> Option<String> {
        first(&self.aggregate_id, input)
    }

    /// Why a message without a key is refused, naming what was tried:
    /// `No idempotency key found (tried header X-Key, path $.id, header x-idempotency-key)`.
    pub fn missing_key(&self) -> String {
        let tried: Vec<String> = self.key.iter().map(KeySource::describe).collect();
        format!("No idempotency key found (tried {})", tried.join(", "))
    }
}

/// The first value of `chain` for `input`, without the key's length check.
fn first(chain: &[KeySource], input: &KeyInput<'_>) -> Option<String> {
    chain
        .iter()
        .find_map(|s| s.find(input).ok().flatten())
        .map(|(v, _)| v)
}

/// Runs `sources` in order and returns the first value with where it came from.
/// `Ok(None)` when none yields a value; an error when the value exceeds the column.
pub fn extract(sources: &[KeySource], input: &KeyInput<'_>) -> Result<Option<(String, KeyOrigin)>> {
    for source in sources {
        if let Some((value, origin)) = source.find(input)? {
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
                exact_decimal_text(&n.to_string())?
            }
        }
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

/// Longest plain text a number's key is written as; past it, scientific notation.
const MAX_PLAIN_NUMBER_DIGITS: i64 = 1_000;

/// A JSON number's exact value as plain decimal text without trailing zeros (`515725.0` →
/// `515725`, `1E+2` → `100`, `1e-7` → `0.0000001`). Exact, not through `f64`: two numbers
/// that differ in any digit (`12345678901234567890123` and `…124`) must not make one key, or
/// the second message would be dropped as the first's duplicate. A number whose plain text
/// would pass 1,000 digits (a hostile `1e999999999`) is written in scientific notation, as
/// short as its literal.
fn exact_decimal_text(literal: &str) -> Option<String> {
    // Parsing and normalising take time quadratic in the digits (2 s for a million, which a
    // sender's body can hold). A literal this long is kept as written, and so refused as a key
    // longer than 255 characters, instead of being parsed: only a contrived one (`1.` and a
    // thousand zeros) would have normalised to a shorter key.
    if literal.len() > MAX_PLAIN_NUMBER_DIGITS as usize {
        return Some(literal.to_string());
    }
    let d = BigDecimal::from_str(literal).ok()?.normalized();
    let (_, scale) = d.as_bigint_and_exponent();
    let plain = i64::try_from(d.digits())
        .unwrap_or(i64::MAX)
        .saturating_add(scale.abs());
    Some(if plain <= MAX_PLAIN_NUMBER_DIGITS {
        d.to_plain_string()
    } else {
        d.to_scientific_notation()
    })
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
        let bad = |at: usize, why: &str| {
            Error::InvalidInput(format!("JSONPath `{path}` at character {at}: {why}"))
        };
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
                    while j < chars.len()
                        && (chars[j].is_alphanumeric() || chars[j] == '_' || chars[j] == '-')
                    {
                        j += 1;
                    }
                    if j == start {
                        return Err(bad(i, "expected a field name after `.`"));
                    }
                    steps.push(Step::Field(chars[start..j].iter().collect()));
                    i = j;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|p| p + i)
                        .ok_or_else(|| bad(i, "unclosed `[`"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    if let Some(q) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                        steps.push(Step::Field(q.to_string()));
                    } else if let Some(q) =
                        inner.strip_prefix('"').and_then(|s| s.strip_suffix('"'))
                    {
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

    /// A field name may hold letters, digits, `_` and `-`.
    #[test]
    fn field_names_take_underscores_and_dashes() {
        for name in ["order_id", "order-id"] {
            let path = JsonPath::parse(&format!("$.{name}")).unwrap();
            assert_eq!(path.select(&json!({ name: 7 })), Some(&json!(7)), "{name}");
        }
    }

    /// The 1,000-character bound on parsing: a literal of exactly 1,000 is still parsed and
    /// normalised (`1.000…` is the key `1`); one longer is kept as written.
    #[test]
    fn a_number_literal_of_1000_characters_is_still_normalised() {
        let at_bound = format!("1.{}", "0".repeat(998));
        assert_eq!(at_bound.len(), 1000);
        assert_eq!(exact_decimal_text(&at_bound).as_deref(), Some("1"));
        let over = format!("1.{}", "0".repeat(999));
        assert_eq!(exact_decimal_text(&over), Some(over.clone()));
    }

    #[test]
    fn header_beats_path_and_digest_is_last() {
        let body = br#"{"id": 7}"#;
        let json: Value = serde_json::from_slice(body).unwrap();
        let headers = vec![("X-Idempotency-Key".to_string(), " h1 ".to_string())];
        let input = KeyInput {
            body,
            json: Some(&json),
            headers: &headers,
            message_id: None,
        };
        let rule = [
            KeySource::Header {
                name: "x-idempotency-key".into(),
            },
            KeySource::Path {
                path: "$.id".into(),
            },
        ];
        assert_eq!(
            extract(&rule, &input).unwrap(),
            Some(("h1".into(), KeyOrigin::Header))
        );
        let input = KeyInput {
            headers: &[],
            ..input
        };
        assert_eq!(
            extract(&rule, &input).unwrap(),
            Some(("7".into(), KeyOrigin::Path))
        );
        let d = extract(&[KeySource::Digest], &input).unwrap().unwrap();
        assert!(d.0.starts_with("sha256:") && d.0.len() == 71);
    }

    #[test]
    fn an_expression_result_sits_where_the_chain_puts_it_and_no_value_falls_through() {
        let body = br#"{"id": 7}"#;
        let json: Value = serde_json::from_slice(body).unwrap();
        let headers = vec![("X-Key".to_string(), "h1".to_string())];
        let input = KeyInput {
            body,
            json: Some(&json),
            headers: &headers,
            message_id: None,
        };
        let chain = |value: Option<&str>| {
            vec![
                KeySource::Header {
                    name: "x-key".into(),
                },
                KeySource::Expression {
                    name: "sources.s.idempotencyKeyExpression".into(),
                    value: value.map(str::to_string),
                },
                KeySource::Path {
                    path: "$.id".into(),
                },
            ]
        };
        assert_eq!(
            extract(&chain(Some("e1")), &input).unwrap(),
            Some(("h1".into(), KeyOrigin::Header))
        );
        let no_header = KeyInput {
            headers: &[],
            ..input
        };
        assert_eq!(
            extract(&chain(Some("e1")), &no_header).unwrap(),
            Some(("e1".into(), KeyOrigin::Expression))
        );
        assert_eq!(
            extract(&chain(None), &no_header).unwrap(),
            Some(("7".into(), KeyOrigin::Path))
        );
        assert_eq!(
            chain(None)[1].describe(),
            "expression sources.s.idempotencyKeyExpression"
        );
    }

    #[test]
    fn a_rule_takes_each_attribute_from_the_first_source_of_its_chain_and_names_what_it_tried() {
        let body = br#"{"type":"from-path","acct":"a-1"}"#;
        let json: Value = serde_json::from_slice(body).unwrap();
        let headers = vec![("X-Type".to_string(), "from-header".to_string())];
        let input = KeyInput {
            body,
            json: Some(&json),
            headers: &headers,
            message_id: Some("m-1"),
        };
        let header = |n: &str| KeySource::Header { name: n.into() };
        let path = |p: &str| KeySource::Path { path: p.into() };
        let rule = AttributeRule {
            key: vec![header("X-Key"), path("$.id")],
            event_type: vec![path("$.type"), header("X-Type")],
            aggregate_id: vec![header("X-Acct"), path("$.acct"), KeySource::MessageId],
        };
        rule.check().unwrap();
        assert_eq!(
            rule.key(&input).unwrap(),
            None,
            "no digest in the chain: no key"
        );
        assert_eq!(
            rule.missing_key(),
            "No idempotency key found (tried header X-Key, path $.id)"
        );
        assert_eq!(rule.event_type(&input).as_deref(), Some("from-path"));
        let header_first = AttributeRule {
            event_type: vec![header("X-Type"), path("$.type")],
            ..rule.clone()
        };
        assert_eq!(
            header_first.event_type(&input).as_deref(),
            Some("from-header")
        );
        assert_eq!(rule.aggregate_id(&input).as_deref(), Some("a-1"));
        let long = "x".repeat(MAX_KEY_CHARS + 1);
        let headers = vec![("X-Type".to_string(), long.clone())];
        let input = KeyInput {
            json: None,
            headers: &headers,
            ..input
        };
        assert_eq!(
            rule.event_type(&input),
            Some(long),
            "attributes are judged by NewInboxMessage::validate, not cut here"
        );
        assert_eq!(rule.aggregate_id(&input).as_deref(), Some("m-1"));
        assert!(AttributeRule {
            event_type: vec![path("type")],
            ..Default::default()
        }
        .check()
        .is_err());
    }

    #[test]
    fn a_rule_finds_the_key_of_its_chain_and_a_key_fits_its_column_or_is_refused() {
        let headers = vec![("X-Key".to_string(), "k-1".to_string())];
        let input = KeyInput {
            body: b"{}",
            json: None,
            headers: &headers,
            message_id: None,
        };
        let rule = AttributeRule {
            key: vec![KeySource::Header {
                name: "x-key".into(),
            }],
            ..Default::default()
        };
        assert_eq!(
            rule.key(&input).unwrap(),
            Some(("k-1".into(), KeyOrigin::Header))
        );
        // The column holds 255 characters (not bytes): 255 fit, 256 are refused by name.
        let key = |n: usize| vec![("X-Key".to_string(), "é".repeat(n))];
        let fits = key(MAX_KEY_CHARS);
        let input = KeyInput {
            headers: &fits,
            ..input
        };
        assert_eq!(rule.key(&input).unwrap().unwrap().0.chars().count(), 255);
        let too_long = key(MAX_KEY_CHARS + 1);
        let input = KeyInput {
            headers: &too_long,
            ..input
        };
        let refused = rule.key(&input).unwrap_err().to_string();
        assert!(refused.contains("256 characters"), "{refused}");
    }

    #[test]
    fn booleans_and_numbers_are_keys_and_containers_are_not() {
        for (value, key) in [
            (json!(true), Some("true")),
            (json!(false), Some("false")),
            (json!(7), Some("7")),
            (json!("  s  "), Some("s")),
            (json!("   "), None),
            (json!(null), None),
            (json!([1]), None),
            (json!({"a": 1}), None),
        ] {
            assert_eq!(scalar_text(&value).as_deref(), key, "{value}");
        }
    }

    #[test]
    fn paths_parse_and_select() {
        let v = json!({"a": {"b c": [1, {"d": 515725.0}]}});
        let p = JsonPath::parse("$.a['b c'][1].d").unwrap();
        assert_eq!(p.select(&v).and_then(scalar_text), Some("515725".into()));
    }

    #[test]
    fn number_keys_are_exact_so_different_numbers_never_share_a_key() {
        let text = |literal: &str| scalar_text(&serde_json::from_str(literal).unwrap());
        // Every digit counts: through f64 each pair made one key.
        for (a, b) in [
            ("12345678901234567890123", "12345678901234567890124"),
            ("0.10000000000000000001", "0.1"),
            ("9007199254740993.0", "9007199254740992.0"),
        ] {
            assert_ne!(text(a), text(b), "{a} and {b}");
        }
        // Keys already in their normal form stay as they were.
        for (literal, key) in [
            ("515725.0", "515725"),
            ("4.25", "4.25"),
            ("1E+2", "100"),
            ("1e-7", "0.0000001"),
            ("-0.0", "0"),
            ("18446744073709551615", "18446744073709551615"),
        ] {
            assert_eq!(text(literal).as_deref(), Some(key), "{literal}");
        }
        // A literal of a million digits is not parsed (quadratic): it stays as it is, and
        // is refused as a key longer than 255 characters.
        let long = format!("1{}", "0".repeat(1_000_000));
        let started = std::time::Instant::now();
        assert_eq!(text(&long).map(|k| k.len()), Some(1_000_001));
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
        // A hostile exponent stays short.
        let huge = text("1e999999999").unwrap();
        assert!(huge.len() < 20, "{huge}");
        assert_ne!(text("2e999999999"), Some(huge));
        assert!(JsonPath::parse("a.b").is_err());
        assert!(JsonPath::parse("$.a[").is_err());
    }
}
