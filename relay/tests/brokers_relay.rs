//! The real `queuebox` binary with a RabbitMQ source and a RabbitMQ destination: a message
//! from a queue goes through the inbox, the inbox relay, the outbox and out to an exchange,
//! where a real consumer reads it with the relay headers and the W3C trace context it came
//! with; a relay process that dies between
//! the store and the ack leaves one row and the broker redelivers. Ignored (reported as not
//! run) unless run with `--ignored`, as scripts/test.d/20-brokers.sh does after starting the
//! brokers.

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn amqp_url() -> String {
    std::env::var("QUEUEBOX_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:55672/%2f".into())
}

fn unique(p: &str) -> String {
    format!("{p}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

async fn channel() -> (Connection, Channel) {
    let c = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    (c, ch)
}

async fn queue_depth(ch: &Channel, q: &str) -> u32 {
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions {
            passive: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap()
    .message_count()
}

/// The shared fast test settings (their `rx` HTTP destination stays unused) plus a
/// RabbitMQ source and a RabbitMQ destination routed from the source's topic.
fn config(db_url: &str, queue: &str, exchange: &str) -> String {
    base_config(db_url, "http://127.0.0.1:9")
        + &format!(
            "  bus:
    type: rabbitmq
    url: {amqp}
    exchange: {exchange}
sources:
  orders:
    type: rabbitmq
    queueName: {queue}
    connectionUrl: {amqp}
    prefetchCount: 5
routes:
  - topicPattern: 'orders'
    destination: bus
",
            amqp = amqp_url()
        )
}

async fn publish(ch: &Channel, q: &str, body: &str, headers: &[(&str, &str)]) {
    let mut t = FieldTable::default();
    for (k, v) in headers {
        t.insert((*k).into(), AMQPValue::LongString((*v).into()));
    }
    ch.basic_publish(
        "".into(),
        q.into(),
        BasicPublishOptions::default(),
        body.as_bytes(),
        BasicProperties::default()
            .with_headers(t)
            .with_delivery_mode(2),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn relay_binary_moves_a_rabbitmq_message_through_inbox_and_outbox_to_an_exchange_with_relay_headers(
) {
    let (db_url, store) = fresh_db("brokers_e2e").await;
    let (_c, ch) = channel().await;
    let q = unique("qb_e2e_in");
    let exchange = unique("qb_e2e_ex");
    let out_q = unique("qb_e2e_out");
    ch.queue_declare(
        q.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    amqp_bound_queue(&ch, &exchange, &out_q, "#").await.unwrap();

    let relay = Relay::start(&config(&db_url, &q, &exchange)).await;
    publish(
        &ch,
        &q,
        r#"{"id":"ord-1","total":5}"#,
        &[
            ("x-tenant", "acme"),
            ("X-Correlation-Id", "corr-e2e"),
            ("traceparent", TRACEPARENT),
            ("tracestate", "congo=t61rcWkgMzE"),
        ],
    )
    .await;

    let mut consumer = ch
        .basic_consume(
            out_q.as_str().into(),
            "t".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let d = tokio::time::timeout(Duration::from_secs(30), consumer.next())
        .await
        .expect("the message reached the exchange")
        .unwrap()
        .unwrap();
    let h = queuebox_brokers::rabbitmq::amqp_headers(d.properties.headers().as_ref());
    let get = |n: &str| {
        h.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("x-source").as_deref(), Some("orders"));
    assert_eq!(get("x-idempotency-key").as_deref(), Some("ord-1"));
    assert_eq!(get("X-Correlation-Id").as_deref(), Some("corr-e2e"));
    assert_eq!(get("x-tenant").as_deref(), Some("acme"));
    assert_eq!(get("x-topic").as_deref(), Some("orders"));
    // The W3C trace context: stored in the inbox row's columns, sent as message headers.
    assert_eq!(get("traceparent").as_deref(), Some(TRACEPARENT));
    assert_eq!(get("tracestate").as_deref(), Some("congo=t61rcWkgMzE"));
    let (traceparent, stored_headers): (Option<String>, serde_json::Value) =
        sqlx::query_as("SELECT traceparent, headers FROM inbox WHERE idempotency_key = 'ord-1'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(traceparent.as_deref(), Some(TRACEPARENT));
    assert!(
        stored_headers.get("traceparent").is_none(),
        "{stored_headers}"
    );
    let inbox_id = get("x-inbox-id").expect("x-inbox-id");
    let outbox_id: String = sqlx::query_scalar("SELECT id::text FROM outbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        d.properties.message_id().as_ref().unwrap().as_str(),
        outbox_id
    );
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&d.data).unwrap()["total"],
        5
    );
    d.acker.ack(BasicAckOptions::default()).await.unwrap();
    let stored: String =
        sqlx::query_scalar("SELECT id::text FROM inbox WHERE idempotency_key = 'ord-1'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(stored, inbox_id);
    eventually(
        "the outbox row marked sent after the confirm",
        20,
        || async {
            scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 1
        },
    )
    .await;
    let (status, body) = relay.get("/health/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("brokers"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn relay_binary_killed_between_store_and_ack_leaves_one_row_and_the_broker_redelivers() {
    let (db_url, store) = fresh_db("brokers_kill").await;
    let (_c, ch) = channel().await;
    let q = unique("qb_kill_in");
    let exchange = unique("qb_kill_ex");
    ch.queue_declare(
        q.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let yaml = config(&db_url, &q, &exchange)
        .replace("  - topicPattern: 'orders'", "  - topicPattern: 'never'");
    let port = free_port();
    let cfg = write_config(&yaml.replace("{port}", &port.to_string()));
    // (Not a QUEUEBOX_* variable: those are configuration overrides.)
    // The failpoint aborts the process right after the first row commits, before the ack.
    let mut child = relay_command(cfg.path(), &["run"])
        .env("QB_FAILPOINT_CRASH_AFTER_STORES", "1")
        .spawn()
        .unwrap();
    publish(&ch, &q, r#"{"id":"k-1"}"#, &[]).await;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the relay died at the failpoint")
        .unwrap();
    assert!(!status.success());
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'k-1'"
        )
        .await,
        1
    );
    eventually(
        "the broker holds the unacknowledged message again",
        10,
        || async { queue_depth(&ch, &q).await == 1 },
    )
    .await;

    let _relay = Relay::start(
        &config(&db_url, &q, &exchange)
            .replace("  - topicPattern: 'orders'", "  - topicPattern: 'never'"),
    )
    .await;
    eventually("the redelivery acknowledged", 30, || async {
        queue_depth(&ch, &q).await == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'k-1'"
        )
        .await,
        1,
        "the redelivered copy deduplicated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn relay_binary_stores_an_unsendable_rabbitmq_message_dead_with_why_and_acknowledges_it() {
    let (db_url, store) = fresh_db("brokers_bad").await;
    let (_c, ch) = channel().await;
    let q = unique("qb_bad_in");
    let exchange = unique("qb_bad_ex");
    ch.queue_declare(
        q.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let _relay = Relay::start(
        &config(&db_url, &q, &exchange)
            .replace("  - topicPattern: 'orders'", "  - topicPattern: 'never'"),
    )
    .await;
    // A key with a control character, a NUL in the payload, framing headers on a good one.
    publish(
        &ch,
        &q,
        r#"{"n":1}"#,
        &[("x-idempotency-key", "bad\u{1}key")],
    )
    .await;
    publish(&ch, &q, r#"{"id":"nul-1","v":"a\u0000b"}"#, &[]).await;
    publish(
        &ch,
        &q,
        r#"{"id":"good-1"}"#,
        &[
            ("Content-Length", "3"),
            ("Host", "sender"),
            ("x-tenant", "acme"),
        ],
    )
    .await;
    eventually("every message acknowledged", 30, || async {
        queue_depth(&ch, &q).await == 0
    })
    .await;
    eventually("three rows", 10, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 3
    })
    .await;

    let dead: Vec<(String, String, serde_json::Value)> =
        sqlx::query_as("SELECT idempotency_key, last_error, payload FROM inbox WHERE state = 'dead' ORDER BY created_at").fetch_all(store.pool()).await.unwrap();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!(
        dead[0].0,
        queuebox_core::keys::digest(br#"{"n":1}"#),
        "stored under the body digest"
    );
    assert!(dead[0].1.contains("control character"), "{}", dead[0].1);
    assert!(dead[1].1.contains("U+0000"), "{}", dead[1].1);
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(dead[1].2["rawBase64"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        raw, br#"{"id":"nul-1","v":"a\u0000b"}"#,
        "the received bytes are kept"
    );

    let h: serde_json::Value =
        sqlx::query_scalar("SELECT headers FROM inbox WHERE idempotency_key = 'good-1'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let names: Vec<String> = h
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.to_ascii_lowercase())
        .collect();
    assert!(
        names.contains(&"x-tenant".into())
            && !names.contains(&"content-length".into())
            && !names.contains(&"host".into()),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn relay_binary_applies_key_expressions_and_the_source_transform_to_rabbitmq_messages() {
    let (db_url, store) = fresh_db("brokers_transform").await;
    let (_c, ch) = channel().await;
    let q = unique("qb_tr_in");
    let exchange = unique("qb_tr_ex");
    ch.queue_declare(
        q.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let yaml = config(&db_url, &q, &exchange)
        .replace("  - topicPattern: 'orders'", "  - topicPattern: 'never'")
        .replace(
            "    prefetchCount: 5\n",
            "    prefetchCount: 5
    idempotencyKeyExpression: '\"k-\" & id'
    aggregateIdExpression: '$split(subject,\"/\")[2]'
    transform:
      expression: 'kind = \"bad\" ? $error(\"refused\") : {\"shaped\": true, \"id\": id, \"src\": $source, \"key\": $idempotencyKey}'
",
        );
    let relay = Relay::start(&yaml).await;
    publish(
        &ch,
        &q,
        r#"{"id":"a-1","kind":"good","subject":"x/y/77"}"#,
        &[],
    )
    .await;
    publish(
        &ch,
        &q,
        r#"{"id":"b-1","kind":"bad","subject":"x/y/78"}"#,
        &[],
    )
    .await;
    eventually("both acknowledged", 30, || async {
        queue_depth(&ch, &q).await == 0
    })
    .await;
    eventually("two rows", 10, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 2
    })
    .await;
    type Row = (
        String,
        Option<String>,
        String,
        serde_json::Value,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT idempotency_key, aggregate_id, state, payload, last_error FROM inbox ORDER BY idempotency_key",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    // The transformed payload is stored; the keys came from the original body.
    assert_eq!(rows[0].0, "k-a-1");
    assert_eq!(rows[0].1.as_deref(), Some("77"));
    assert_eq!(
        rows[0].3,
        serde_json::json!({"shaped": true, "id": "a-1", "src": "orders", "key": "k-a-1"})
    );
    // A refusal stores the original payload dead with why, and the message is acknowledged.
    assert_eq!(rows[1].0, "k-b-1");
    assert_eq!(rows[1].2, "dead");
    assert_eq!(
        rows[1].3,
        serde_json::json!({"id":"b-1","kind":"bad","subject":"x/y/78"})
    );
    assert_eq!(
        rows[1].4.as_deref(),
        Some("Transform failed: D3137: refused")
    );
    assert_eq!(
        relay
            .metric("queuebox_transform_failures_total{stage=\"source\",strategy=\"Fail\"}")
            .await,
        1.0
    );
}

/// `outbox.concurrency` unset: a broker's publishes are not held behind HTTP requests (all 8
/// of which a slow receiver holds here); set, it bounds every destination's publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn broker_publishes_pass_held_http_requests_unless_concurrency_is_set() {
    use std::sync::atomic::Ordering::SeqCst;
    // (setting, HTTP rows claimed before the broker's 20)
    for (concurrency, http_rows) in [(None, 16i64), (Some(2u32), 2)] {
        let (db_url, store) = fresh_db("inflight_mixed").await;
        let rx = Receiver::start().await;
        rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_secs(4));
        let (_c, ch) = channel().await;
        let (exchange, q) = (unique("qb_inflight_ex"), unique("qb_inflight_q"));
        amqp_bound_queue(&ch, &exchange, &q, "#").await.unwrap();
        // Claimed in this order (scheduled_at, sequence): the HTTP rows first.
        for (topic, n) in [("t.http", http_rows), ("t.bus", 20)] {
            sqlx::query("INSERT INTO outbox (topic, payload) SELECT $1, jsonb_build_object('n', g) FROM generate_series(1, $2) g")
                .bind(topic)
                .bind(n)
                .execute(store.pool())
                .await
                .unwrap();
        }
        // The receiver holds each request 4 s, within the destination's timeout.
        let mut y = base_config(&db_url, &rx.url()).replace("timeoutMs: 3000", "timeoutMs: 10000");
        if let Some(n) = concurrency {
            y = y.replace(
                "maxAttempts: 2",
                &format!("maxAttempts: 2\n  concurrency: {n}"),
            );
        }
        y += &format!(
            "  bus:\n    type: rabbitmq\n    url: {}\n    exchange: {exchange}\nroutes:\n  - topicPattern: t.http\n    destination: rx\n  - topicPattern: t.bus\n    destination: bus\n",
            amqp_url()
        );
        let _relay = Relay::start(&y).await;
        let held = concurrency.unwrap_or(8) as usize;
        eventually("the receiver holds its requests", 30, || async {
            rx.in_flight.load(SeqCst) == held
        })
        .await;
        match concurrency {
            None => {
                // Every broker row goes out while the receiver still holds all 8 requests.
                eventually("the broker's rows published", 3, || async {
                    queue_depth(&ch, &q).await == 20
                })
                .await;
                assert_eq!(
                    rx.in_flight.load(SeqCst),
                    8,
                    "the HTTP requests were still held"
                );
            }
            Some(_) => {
                // Both slots are held: nothing reaches the broker until a request ends.
                tokio::time::sleep(Duration::from_millis(1000)).await;
                assert_eq!(rx.in_flight.load(SeqCst), held);
                assert_eq!(
                    queue_depth(&ch, &q).await,
                    0,
                    "no publish beside the held requests"
                );
                eventually("the broker's rows published after them", 30, || async {
                    queue_depth(&ch, &q).await == 20
                })
                .await;
            }
        }
        eventually("every row sent", 30, || async {
            scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await
                == 20 + http_rows
        })
        .await;
        assert!(
            rx.max_in_flight.load(SeqCst) <= held,
            "at most {held} requests at once"
        );
    }
}
