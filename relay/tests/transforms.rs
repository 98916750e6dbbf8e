//! Transforms and key expressions through the real binary (docs/relay.md, "Transforms and key
//! expressions"; feature rows 21, 22, 34, 39, 60): start-up refuses an expression that
//! does not compile, naming its key; a source transform reshapes the stored payload or
//! answers 422; route then destination transforms at delivery with `onError`;
//! `POST /admin/transform/test`.

mod common;

use common::*;

const CHECK_BASE: &str = "database:
  url: postgres://app@127.0.0.1:1/app
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9000
routes:
  - topicPattern: 'a.*'
    destination: hooks
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: a.b
";

/// `queuebox check-config` on `yaml`: the problem lines of stderr (it must refuse).
async fn problems_of(yaml: &str) -> (Vec<String>, String) {
    let f = write_config(yaml);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "accepted:\n{yaml}\n{err}");
    let lines = err
        .lines()
        .filter(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim().to_string())
        .collect();
    (lines, err)
}

#[tokio::test]
async fn an_expression_that_does_not_compile_stops_start_up_naming_its_key() {
    let cases = [
        (
            CHECK_BASE.replace(
                "destination: hooks\n",
                "destination: hooks\n    transform:\n      expression: '{ \"a\": '\n",
            ),
            "- routes[0].transform.expression:",
        ),
        (
            CHECK_BASE.replace(
                "baseUrl: http://127.0.0.1:9000\n",
                "baseUrl: http://127.0.0.1:9000\n    transform:\n      expression: 'id +'\n",
            ),
            "- destinations.hooks.transform.expression:",
        ),
        (
            format!("{CHECK_BASE}    transform:\n      expression: '$$$('\n"),
            "- sources.orders.transform.expression:",
        ),
        (
            format!("{CHECK_BASE}    aggregateIdExpression: '$split(subject,\"/\"'\n"),
            "- sources.orders.aggregateIdExpression:",
        ),
        (
            format!("{CHECK_BASE}    transform:\n      expression: id\n      onError: skip\n"),
            "- sources.orders.transform.onError:",
        ),
    ];
    for (yaml, want) in cases {
        let (p, err) = problems_of(&yaml).await;
        assert_eq!(p.len(), 1, "{err}");
        assert!(p[0].starts_with(want), "want {want}:\n{err}");
    }
    // A valid configuration with every key is accepted.
    let ok = format!(
        "{CHECK_BASE}    transform:
      expression: '$merge([$, {{\"via\": $source}}])'
      onError: Dead
      timeoutMs: 50
    aggregateIdExpression: '$split(subject,\"/\")[2]'
    eventTypeExpression: type
    idempotencyKeyExpression: id
admin:
  enabled: true
  insecure: true
  maxTransformTimeoutMs: 500
  maxPayloadBytes: 100
"
    );
    let f = write_config(&ok);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{ok}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs until the recursion's stack or the time limit stops it.
const RECURSION: &str = "( $f := function($x){ $f($x) + 1 }; $f(1) )";
/// Builds a sequence far above the output bound (1 MiB), below the engine's own range cap.
const HUGE: &str = "[1..5000000]";

const RECEIPT: &str = "
sources:
  orders:
    path: /orders
    consumption: pull
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    aggregateIdExpression: '$split(subject,\"/\")[2]'
    transform:
      expression: '{\"order\": $split(subject,\"/\")[2], \"src\": $source, \"tenant\": $headers.\"x-tenant\", \"key\": $idempotencyKey, \"type\": $eventType}'
  either:
    path: /either
    consumption: pull
    idempotencyKeyExpression: 'ref ? ref & \"-\" & $string(n)'
    idempotencyKeyPath: $.id
    aggregateIdPath: [$.orderId, $.OrderId]
  throws:
    path: /throws
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '$error(\"no price\")'
  dead:
    path: /dead
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '$error(\"refused\")'
      onError: Dead
  skip:
    path: /skip
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '$error(\"skipped\")'
      onError: Skip
  loop:
    path: /loop
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '{RECURSION}'
      timeoutMs: 200
  huge:
    path: /huge
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '{HUGE}'
";

async fn stored(
    store: &queuebox_core::store::postgres::PgStore,
    source: &str,
) -> Vec<(serde_json::Value, Option<String>, String)> {
    sqlx::query_as::<_, (serde_json::Value, Option<String>, String)>(
        "SELECT payload, aggregate_id, idempotency_key FROM inbox WHERE source = $1 ORDER BY created_at",
    )
    .bind(source)
    .fetch_all(store.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_source_transform_reshapes_the_stored_payload_or_answers_422_storing_nothing() {
    let (url, store) = fresh_db("transform_receipt").await;
    let rx = Receiver::start().await;
    let yaml = format!("{}{}", base_config(&url, &rx.url()), RECEIPT)
        .replace("{RECURSION}", RECURSION)
        .replace("{HUGE}", HUGE)
        .replace("maxBodyBytes: 1000", "maxBodyBytes: 100000");
    let relay = Relay::start(&yaml).await;

    // Row 39: the aggregate id from the expression over the original body; row 34's
    // positive half: the stored payload is the transform's result, with the §4.5 variables.
    let body = r#"{"id":"e-1","type":"created","subject":"repos/acme/515725"}"#;
    let (s, b) = relay
        .post("/inbox/orders", body, &[("X-Tenant", "acme")])
        .await;
    assert_eq!(s, 202, "{b}");
    let rows = stored(&store, "orders").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].0,
        serde_json::json!({"order": "515725", "src": "orders", "tenant": "acme", "key": "e-1", "type": "created"})
    );
    assert_eq!(rows[0].1.as_deref(), Some("515725"));

    // Row 39: aggregateIdPath [$.orderId, $.OrderId] works for either spelling; the key
    // expression wins over the key path.
    let (s1, _) = relay
        .post(
            "/inbox/either",
            r#"{"id":"x","ref":"a","n":1,"orderId":"o-1"}"#,
            &[],
        )
        .await;
    let (s2, _) = relay
        .post(
            "/inbox/either",
            r#"{"id":"y","ref":"a","n":2,"OrderId":"o-2"}"#,
            &[],
        )
        .await;
    assert_eq!((s1, s2), (202, 202));
    let rows = stored(&store, "either").await;
    let got: Vec<(Option<&str>, &str)> = rows
        .iter()
        .map(|r| (r.1.as_deref(), r.2.as_str()))
        .collect();
    assert_eq!(got, vec![(Some("o-1"), "a-1"), (Some("o-2"), "a-2")]);
    // A key expression with no value falls back to the path.
    let (s, _) = relay.post("/inbox/either", r#"{"id":"z"}"#, &[]).await;
    assert_eq!(s, 202);
    assert_eq!(stored(&store, "either").await[2].2, "z");

    // Row 34: a transform that throws answers 422 and stores nothing (Fail and Dead alike).
    let (s, b) = relay.post("/inbox/throws", r#"{"id":"t-1"}"#, &[]).await;
    assert_eq!(s, 422, "{b}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&b).unwrap()["error"],
        "Transform failed: D3137: no price"
    );
    let (s, _) = relay.post("/inbox/dead", r#"{"id":"d-1"}"#, &[]).await;
    assert_eq!(s, 422);
    // Skip stores the original payload.
    let (s, _) = relay
        .post("/inbox/skip", r#"{"id":"s-1","keep":true}"#, &[])
        .await;
    assert_eq!(s, 202);
    assert_eq!(
        stored(&store, "skip").await[0].0,
        serde_json::json!({"id":"s-1","keep":true})
    );

    // Hostile expressions are bounded: 422 quickly, the relay still answers.
    for path in ["/inbox/loop", "/inbox/huge"] {
        let t0 = std::time::Instant::now();
        let (s, b) = relay.post(path, r#"{"id":"h-1"}"#, &[]).await;
        let took = t0.elapsed();
        assert_eq!(s, 422, "{path}: {b}");
        assert!(
            b.contains("Transform failed: evaluation exceeded"),
            "{path}: {b}"
        );
        assert!(
            took < std::time::Duration::from_secs(3),
            "{path} took {took:?}"
        );
    }
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE source IN ('throws','dead','loop','huge')"
        )
        .await,
        0
    );
    assert_eq!(
        relay
            .metric("queuebox_inbox_rejections_total{reason=\"transform_failed\"}")
            .await,
        4.0
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"source\",strategy=\"Fail\"}")
            .await,
        3.0
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"source\",strategy=\"Skip\"}")
            .await,
        1.0
    );
}

const DELIVERY: &str = "
  shaped:
    type: http
    baseUrl: {RX}
    path: /shaped
    timeoutMs: 3000
    transform:
      expression: '$merge([$, {\"dest\": true, \"sawRoute\": route}])'
  flaky:
    type: http
    baseUrl: {RX}
    path: /flaky
    timeoutMs: 3000
routes:
  - topicPattern: 'a.ok'
    destination: shaped
    transform:
      expression: '$merge([$, {\"route\": true, \"attempt\": $attempt, \"topic\": $topic, \"id\": $messageId}])'
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
  - topicPattern: 'c.retry'
    destination: flaky
    transform:
      expression: '{\"attempt\": $attempt}'
  - topicPattern: 'h.loop'
    destination: rx
    transform:
      expression: '{RECURSION}'
      onError: Dead
  - topicPattern: 'h.huge'
    destination: rx
    transform:
      expression: '{HUGE}'
      onError: Dead
";

async fn outbox_row(store: &queuebox_core::store::postgres::PgStore, topic: &str) -> uuid::Uuid {
    sqlx::query_scalar("INSERT INTO outbox (topic, payload, max_attempts) VALUES ($1, '{\"n\":1}', 2) RETURNING id")
        .bind(topic)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn state_of(
    store: &queuebox_core::store::postgres::PgStore,
    id: uuid::Uuid,
) -> (String, i32, Option<String>) {
    sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn route_then_destination_transforms_at_delivery_follow_on_error() {
    let (url, store) = fresh_db("transform_delivery").await;
    let rx = Receiver::start().await;
    rx.script("/flaky", &[500, 200]);
    let yaml = format!(
        "{}{}",
        base_config(&url, &rx.url()),
        DELIVERY
            .replace("{RX}", &rx.url())
            .replace("{RECURSION}", RECURSION)
            .replace("{HUGE}", HUGE)
    );
    let relay = Relay::start(&yaml).await;
    let ok = outbox_row(&store, "a.ok").await;
    let fail = outbox_row(&store, "b.fail").await;
    let skip = outbox_row(&store, "b.skip").await;
    let dead = outbox_row(&store, "b.dead").await;
    let retry = outbox_row(&store, "c.retry").await;
    let looping = outbox_row(&store, "h.loop").await;
    let huge = outbox_row(&store, "h.huge").await;

    // Row 21: route first (the destination's transform sees the route's field), then the
    // destination; $attempt is 0 on the first delivery.
    eventually("the shaped delivery", 20, || async {
        rx.to("/shaped").len() == 1
    })
    .await;
    assert_eq!(
        rx.to("/shaped")[0].body,
        serde_json::json!({"n": 1, "route": true, "attempt": 0, "topic": "a.ok", "id": ok.to_string(), "dest": true, "sawRoute": true})
    );
    // $attempt counts failed deliveries: the second try after a 500 carries 1.
    eventually("the retried delivery", 20, || async {
        rx.to("/flaky").len() == 2
    })
    .await;
    let bodies: Vec<serde_json::Value> = rx.to("/flaky").iter().map(|d| d.body.clone()).collect();
    assert_eq!(
        bodies,
        vec![
            serde_json::json!({"attempt": 0}),
            serde_json::json!({"attempt": 1})
        ]
    );

    // Row 22: Skip delivers the original payload; Fail goes down the retry path (three
    // tries, attempts 0, 1, 2, then dead, as any failed delivery with maxAttempts 2) with
    // the transform's error; Dead is dead at once.
    eventually("the skipped delivery", 20, || async {
        rx.to("/hooks").len() == 1
    })
    .await;
    assert_eq!(rx.to("/hooks")[0].body, serde_json::json!({"n": 1}));
    assert_eq!(
        rx.to("/hooks")[0].h("x-message-id"),
        Some(skip.to_string().as_str())
    );
    for id in [fail, dead, looping, huge] {
        eventually("the row dead", 20, || async {
            state_of(&store, id).await.0 == "dead"
        })
        .await;
    }
    let (_, attempt, err) = state_of(&store, fail).await;
    assert_eq!(
        (attempt, err.as_deref()),
        (2, Some("Transform failed: D3137: boom"))
    );
    for id in [dead, looping, huge] {
        let (_, attempt, err) = state_of(&store, id).await;
        assert_eq!(
            (attempt, err.as_deref()),
            (0, Some("Transform dead-lettered the message"))
        );
    }
    assert_eq!(state_of(&store, retry).await.0, "sent");
    assert_eq!(
        rx.to("/hooks").len(),
        1,
        "nothing but the skipped row reached rx"
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"route\",strategy=\"Fail\"}")
            .await,
        3.0
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"route\",strategy=\"Dead\"}")
            .await,
        3.0
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"route\",strategy=\"Skip\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn admin_transform_test_answers_behind_the_admin_auth_within_its_limits() {
    let (url, _store) = fresh_db("transform_admin").await;
    let rx = Receiver::start().await;
    let yaml = format!(
        "{}admin:
  enabled: true
  maxPayloadBytes: 400
  maxTransformTimeoutMs: 150
  auth:
    type: api-key
    key: admin-key-1
routes: []
",
        base_config(&url, &rx.url())
    );
    let relay = Relay::start(&yaml).await;
    let key = [("X-API-Key", "admin-key-1")];
    let path = "/admin/transform/test";

    let (s, b) = relay
        .post(path, r#"{"expression":"{\"total\": $sum(items.price), \"t\": $topic}","payload":{"items":[{"price":2},{"price":3}]}}"#, &key)
        .await;
    assert_eq!(s, 200, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["success"], true);
    assert_eq!(
        v["result"],
        serde_json::json!({"total": 5, "t": "test.topic"})
    );
    assert_eq!(v["context"]["attempt"], 0);

    // Without the key: 401; a bad expression: 400 Invalid expression.
    let (s, _) = relay
        .post(path, r#"{"expression":"1","payload":{}}"#, &[])
        .await;
    assert_eq!(s, 401);
    let (s, b) = relay
        .post(path, r#"{"expression":"{ \"a\": ","payload":{}}"#, &key)
        .await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("Invalid expression"), "{b}");
    // Over maxPayloadBytes: 413, even without credentials (the body is read first).
    let big = format!(r#"{{"expression":"1","payload":"{}"}}"#, "x".repeat(500));
    assert_eq!(relay.post(path, &big, &key).await.0, 413);
    assert_eq!(relay.post(path, &big, &[]).await.0, 413);
    // The same cap on every admin route (here replay), also before the auth check.
    let big_replay = format!(r#"{{"topic":"{}"}}"#, "x".repeat(500));
    assert_eq!(relay.post("/admin/replay", &big_replay, &[]).await.0, 413);
    assert_eq!(
        relay.post("/admin/replay", r#"{"topic":"t"}"#, &[]).await.0,
        401
    );
    // An oversized timeoutMs is clamped to maxTransformTimeoutMs (150 ms): the runaway
    // expression stops at that bound, not at the asked 60 s.
    let body = r#"{"expression":"( $f := function($x){ $x > 0 ? $f($x + 1) : 0 }; $f(1) )","payload":{},"timeoutMs":60000}"#;
    let t0 = std::time::Instant::now();
    let (s, b) = relay.post(path, body, &key).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("time limit of 150 ms"), "{b}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(3));
}
