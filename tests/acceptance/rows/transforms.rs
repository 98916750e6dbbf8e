//! Rows 21, 22, 34, 39 and 60: JSONata transforms and key expressions, through the
//! binary's configuration, HTTP and SQL.

use std::time::{Duration, Instant};

use super::kit::*;
use super::Outcome;

/// Routes and a destination with transforms, all to the receiver.
const TRANSFORMED: &str = "  shaped:
    type: http
    baseUrl: {RX}
    path: /shaped
    timeoutMs: 3000
    transform:
      expression: '$merge([$, {\"dest\": true, \"sawRoute\": route = true}])'
routes:
  - topicPattern: 'a.ok'
    destination: shaped
    transform:
      expression: '$merge([$, {\"route\": true, \"attempt\": $attempt}])'
  - topicPattern: 'b.fail'
    destination: rx
    transform:
      expression: '$error(\"boom\")'
  - topicPattern: 'b.skip'
    destination: rx
    transform:
      expression: '$error(\"skipped\")'
      onError: Skip
  - topicPattern: 'b.dead'
    destination: rx
    transform:
      expression: '$error(\"bad\")'
      onError: Dead
";

async fn start_transformed(
    tag: &str,
) -> (Relay, Receiver, queuebox_core::store::postgres::PgStore) {
    let (url, store) = empty_db(tag).await;
    let rx = Receiver::start().await;
    let yaml = base_config(&url, &rx.url()) + &TRANSFORMED.replace("{RX}", &rx.url());
    (Relay::start(&yaml).await, rx, store)
}

/// Row 21: the route's transform, then the destination's; `$attempt` is 0 on the first delivery.
pub async fn route_then_destination_transforms_shape_the_delivery() -> Outcome {
    let (_relay, rx, store) = start_transformed("acc_r21").await;
    let id = insert(&store, "a.ok", None).await;
    wait_state(&store, id, "sent", 20).await;
    let d = &rx.to("/shaped")[0];
    assert_eq!(d.body["n"], 1, "the payload is kept");
    assert_eq!(d.body["route"], true);
    assert_eq!(d.body["dest"], true);
    assert_eq!(
        d.body["sawRoute"], true,
        "the destination's transform ran on the route's output"
    );
    assert_eq!(d.body["attempt"], 0);
    Ok(())
}

/// Row 22: onError Fail → the retry path; Skip → the original payload is delivered; Dead → the
/// row is dead at once, nothing delivered.
pub async fn transform_failures_follow_on_error() -> Outcome {
    let (relay, rx, store) = start_transformed("acc_r22").await;
    let fail = insert(&store, "b.fail", None).await;
    let skip = insert(&store, "b.skip", None).await;
    let dead = insert(&store, "b.dead", None).await;
    wait_state(&store, skip, "sent", 20).await;
    wait_state(&store, dead, "dead", 20).await;
    eventually("the failing transform retried", 20, || async {
        outbox_row(&store, fail).await.1 >= 1
    })
    .await;
    let hooks = rx.to("/hooks");
    let ids: Vec<&str> = hooks.iter().filter_map(|d| d.h("x-message-id")).collect();
    assert_eq!(
        ids,
        [skip.to_string().as_str()],
        "only the skipped row was delivered"
    );
    assert_eq!(
        hooks[0].body,
        serde_json::json!({"n": 1}),
        "Skip delivers the original payload"
    );
    // §3.1: Dead → dead "Transform dead-lettered the message", no attempt spent.
    let (_, attempts, error) = outbox_row(&store, dead).await;
    assert_eq!(attempts, 0, "Dead spends no attempt");
    assert_eq!(
        error.as_deref(),
        Some("Transform dead-lettered the message")
    );
    // Fail → the retry path with a transform error: neither sent nor dead.
    let (state, _, error) = outbox_row(&store, fail).await;
    assert!(state != "sent" && state != "dead", "Fail row is {state}");
    let error = error.unwrap_or_default();
    assert!(
        error.starts_with("Transform failed") && error.contains("boom"),
        "Fail row's last_error: {error}"
    );
    // Counted per onError strategy (§9 queuebox_transform_failures_total{strategy}).
    let (_, text) = relay.get("/metrics").await;
    for strategy in ["Fail", "Skip", "Dead"] {
        let label = format!("strategy=\"{strategy}\"");
        assert!(
            text.lines()
                .any(|l| l.starts_with("queuebox_transform_failures_total") && l.contains(&label)),
            "no transform failure counted for {strategy}"
        );
    }
    Ok(())
}

/// Row 34: a source transform that throws answers 422 and stores nothing.
pub async fn a_throwing_source_transform_answers_422() -> Outcome {
    let extra = "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '$error(\"no\")'\n";
    let (relay, _rx, store) = start("acc_r34", extra).await;
    let (s, b) = relay.post("/inbox/s", r#"{"id":"t-1"}"#, &[]).await;
    assert_eq!(s, 422, "{b}");
    assert!(b.contains("Transform failed: "), "{b}");
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 0);
    Ok(())
}

/// Row 39: an aggregate-id expression, a list of paths tried in order, and a syntax error that
/// stops start-up naming its key.
pub async fn key_expressions_and_path_lists_find_the_attributes() -> Outcome {
    let extra = "sources:
  expr:
    path: /expr
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdExpression: '$split(subject,\"/\")[2]'
  paths:
    path: /paths
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdPath: [$.orderId, $.OrderId]
";
    let (relay, _rx, store) = start("acc_r39", extra).await;
    assert_eq!(
        relay
            .post(
                "/inbox/expr",
                r#"{"id":"e1","subject":"orders/eu/515725"}"#,
                &[]
            )
            .await
            .0,
        202
    );
    assert_eq!(
        relay
            .post("/inbox/paths", r#"{"id":"p1","orderId":"lower"}"#, &[])
            .await
            .0,
        202
    );
    assert_eq!(
        relay
            .post("/inbox/paths", r#"{"id":"p2","OrderId":"upper"}"#, &[])
            .await
            .0,
        202
    );
    let ids: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT idempotency_key, aggregate_id FROM inbox ORDER BY idempotency_key")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(
        ids,
        [
            ("e1".to_string(), Some("515725".to_string())),
            ("p1".to_string(), Some("lower".to_string())),
            ("p2".to_string(), Some("upper".to_string())),
        ]
    );
    let (url, _) = empty_db("acc_r39b").await;
    let bad = "database:\n  url: {db}\nsources:\n  s:\n    path: /s\n    topic: s\n    aggregateIdExpression: '$split(subject,\"/\"'\n";
    let (code, out) = run_to_exit(bad, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("sources.s.aggregateIdExpression"), "{out}");
    Ok(())
}

/// Row 60: `POST /admin/transform/test`: a valid expression → 200 with the result; a bad one
/// → 400; a payload over `maxPayloadBytes` → 413; an oversized `timeoutMs` is clamped.
pub async fn the_admin_transform_test_evaluates_within_its_limits() -> Outcome {
    let extra = "admin:\n  enabled: true\n  maxPayloadBytes: 400\n  maxTransformTimeoutMs: 150\n  auth:\n    type: api-key\n    key: k-60\n";
    let (relay, _rx, _store) = start("acc_r60", extra).await;
    let key = [("X-API-Key", "k-60")];
    let path = "/admin/transform/test";
    let (s, b) = relay
        .post(path, r#"{"expression":"{\"total\": $sum(items.price)}","payload":{"items":[{"price":2},{"price":3}]}}"#, &key)
        .await;
    assert_eq!(s, 200, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["success"], true);
    assert_eq!(v["result"], serde_json::json!({"total": 5}));
    let (s, b) = relay
        .post(path, r#"{"expression":"{ \"a\": ","payload":{}}"#, &key)
        .await;
    assert_eq!(s, 400, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["success"], false, "{b}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("Invalid expression"),
        "{b}"
    );
    let big = format!(r#"{{"expression":"1","payload":"{}"}}"#, "x".repeat(500));
    assert_eq!(relay.post(path, &big, &key).await.0, 413);
    let runaway = r#"{"expression":"( $f := function($x){ $x > 0 ? $f($x + 1) : 0 }; $f(1) )","payload":{},"timeoutMs":60000}"#;
    let t0 = Instant::now();
    let (s, b) = relay.post(path, runaway, &key).await;
    assert_eq!(s, 400, "{b}");
    // Stopped by the clamped time limit, not by the depth limit or the asked 60 s.
    assert!(b.contains("time limit of 150 ms"), "{b}");
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "clamped to 150 ms, took {:?}",
        t0.elapsed()
    );
    Ok(())
}
