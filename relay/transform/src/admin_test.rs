//! What `POST /admin/transform/test` answers (docs/relay.md, "Transforms and key expressions"): an expression tried against a
//! payload with stand-in context variables. The relay's admin route reads the body under
//! `admin.maxPayloadBytes` (413 above it) and checks the admin auth; everything after that —
//! parsing the request, clamping `timeoutMs`, compiling, evaluating, the 200/400 bodies —
//! is here, so it is tested without a server.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{Context, Expression, InboxContext, Limits};

/// The request body.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformTestRequest {
    /// The JSONata expression to try.
    pub expression: String,
    /// The input it is evaluated against.
    pub payload: Value,
    /// `$topic`; default `test.topic`.
    #[serde(default)]
    pub mock_topic: Option<String>,
    /// `$source`; when given, the expression also sees the other source-transform
    /// variables, with stand-ins: `$headers` `{}`, `$idempotencyKey` the generated message
    /// id, `$eventType` null.
    #[serde(default)]
    pub mock_source: Option<String>,
    /// The time limit; default 100 ms, clamped to `admin.maxTransformTimeoutMs`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The answer: an HTTP status and its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct TransformTestResponse {
    /// 200 on success, 400 for a bad request, a bad expression or a failed evaluation.
    pub status: u16,
    /// `{"success": true, "result", "context"}` or `{"success": false, "error"}`.
    pub body: Value,
}

/// The default `timeoutMs` of a test request.
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_millis(100);

/// The default `mockTopic`.
pub const DEFAULT_TEST_TOPIC: &str = "test.topic";

/// Answers one test request. `body` is the request body as read; `max_timeout` is
/// `admin.maxTransformTimeoutMs`; `message_id` and `now` become `$messageId` and
/// `$timestamp` (the caller generates them, so tests can fix them). A result of JSONata
/// `undefined` is answered as `"result": null`.
pub fn run_transform_test(
    body: &[u8],
    max_timeout: Duration,
    message_id: &str,
    now: DateTime<Utc>,
) -> TransformTestResponse {
    let request: TransformTestRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return failure(format!("Invalid request: {e}")),
    };
    let expression = match Expression::compile(&request.expression, "expression") {
        Ok(x) => x,
        Err(e) => return failure(format!("Invalid expression: {}", e.message)),
    };
    let timeout = request
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TEST_TIMEOUT)
        .min(max_timeout);
    let limits = Limits {
        timeout,
        ..Limits::TRANSFORM
    };
    let topic = request
        .mock_topic
        .unwrap_or_else(|| DEFAULT_TEST_TOPIC.to_string());
    let mut vars = Context::outbox(message_id, topic, 0, now);
    if let Some(source) = request.mock_source {
        vars = vars.with_inbox(InboxContext {
            source,
            headers: Default::default(),
            idempotency_key: message_id.to_string(),
            event_type: None,
        });
    }
    match expression.evaluate(&request.payload, &vars, limits) {
        Ok(result) => TransformTestResponse {
            status: 200,
            body: json!({
                "success": true,
                "result": result.unwrap_or(Value::Null),
                "context": {
                    "messageId": vars.message_id,
                    "topic": vars.topic,
                    "attempt": vars.attempt,
                    "timestamp": vars.timestamp_text(),
                },
            }),
        },
        Err(e) => failure(e.to_string()),
    }
}

fn failure(error: String) -> TransformTestResponse {
    TransformTestResponse {
        status: 400,
        body: json!({ "success": false, "error": error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_millis(1000);

    fn run(body: Value) -> TransformTestResponse {
        run_transform_test(
            body.to_string().as_bytes(),
            MAX,
            "m-1",
            DateTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn valid_expression_answers_200_with_result_and_context() {
        let r = run(
            json!({ "expression": "{ \"n\": n + 1, \"topic\": $topic }", "payload": { "n": 1 } }),
        );
        assert_eq!(r.status, 200);
        assert_eq!(
            r.body,
            json!({
                "success": true,
                "result": { "n": 2, "topic": "test.topic" },
                "context": { "messageId": "m-1", "topic": "test.topic", "attempt": 0, "timestamp": "1970-01-01T00:00:00.000Z" },
            })
        );
    }

    #[test]
    fn mock_topic_and_mock_source_are_bound() {
        let r = run(
            json!({ "expression": "$topic & \"/\" & $source", "payload": {}, "mockTopic": "orders.created", "mockSource": "shop" }),
        );
        assert_eq!(r.body["result"], json!("orders.created/shop"));
    }

    #[test]
    fn bad_expression_answers_400_invalid_expression() {
        let r = run(json!({ "expression": "items[", "payload": {} }));
        assert_eq!(r.status, 400);
        assert_eq!(r.body["success"], json!(false));
        let error = r.body["error"].as_str().unwrap();
        assert!(error.starts_with("Invalid expression: "), "{error}");
    }

    #[test]
    fn malformed_request_answers_400_invalid_request() {
        for body in [
            &b"not json"[..],
            br#"{"payload": {}}"#,
            br#"{"expression": "a"}"#,
            br#"{"expression": 1, "payload": {}}"#,
        ] {
            let r = run_transform_test(body, MAX, "m-1", DateTime::UNIX_EPOCH);
            assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
            let error = r.body["error"].as_str().unwrap();
            assert!(error.starts_with("Invalid request: "), "{error}");
        }
    }

    #[test]
    fn evaluation_error_answers_400_with_its_text() {
        let r = run(json!({ "expression": "$error(\"nope\")", "payload": {} }));
        assert_eq!(r.status, 400);
        assert!(
            r.body["error"].as_str().unwrap().contains("nope"),
            "{}",
            r.body
        );
    }

    #[test]
    fn oversized_timeout_is_clamped_to_the_admin_maximum() {
        let runaway = "(function($f){ $f($f) })(function($f){ $f($f) })";
        let started = std::time::Instant::now();
        let r = run_transform_test(
            json!({ "expression": runaway, "payload": {}, "timeoutMs": 600000 })
                .to_string()
                .as_bytes(),
            Duration::from_millis(50),
            "m-1",
            DateTime::UNIX_EPOCH,
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(r.status, 400);
        assert_eq!(
            r.body["error"],
            json!("evaluation exceeded the time limit of 50 ms")
        );
    }

    #[test]
    fn undefined_result_is_null() {
        let r = run(json!({ "expression": "missing", "payload": {} }));
        assert_eq!((r.status, &r.body["result"]), (200, &Value::Null));
    }
}
