//! RabbitMQ source and destination against a real broker and a real PostgreSQL.

mod support_brokers;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use queuebox_brokers::config::{
    BrokerSourceCommon, RabbitMqDestinationConfig, RabbitMqSourceConfig,
};
use queuebox_brokers::ingest::{Ingest, SourceRule};
use queuebox_brokers::rabbitmq::{RabbitMqPublisher, RabbitMqSource};
use queuebox_brokers::{Health, OutboundMessage};
use queuebox_core::Consumption;
use serde_json::json;
use support_brokers::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

async fn channel() -> (Connection, Channel) {
    let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let ch = conn.create_channel().await.unwrap();
    (conn, ch)
}

async fn declare_queue(ch: &Channel, q: &str) {
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
}

async fn publish(
    ch: &Channel,
    q: &str,
    body: &[u8],
    message_id: Option<&str>,
    headers: &[(&str, &str)],
) {
    let mut t = FieldTable::default();
    for (k, v) in headers {
        t.insert((*k).into(), AMQPValue::LongString((*v).into()));
    }
    let mut props = BasicProperties::default()
        .with_headers(t)
        .with_delivery_mode(2);
    if let Some(m) = message_id {
        props = props.with_message_id(m.into());
    }
    ch.basic_publish(
        "".into(),
        q.into(),
        BasicPublishOptions::default(),
        body,
        props,
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

fn source_config(queue: &str, prefetch: u16) -> RabbitMqSourceConfig {
    RabbitMqSourceConfig {
        queue_name: queue.into(),
        connection_url: amqp_url(),
        tls: None,
        prefetch_count: prefetch,
        declare_queue: false,
        event_type_from_header: false,
        attribute_headers: Default::default(),
    }
}

fn common() -> BrokerSourceCommon {
    BrokerSourceCommon {
        event_type_paths: vec!["$.type".into()],
        ..Default::default()
    }
}

fn rmq_source(
    name: &str,
    cfg: RabbitMqSourceConfig,
    store: Arc<dyn queuebox_core::Store>,
) -> (RabbitMqSource, Ingest) {
    rmq_source_with(name, cfg, store, common())
}

fn rmq_source_with(
    name: &str,
    cfg: RabbitMqSourceConfig,
    store: Arc<dyn queuebox_core::Store>,
    common: BrokerSourceCommon,
) -> (RabbitMqSource, Ingest) {
    let ingest = Ingest::new(SourceRule::new(name, &common).unwrap(), store);
    (
        RabbitMqSource::new(name, cfg, Arc::new(ingest.clone()), Health::new()),
        ingest,
    )
}

struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), queuebox_brokers::BrokerError>>,
}

fn spawn(source: RabbitMqSource) -> (Running, Arc<RabbitMqSource>) {
    let source = Arc::new(source);
    let stop = CancellationToken::new();
    let s = source.clone();
    let st = stop.clone();
    let task = tokio::spawn(async move { s.run(st).await });
    (Running { stop, task }, source)
}

impl Running {
    async fn stop(self) -> Result<(), queuebox_brokers::BrokerError> {
        self.stop.cancel();
        self.task.await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_message_becomes_one_inbox_row_and_a_redelivered_copy_deduplicates() {
    let (store, pool, _) = fresh_db("rmq_dedup").await;
    let q = unique("qb_dedup");
    let (_c, ch) = channel().await;
    declare_queue(&ch, &q).await;
    let cfg = source_config(&q, 1);
    let source = rmq_source_with(
        "orders",
        cfg,
        store,
        BrokerSourceCommon {
            consumption: Consumption::Pull,
            ..common()
        },
    )
    .0;
    let (run, source) = spawn(source);

    let body = br#"{"id":"o-1","type":"order.created","n":1}"#;
    let headers = [
        ("x-tenant", "t1"),
        ("X-Correlation-Id", "corr-7"),
        ("x-aggregate-id", "acct-1"),
    ];
    publish(&ch, &q, body, Some("amqp-1"), &headers).await;
    wait_until(WAIT, "the first row", || async {
        key_count(&pool, "orders", "o-1").await == 1
    })
    .await;
    // The same message again (a redelivery or a producer retry), then a sentinel behind it.
    publish(&ch, &q, body, Some("amqp-1"), &headers).await;
    publish(&ch, &q, br#"{"id":"o-2"}"#, None, &[]).await;
    wait_until(WAIT, "the sentinel row", || async {
        key_count(&pool, "orders", "o-2").await == 1
    })
    .await;
    assert_eq!(
        inbox_count(&pool, "orders").await,
        2,
        "the repeat of o-1 stored nothing more"
    );

    let row = inbox_row(&pool, "orders", "o-1").await.unwrap();
    assert_eq!(row["state"], "pending");
    assert_eq!(row["consumption"], "pull");
    assert_eq!(row["event_type"], "order.created");
    assert_eq!(row["aggregate_id"], "acct-1");
    assert_eq!(row["correlation_id"], "corr-7");
    assert_eq!(row["headers"]["x-tenant"], "t1");
    assert_eq!(row["payload"]["n"], 1);
    assert!(source.component().starts_with("rabbitmq."));
    run.stop().await.unwrap();
    // Everything was acknowledged: nothing is left in the queue.
    let left = ch
        .queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(left.message_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_key_falls_back_to_message_id_then_digest() {
    let (store, pool, _) = fresh_db("rmq_keys").await;
    let q = unique("qb_keys");
    let (_c, ch) = channel().await;
    declare_queue(&ch, &q).await;
    let (run, _) = spawn(rmq_source("keys", source_config(&q, 10), store).0);
    publish(
        &ch,
        &q,
        br#"{"id":"from-path"}"#,
        Some("mid-0"),
        &[("x-idempotency-key", "from-header")],
    )
    .await;
    publish(&ch, &q, br#"{"no":"id"}"#, Some("mid-1"), &[]).await;
    publish(&ch, &q, br#"{"no":"id-or-message-id"}"#, None, &[]).await;
    wait_until(WAIT, "three rows", || async {
        inbox_count(&pool, "keys").await == 3
    })
    .await;
    assert_eq!(key_count(&pool, "keys", "from-header").await, 1);
    assert_eq!(key_count(&pool, "keys", "mid-1").await, 1);
    let digest = queuebox_core::keys::digest(br#"{"no":"id-or-message-id"}"#);
    assert_eq!(key_count(&pool, "keys", &digest).await, 1);
    run.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_relay_killed_between_store_and_ack_gets_the_message_again_and_keeps_one_row() {
    let (store, pool, _) = fresh_db("rmq_crash").await;
    let q = unique("qb_crash");
    let (_c, ch) = channel().await;
    declare_queue(&ch, &q).await;
    let (source, ingest) = rmq_source("crashy", source_config(&q, 1), store.clone());
    ingest.crash_after_stores(1);
    let (run, _) = spawn(source);
    publish(&ch, &q, br#"{"id":"c-1"}"#, None, &[]).await;
    let ended = tokio::time::timeout(WAIT, run.task)
        .await
        .expect("the source stopped at the failpoint")
        .unwrap();
    assert!(ended.unwrap_err().to_string().contains("failpoint"));
    assert_eq!(
        key_count(&pool, "crashy", "c-1").await,
        1,
        "the row committed before the 'crash'"
    );

    // The unacknowledged delivery goes back to the queue once the broker sees the
    // connection gone.
    wait_until(WAIT, "the broker to hold the message again", || async {
        ch.queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap()
        .message_count()
            == 1
    })
    .await;

    let (run, _) = spawn(rmq_source("crashy", source_config(&q, 1), store).0);
    publish(&ch, &q, br#"{"id":"c-2"}"#, None, &[]).await;
    wait_until(WAIT, "the row after the redelivery", || async {
        key_count(&pool, "crashy", "c-2").await == 1
    })
    .await;
    assert_eq!(
        key_count(&pool, "crashy", "c-1").await,
        1,
        "the redelivered copy deduplicated"
    );
    run.stop().await.unwrap();
    let left = ch
        .queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(left.message_count(), 0, "the redelivery was acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_failed_store_is_not_acknowledged_and_the_message_comes_back() {
    let (store, pool, _) = fresh_db("rmq_fail").await;
    fail_inserts_of(&pool, "f-1").await;
    let q = unique("qb_fail");
    let (_c, ch) = channel().await;
    declare_queue(&ch, &q).await;
    let (run, _) = spawn(rmq_source("failing", source_config(&q, 1), store).0);
    publish(&ch, &q, br#"{"id":"f-1"}"#, None, &[]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(inbox_count(&pool, "failing").await, 0);
    run.stop().await.unwrap();
    wait_until(WAIT, "the message requeued, not acknowledged", || async {
        ch.queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap()
        .message_count()
            == 1
    })
    .await;

    // The database accepts again: the requeued message is stored.
    heal_inserts(&pool).await;
    let (store2, _, _) = (
        Arc::new(queuebox_core::store::postgres::PgStore::from_pool(
            pool.clone(),
        )),
        (),
        (),
    );
    let (run, _) = spawn(rmq_source("failing", source_config(&q, 1), store2).0);
    wait_until(WAIT, "the row once the store works", || async {
        key_count(&pool, "failing", "f-1").await == 1
    })
    .await;
    run.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_non_json_body_becomes_a_dead_row_and_the_queue_moves_on() {
    let (store, pool, _) = fresh_db("rmq_dead").await;
    let q = unique("qb_dead");
    let (_c, ch) = channel().await;
    declare_queue(&ch, &q).await;
    let (run, _) = spawn(rmq_source("raw", source_config(&q, 1), store).0);
    publish(&ch, &q, b"<xml>not json</xml>", None, &[]).await;
    publish(&ch, &q, br#"{"id":"after"}"#, None, &[]).await;
    wait_until(WAIT, "the row behind the bad one", || async {
        key_count(&pool, "raw", "after").await == 1
    })
    .await;
    let digest = queuebox_core::keys::digest(b"<xml>not json</xml>");
    let row = inbox_row(&pool, "raw", &digest)
        .await
        .expect("the non-JSON message has a row");
    assert_eq!(row["state"], "dead");
    assert_eq!(row["payload"]["raw"], "<xml>not json</xml>");
    assert!(row["last_error"].as_str().unwrap().contains("not JSON"));
    run.stop().await.unwrap();
    let left = ch
        .queue_declare(
            q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(left.message_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_missing_queue_fails_loudly_naming_queue_and_source() {
    let (store, _, _) = fresh_db("rmq_missing").await;
    let q = unique("qb_absent");
    let (source, _) = rmq_source("ghost", source_config(&q, 1), store);
    let e = source.check().await.unwrap_err().to_string();
    assert!(
        e.contains(&q)
            && e.contains("ghost")
            && e.contains("does not exist")
            && e.contains("declareQueue"),
        "{e}"
    );
    let e = tokio::time::timeout(WAIT, source.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
}

fn outbound(topic: &str) -> OutboundMessage {
    let mut headers = serde_json::Map::new();
    headers.insert("x-idempotency-key".into(), "evt-1".into());
    headers.insert("X-Correlation-Id".into(), "corr-9".into());
    OutboundMessage {
        id: uuid::Uuid::new_v4(),
        topic: topic.into(),
        key: Some("k-1".into()),
        aggregate_type: Some("order".into()),
        payload: json!({"hello": "world"}),
        headers,
        attempt: 2,
        routing_key: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_destination_delivers_persistent_confirmed_messages_with_headers_to_a_real_consumer(
) {
    let exchange = unique("qb_ex");
    let (_c, ch) = channel().await;
    // The consumer's side: a queue bound to the exchange by topic pattern.
    ch.exchange_declare(
        exchange.as_str().into(),
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let q = unique("qb_dest");
    declare_queue(&ch, &q).await;
    ch.queue_bind(
        q.as_str().into(),
        exchange.as_str().into(),
        "orders.#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();

    let mut static_headers = std::collections::BTreeMap::new();
    static_headers.insert("x-static".to_string(), "s".to_string());
    let cfg = RabbitMqDestinationConfig {
        url: amqp_url(),
        tls: None,
        exchange: exchange.clone(),
        exchange_from: None,
        exchange_type: Default::default(),
        routing_key_template: "{{ topic }}".into(),
        delivery_mode: Default::default(),
        headers: static_headers,
        timeout_ms: 5000,
    };
    let health = Health::new();
    let publisher = RabbitMqPublisher::new("bus", cfg, health.clone()).unwrap();
    let msg = outbound("orders.created");
    publisher.publish(&msg).await.expect("confirmed publish");
    assert!(health.get("rabbitmq.bus").unwrap().up);

    // An unroutable message (no queue bound for this key) is a failure, not a silent drop.
    let e = publisher
        .publish(&outbound("invoices.created"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("unroutable"), "{e}");

    let mut consumer = ch
        .basic_consume(
            q.as_str().into(),
            "t".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let d = tokio::time::timeout(WAIT, consumer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(d.routing_key.as_str(), "orders.created");
    assert_eq!(
        d.properties.message_id().as_ref().unwrap().as_str(),
        msg.id.to_string()
    );
    assert_eq!(*d.properties.delivery_mode(), Some(2));
    assert_eq!(
        d.properties.content_type().as_ref().unwrap().as_str(),
        "application/json"
    );
    let h = queuebox_brokers::rabbitmq::amqp_headers(d.properties.headers().as_ref());
    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(get("x-topic").as_deref(), Some("orders.created"));
    assert_eq!(get("x-attempt").as_deref(), Some("2"));
    assert_eq!(get("x-idempotency-key").as_deref(), Some("evt-1"));
    assert_eq!(get("X-Correlation-Id").as_deref(), Some("corr-9"));
    assert_eq!(get("x-static").as_deref(), Some("s"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&d.data).unwrap(),
        json!({"hello": "world"})
    );
    d.acker.ack(BasicAckOptions::default()).await.unwrap();
}
