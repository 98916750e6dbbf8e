//! Evaluates one case of the JSON conformance vectors in `proto-docs/vectors/` through the
//! real functions of the core. The C ABI and the Node and Python bindings expose
//! [`evaluate`], so every language's test suite checks the same vectors against the same
//! code; no wrapper carries its own copy of a rule.
//!
//! Kinds: `backoff`, `idempotency_key`, `relay_headers`, `stored_headers`,
//! `correlation_id`, `redact`, and the statements an application runs in its own
//! transaction: `completion_statement`, `publish_statement` (ids given, so every language
//! renders the same text). (State transitions need a database and are run by the Rust
//! store tests from `transitions.json`.)

use serde_json::{json, Value};
use uuid::Uuid;

use queuebox_core::app_tx::{self, Placeholder};
use queuebox_core::backoff::{Decision, RetryPolicy};
use queuebox_core::headers;
use queuebox_core::keys::{self, KeyInput, KeySource};
use queuebox_core::{Error, Result};

/// Runs `input` of a vector case of `kind` and returns the output to compare with the
/// case's `expected`.
pub fn evaluate(kind: &str, input: &Value) -> Result<Value> {
    let bad = |what: &str| Error::InvalidInput(format!("{kind} vector input: {what}"));
    match kind {
        "backoff" => {
            let policy: RetryPolicy =
                serde_json::from_value(input["policy"].clone()).map_err(|e| bad(&e.to_string()))?;
            let attempt = input["attempt"].as_u64().ok_or_else(|| bad("attempt"))? as u32;
            let u = input["u"].as_f64().ok_or_else(|| bad("u"))?;
            Ok(match policy.decide(attempt, u) {
                Decision::Retry(d) => json!({"decision": "retry", "delayMs": d.as_millis() as u64}),
                Decision::Dead => json!({"decision": "dead"}),
            })
        }
        "idempotency_key" => {
            let sources: Vec<KeySource> = serde_json::from_value(input["sources"].clone())
                .map_err(|e| bad(&e.to_string()))?;
            let body = input["body"].as_str().unwrap_or("").as_bytes();
            let parsed: Option<Value> = serde_json::from_slice(body).ok();
            let pairs = header_pairs(&input["headers"]);
            let key_input = KeyInput {
                body,
                json: parsed.as_ref(),
                headers: &pairs,
                message_id: input["messageId"].as_str(),
            };
            Ok(match keys::extract(&sources, &key_input) {
                Ok(Some((key, origin))) => json!({"key": key, "origin": origin}),
                Ok(None) => json!({"key": null}),
                Err(e) => json!({"error": e.kind().as_str()}),
            })
        }
        "relay_headers" => {
            let received = input["received"].as_object().cloned().unwrap_or_default();
            let id: Uuid = input["inboxId"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("inboxId"))?;
            let h = headers::relay_headers(
                &received,
                id,
                input["source"].as_str().unwrap_or(""),
                input["idempotencyKey"].as_str().unwrap_or(""),
                input["correlationId"].as_str().unwrap_or(""),
            );
            Ok(json!({ "headers": Value::Object(h) }))
        }
        "stored_headers" => {
            let pairs = header_pairs(&input["received"]);
            let h = headers::stored_headers(
                pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                input["authHeader"].as_str(),
            );
            Ok(json!({ "headers": Value::Object(h) }))
        }
        "correlation_id" => {
            let v = headers::correlation_id(input["received"].as_str());
            let generated = Uuid::parse_str(&v).is_ok()
                && input["received"]
                    .as_str()
                    .map(|r| r.trim() != v)
                    .unwrap_or(true);
            Ok(if generated {
                json!({"generated": true})
            } else {
                json!({"value": v})
            })
        }
        "redact" => {
            Ok(json!({ "text": headers::redact_error(input["text"].as_str().unwrap_or(""), &[]) }))
        }
        "completion_statement" => {
            let style: Placeholder = input["placeholder"].as_str().unwrap_or("").parse()?;
            let backend = app_tx::parse_backend(input["backend"].as_str().unwrap_or(""))?;
            let uuid = |field: &str| -> Result<Uuid> {
                input[field]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(field))
            };
            let st = app_tx::completion_statement(backend, uuid("id")?, uuid("token")?, style);
            Ok(st.to_json())
        }
        "publish_statement" => {
            // Bad messages are part of the contract: the output is the kind and the text.
            let rendered = (|| -> Result<Value> {
                let style: Placeholder = input["placeholder"].as_str().unwrap_or("").parse()?;
                let backend = app_tx::parse_backend(input["backend"].as_str().unwrap_or(""))?;
                let ids: Vec<Uuid> = serde_json::from_value(input["ids"].clone())
                    .map_err(|e| bad(&format!("ids: {e}")))?;
                let messages = app_tx::messages_from_json(&input["messages"])?;
                Ok(app_tx::publish_statement_with_ids(&messages, style, backend, ids)?.to_json())
            })();
            Ok(rendered
                .unwrap_or_else(|e| json!({"error": e.kind().as_str(), "message": e.to_string()})))
        }
        other => Err(Error::InvalidInput(format!(
            "unknown vector kind `{other}`"
        ))),
    }
}

/// `[["Name", "value"], ...]` → pairs; anything else → none.
fn header_pairs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get(0)?.as_str()?.to_string(),
                        p.get(1)?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Checks every case of one vector file, returning a description of each mismatch.
/// Used by the Rust tests; the wrappers do the same loop in their own language.
pub fn check_file(text: &str) -> Result<(usize, Vec<String>)> {
    let file: Value = serde_json::from_str(text).map_err(|e| Error::InvalidInput(e.to_string()))?;
    let kind = file["kind"]
        .as_str()
        .ok_or_else(|| Error::InvalidInput("vector file has no kind".into()))?;
    let mut failures = Vec::new();
    let cases = file["cases"].as_array().cloned().unwrap_or_default();
    for case in &cases {
        let got = evaluate(kind, &case["input"])?;
        if got != case["expected"] {
            failures.push(format!(
                "{kind}/{}: expected {}, got {}",
                case["name"], case["expected"], got
            ));
        }
    }
    Ok((cases.len(), failures))
}
