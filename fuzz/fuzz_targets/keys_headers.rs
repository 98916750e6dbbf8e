//! Key extraction and header rules (core/protocol/src/keys.rs, core/protocol/src/headers.rs): JSONPath parsing
//! and selection, key chains over headers / paths / message ids / digests, scalar texts, the
//! header field checks, stored and relay headers, and error redaction.
//!
//! Beyond "no panic": a JSONPath rendered from steps parses back and selects the value
//! placed at those steps (a round trip); a key never exceeds its column and a header key is
//! that header's last value; an accepted header field is a token with no control character;
//! `publishable` implies `forwardable`; stored headers hold one entry per name in any case;
//! the relay headers are present once each with their values; redacted text keeps no given
//! secret and fits `last_error`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use queuebox_core::headers::{self, MAX_ERROR_CHARS};
use queuebox_core::keys::{self, JsonPath, KeyInput, KeyOrigin, KeySource};
use queuebox_core::message::MAX_KEY_CHARS;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
enum Step {
    Field(String),
    Index(u8),
}

#[derive(Arbitrary, Debug)]
enum Source {
    Header(String),
    Path(String),
    MessageId,
    Digest,
    Expression(String, Option<String>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    path: String,
    steps: Vec<Step>,
    leaf: String,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    message_id: Option<String>,
    chain: Vec<Source>,
    secrets: Vec<String>,
    error_text: String,
}

fuzz_target!(|inp: Input| {
    let json = serde_json::from_slice::<Value>(&inp.body).ok();
    // Any path text: parses or names the character; selects without panicking.
    match JsonPath::parse(&inp.path) {
        Ok(p) => {
            if let Some(j) = &json {
                let _ = p.select(j);
            }
        }
        Err(e) => assert!(e.to_string().contains("at character"), "{e}"),
    }
    path_round_trip(&inp.steps, &inp.leaf);
    key_chain(&inp, json.as_ref());
    header_rules(&inp.headers);
    redaction(&inp.error_text, &inp.secrets);
});

/// `$` + `.name` / `['name']` / `[n]` parses back to the steps it was written from.
fn path_round_trip(steps: &[Step], leaf: &str) {
    let mut text = String::from("$");
    let mut value = json!(leaf);
    for step in steps.iter().rev() {
        value = match step {
            Step::Field(f) => json!({ f.clone(): value }),
            Step::Index(n) => {
                let mut a = vec![Value::Null; usize::from(*n % 8)];
                a.push(value);
                Value::Array(a)
            }
        };
    }
    for step in steps {
        match step {
            Step::Field(f)
                if !f.is_empty()
                    && f.chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-') =>
            {
                text += &format!(".{f}")
            }
            // A quoted name cannot hold its own quote or a `]`, nor end in a blank (trimmed).
            Step::Field(f) if f.contains(['\'', ']']) || f.trim() != f => return,
            Step::Field(f) => text += &format!("['{f}']"),
            Step::Index(n) => text += &format!("[{}]", n % 8),
        }
    }
    let p = JsonPath::parse(&text).unwrap_or_else(|e| panic!("{text} does not parse: {e}"));
    assert_eq!(p.select(&value), Some(&json!(leaf)), "{text} in {value}");
}

fn key_chain(inp: &Input, json: Option<&Value>) {
    let chain: Vec<KeySource> = inp
        .chain
        .iter()
        .map(|s| match s {
            Source::Header(name) => KeySource::Header { name: name.clone() },
            Source::Path(path) => KeySource::Path { path: path.clone() },
            Source::MessageId => KeySource::MessageId,
            Source::Digest => KeySource::Digest,
            Source::Expression(name, value) => KeySource::Expression {
                name: name.clone(),
                value: value.clone(),
            },
        })
        .collect();
    let input = KeyInput {
        body: &inp.body,
        json,
        headers: &inp.headers,
        message_id: inp.message_id.as_deref(),
    };
    match keys::extract(&chain, &input) {
        Ok(Some((key, origin))) => {
            assert!(key.chars().count() <= MAX_KEY_CHARS);
            match origin {
                KeyOrigin::Digest => assert_eq!(key, keys::digest(&inp.body)),
                KeyOrigin::Header => {
                    let from = chain.iter().find_map(|s| match s {
                        KeySource::Header { name } => keys::header(&inp.headers, name),
                        _ => None,
                    });
                    assert!(from.is_some(), "a header key without a header");
                }
                _ => {}
            }
        }
        Ok(None) => assert!(!chain.contains(&KeySource::Digest)),
        Err(e) => {
            let t = e.to_string();
            assert!(
                t.contains("JSONPath") || t.contains("idempotency key"),
                "{t}"
            );
        }
    }
    let d = keys::digest(&inp.body);
    assert!(d.len() == 71 && d.starts_with("sha256:"));
    if let Some(j) = json {
        if let Some(t) = keys::scalar_text(j) {
            assert!(!t.is_empty() && t.trim() == t, "{t:?}");
        }
    }
}

fn header_rules(received: &[(String, String)]) {
    for (name, value) in received {
        if headers::check_field(name, value).is_ok() {
            assert!(!name.is_empty() && name.is_ascii());
            assert!(!value.chars().any(|c| c.is_control() && c != '\t'));
        }
        if headers::publishable(name, value).is_ok() {
            assert!(headers::forwardable(name, value).is_ok());
        }
        if headers::forwardable(name, value).is_ok() {
            assert!(!headers::is_hop_by_hop(name));
        }
    }
    let stored =
        headers::stored_headers(received.iter().map(|(k, v)| (k.as_str(), v.as_str())), None);
    let names: Vec<String> = stored.keys().map(|k| k.to_ascii_lowercase()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name stored twice: {names:?}");
    let _ = headers::stored_size(&stored);
    let id = uuid::Uuid::nil();
    let (source, key, corr) = received
        .first()
        .map(|(k, v)| (k.as_str(), v.as_str(), "c"))
        .unwrap_or(("s", "k", "c"));
    let relayed = headers::relay_headers(&stored, id, source, key, corr);
    for (name, want) in [
        (headers::X_INBOX_ID, id.to_string()),
        (headers::X_SOURCE, source.to_string()),
        (headers::X_IDEMPOTENCY_KEY, key.to_string()),
        (headers::X_CORRELATION_ID, corr.to_string()),
    ] {
        let hits: Vec<&Value> = relayed
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(hits, vec![&json!(want)], "{name}");
    }
}

fn redaction(text: &str, secrets: &[String]) {
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let out = headers::redact_error(text, &refs);
    assert!(out.chars().count() <= MAX_ERROR_CHARS);
    // A secret without '*' cannot be re-formed across a `***` mask: it must be gone.
    for s in secrets.iter().filter(|s| s.len() >= 4 && !s.contains('*')) {
        assert!(!out.contains(s.as_str()), "secret {s:?} left in {out:?}");
    }
}
