//! Kafka source and destination against a real Kafka (KRaft) and a real PostgreSQL.

mod support_brokers;

use std::sync::Arc;
use std::time::Duration;

use queuebox_brokers::config::{BrokerSourceCommon, KafkaDestinationConfig, KafkaSourceConfig};
use queuebox_brokers::ingest::{Ingest, SourceRule};
use queuebox_brokers::kafka::{header_text, KafkaPublisher, KafkaSource};
use queuebox_brokers::{Health, OutboundMessage};
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::json;
use support_brokers::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn producer() -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("acks", "all")
        .create()
        .unwrap()
}

async fn produce(
    p: &FutureProducer,
    topic: &str,
    key: Option<&str>,
    body: &[u8],
    headers: &[(&str, &str)],
) {
    let mut h = OwnedHeaders::new();
    for (k, v) in headers {
        h = h.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    let mut r = FutureRecord::to(topic).payload(body).headers(h);
    if let Some(k) = key {
        r = r.key(k);
    }
    p.send(r, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .unwrap();
}

fn source_config(topic: &str, group: &str) -> KafkaSourceConfig {
    kafka_source_config(topic, group)
}

fn kafka_source(
    name: &str,
    cfg: KafkaSourceConfig,
    store: Arc<dyn queuebox_core::Store>,
) -> (KafkaSource, Ingest) {
    let ingest = Ingest::new(
        SourceRule::new(name, &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    (
        KafkaSource::new(name, cfg, Arc::new(ingest.clone()), Health::new()).unwrap(),
        ingest,
    )
}

fn spawn(
    source: KafkaSource,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), queuebox_brokers::BrokerError>>,
) {
    let stop = CancellationToken::new();
    let st = stop.clone();
    (stop, tokio::spawn(async move { source.run(st).await }))
}

/// The group's committed offset of partition 0 (-1 when none).
fn committed(topic: &str, group: &str) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    match got.find_partition(topic, 0).unwrap().offset() {
        Offset::Offset(o) => o,
        _ => -1,
    }
}

async fn create_topic(p: &FutureProducer, topic: &str) {
    // Auto-created by the first record; a marker record that every test accounts for.
    produce(p, topic, None, br#"{"id":"marker"}"#, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_record_becomes_one_inbox_row_and_a_repeat_deduplicates() {
    let (store, pool, _) = fresh_db("kafka_dedup").await;
    let topic = unique("qb-dedup");
    let p = producer();
    create_topic(&p, &topic).await;
    let headers = [
        ("x-tenant", "t1"),
        ("X-Correlation-Id", "corr-k"),
        ("x-event-type", "order.created"),
    ];
    produce(&p, &topic, Some("acct-1"), br#"{"id":"k-1"}"#, &headers).await;
    produce(&p, &topic, Some("acct-1"), br#"{"id":"k-1"}"#, &headers).await;
    produce(&p, &topic, Some("rec-key"), br#"{"no":"id"}"#, &[]).await;
    let (stop, task) = spawn(kafka_source("stream", source_config(&topic, &unique("g")), store).0);
    wait_until(WAIT, "three rows", || async {
        inbox_count(&pool, "stream").await == 3
    })
    .await;
    assert_eq!(key_count(&pool, "stream", "k-1").await, 1);
    assert_eq!(
        key_count(&pool, "stream", "rec-key").await,
        1,
        "no id in the body: the record key is the key"
    );
    let row = inbox_row(&pool, "stream", "k-1").await.unwrap();
    assert_eq!(
        row["aggregate_id"], "acct-1",
        "the record key is the aggregate fallback"
    );
    assert_eq!(row["event_type"], "order.created");
    assert_eq!(row["correlation_id"], "corr-k");
    assert_eq!(row["headers"]["x-tenant"], "t1");
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_batch_with_a_failure_in_the_middle_commits_only_the_run_before_it() {
    let (store, pool, _) = fresh_db("kafka_run").await;
    fail_inserts_of(&pool, "r-5").await;
    let topic = unique("qb-run");
    let group = unique("g");
    let p = producer();
    // Offsets 0..=9, one partition; the record at offset 5 cannot be stored.
    for i in 0..10 {
        produce(
            &p,
            &topic,
            None,
            format!(r#"{{"id":"r-{i}"}}"#).as_bytes(),
            &[],
        )
        .await;
    }
    let (stop, task) = spawn(kafka_source("runs", source_config(&topic, &group), store.clone()).0);
    wait_until(WAIT, "the run before the failure stored", || async {
        inbox_count(&pool, "runs").await == 5
    })
    .await;
    wait_until(WAIT, "the commit of offsets 0..=4", || async {
        committed(&topic, &group) == 5
    })
    .await;
    // The partition is held at the failed record: it is reread, nothing after it is stored
    // or committed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(committed(&topic, &group), 5);
    assert_eq!(inbox_count(&pool, "runs").await, 5);
    assert_eq!(key_count(&pool, "runs", "r-6").await, 0);

    heal_inserts(&pool).await;
    wait_until(WAIT, "all ten rows", || async {
        inbox_count(&pool, "runs").await == 10
    })
    .await;
    wait_until(WAIT, "the commit of everything", || async {
        committed(&topic, &group) == 10
    })
    .await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_relay_killed_between_store_and_commit_rereads_and_keeps_one_row() {
    let (store, pool, _) = fresh_db("kafka_crash").await;
    let topic = unique("qb-crash");
    let group = unique("g");
    let p = producer();
    produce(&p, &topic, None, br#"{"id":"c-1"}"#, &[]).await;
    let (source, ingest) = kafka_source("crashy", source_config(&topic, &group), store.clone());
    ingest.crash_after_stores(1);
    let (_stop, task) = spawn(source);
    let ended = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(ended.unwrap_err().to_string().contains("failpoint"));
    assert_eq!(key_count(&pool, "crashy", "c-1").await, 1);
    assert_eq!(committed(&topic, &group), -1, "nothing was committed");

    produce(&p, &topic, None, br#"{"id":"c-2"}"#, &[]).await;
    let (stop, task) = spawn(kafka_source("crashy", source_config(&topic, &group), store).0);
    wait_until(WAIT, "the reread and the next record committed", || async {
        committed(&topic, &group) == 2
    })
    .await;
    assert_eq!(
        key_count(&pool, "crashy", "c-1").await,
        1,
        "the reread copy deduplicated"
    );
    assert_eq!(key_count(&pool, "crashy", "c-2").await, 1);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_non_json_record_becomes_a_dead_row_and_the_partition_moves_on() {
    let (store, pool, _) = fresh_db("kafka_dead").await;
    let topic = unique("qb-dead");
    let group = unique("g");
    let p = producer();
    produce(&p, &topic, None, b"\xff\xfe binary", &[("bin", "\u{1}ok")]).await;
    produce(&p, &topic, None, br#"{"id":"after"}"#, &[]).await;
    let (stop, task) = spawn(kafka_source("raw", source_config(&topic, &group), store).0);
    wait_until(WAIT, "the row behind the bad record", || async {
        key_count(&pool, "raw", "after").await == 1
    })
    .await;
    let row = inbox_row(
        &pool,
        "raw",
        &queuebox_core::keys::digest(b"\xff\xfe binary"),
    )
    .await
    .unwrap();
    assert_eq!(row["state"], "dead");
    wait_until(WAIT, "both offsets committed", || async {
        committed(&topic, &group) == 2
    })
    .await;
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(header_text(b"\xff"), "base64:/w==");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_destination_publishes_acked_records_with_key_and_headers_to_a_real_consumer() {
    let topic = unique("qb-out");
    let cfg = KafkaDestinationConfig {
        bootstrap_servers: kafka_brokers(),
        topic: format!("{topic}-{{{{ aggregateType }}}}"),
        topic_from: None,
        key_template: "{{ key }}".into(),
        timeout_ms: 10_000,
        security_protocol: None,
        sasl_mechanism: None,
        sasl_username: None,
        sasl_password: None,
        tls: None,
        headers: [("x-static".to_string(), "s".to_string())]
            .into_iter()
            .collect(),
    };
    let publisher = KafkaPublisher::new("events", cfg, Health::new()).unwrap();
    let mut headers = serde_json::Map::new();
    headers.insert("x-idempotency-key".into(), "evt-k".into());
    headers.insert("X-Correlation-Id".into(), "corr-kd".into());
    let msg = OutboundMessage {
        id: uuid::Uuid::new_v4(),
        topic: "orders.created".into(),
        key: Some("order-1".into()),
        aggregate_type: Some("order".into()),
        payload: json!({"total": 12}),
        headers,
        attempt: 0,
        routing_key: None,
    };
    publisher.publish(&msg).await.expect("acked by the broker");

    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[&format!("{topic}-order")]).unwrap();
    let m = tokio::time::timeout(WAIT, c.recv()).await.unwrap().unwrap();
    assert_eq!(m.key(), Some(&b"order-1"[..]));
    let h: Vec<(String, String)> = m
        .headers()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h.key.to_string(),
                String::from_utf8_lossy(h.value.unwrap()).to_string(),
            )
        })
        .collect();
    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(get("x-message-id"), Some(msg.id.to_string()));
    assert_eq!(get("x-topic").as_deref(), Some("orders.created"));
    assert_eq!(get("x-attempt").as_deref(), Some("0"));
    assert_eq!(get("x-idempotency-key").as_deref(), Some("evt-k"));
    assert_eq!(get("X-Correlation-Id").as_deref(), Some("corr-kd"));
    assert_eq!(get("x-static").as_deref(), Some("s"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(m.payload().unwrap()).unwrap(),
        json!({"total": 12})
    );
}
