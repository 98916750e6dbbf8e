//! The admin inbox replay on the real `queuebox` binary: `POST /admin/inbox/{id}/replay`
//! makes a new outbox row from an inbox row by the same mapping as the inbox relay's
//! forward (`inbox_relay::outbox_row`): same topic, key and payload, the same
//! `x-idempotency-key`, a new `X-Message-Id`; a row whose topic renders empty answers 409.

mod common;

use common::*;

const SOURCES: &str = "
admin:
  enabled: true
  insecure: true
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    topic: 'orders.created'
  typed:
    path: /typed
    idempotencyKeyPath: $.id
    topic: '{{ eventType }}'
    eventTypePath: $.type
";

#[tokio::test]
async fn an_admin_inbox_replay_delivers_the_forwarded_row_again_under_a_new_message_id() {
    let (url, store) = fresh_db("adminreplay").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;

    let (s, b) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"r-1","orderId":"o-9"}"#,
            &[("X-Correlation-Id", "corr-1")],
        )
        .await;
    assert_eq!(s, 202, "{b}");
    eventually("the first delivery", 20, || async {
        rx.deliveries().len() == 1
    })
    .await;
    let id: String = sqlx::query_scalar("SELECT id::text FROM inbox WHERE idempotency_key = 'r-1'")
        .fetch_one(store.pool())
        .await
        .unwrap();

    let (s, b) = relay
        .post(&format!("/admin/inbox/{id}/replay"), "", &[])
        .await;
    assert_eq!(s, 201, "{b}");
    eventually("the replayed delivery", 20, || async {
        rx.deliveries().len() == 2
    })
    .await;
    let d = rx.deliveries();
    let (first, again) = (&d[0], &d[1]);
    assert_eq!(again.body, first.body, "same payload");
    for h in ["x-idempotency-key", "x-message-key", "x-correlation-id"] {
        assert_eq!(again.h(h), first.h(h), "{h} is the forward's");
    }
    assert_eq!(again.h("x-idempotency-key"), Some("r-1"));
    assert_eq!(again.h("x-message-key"), Some("o-9"), "key = aggregate id");
    assert_eq!(again.h("x-correlation-id"), Some("corr-1"));
    assert_ne!(
        again.h("x-message-id"),
        first.h("x-message-id"),
        "a new outbox row"
    );
    let topics: Vec<String> = sqlx::query_scalar("SELECT topic FROM outbox ORDER BY created_at")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(topics, ["orders.created", "orders.created"]);

    // `{{ eventType }}` on a row without an event type renders empty: the relay stores it dead,
    // and the admin replay refuses it by the same mapping.
    let (s, b) = relay.post("/inbox/typed", r#"{"id":"t-1"}"#, &[]).await;
    assert_eq!(s, 202, "{b}");
    eventually("the untyped row is dead", 20, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 't-1' AND state = 'dead'",
        )
        .await
            == 1
    })
    .await;
    let id: String = sqlx::query_scalar("SELECT id::text FROM inbox WHERE idempotency_key = 't-1'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let (s, b) = relay
        .post(&format!("/admin/inbox/{id}/replay"), "", &[])
        .await;
    assert_eq!(s, 409, "{b}");
    assert!(b.contains("renders empty"), "{b}");
}
