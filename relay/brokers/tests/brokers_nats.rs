//! NATS JetStream source and NATS destination against a real nats-server (-js) and a real
//! PostgreSQL.

mod support_brokers;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, stream};
use async_nats::HeaderMap;
use futures::StreamExt;
use queuebox_brokers::config::{BrokerSourceCommon, NatsDestinationConfig, NatsSourceConfig};
use queuebox_brokers::ingest::{Ingest, SourceRule};
use queuebox_brokers::nats::{NatsPublisher, NatsSource};
use queuebox_brokers::{Health, OutboundMessage};
use serde_json::json;
use support_brokers::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

async fn js() -> jetstream::Context {
    jetstream::new(
        async_nats::connect(nats_url())
            .await
            .expect("connect to NATS"),
    )
}

/// A fresh stream capturing `<name>.>`; returns its name (also the subject prefix).
async fn fresh_stream(js: &jetstream::Context, prefix: &str) -> String {
    let name = unique(prefix).to_uppercase();
    js.create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{name}.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    name
}

async fn publish(js: &jetstream::Context, subject: &str, body: &[u8], headers: &[(&str, &str)]) {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, *v);
    }
    js.publish_with_headers(subject.to_string(), h, body.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

fn source_config(stream: &str) -> NatsSourceConfig {
    NatsSourceConfig {
        servers: nats_url(),
        stream: stream.into(),
        durable: "queuebox".into(),
        filter_subject: None,
        ack_wait_ms: 1000,
        batch_size: 10,
        jet_stream: true,
        login: Default::default(),
        event_type_from_header: false,
        attribute_headers: Default::default(),
    }
}

fn nats_source(
    name: &str,
    cfg: NatsSourceConfig,
    store: Arc<dyn queuebox_core::Store>,
) -> (NatsSource, Ingest) {
    let ingest = Ingest::new(
        SourceRule::new(
            name,
            &BrokerSourceCommon {
                event_type_paths: vec!["$.type".into()],
                ..Default::default()
            },
        )
        .unwrap(),
        store,
    );
    (
        NatsSource::new(name, cfg, Arc::new(ingest.clone()), Health::new()).unwrap(),
        ingest,
    )
}

fn spawn(
    source: NatsSource,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), queuebox_brokers::BrokerError>>,
) {
    let stop = CancellationToken::new();
    let st = stop.clone();
    (stop, tokio::spawn(async move { source.run(st).await }))
}

/// (messages not yet delivered, delivered but not acknowledged) of the source's durable.
async fn pending_acks(js: &jetstream::Context, stream: &str) -> (u64, usize) {
    let c: Result<jetstream::consumer::Consumer<pull::Config>, _> = js
        .get_stream(stream)
        .await
        .unwrap()
        .get_consumer("queuebox")
        .await;
    match c {
        Ok(mut c) => {
            let info = c.info().await.unwrap();
            (info.num_pending, info.num_ack_pending)
        }
        Err(_) => (u64::MAX, usize::MAX), // not created yet
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_message_becomes_one_inbox_row_and_a_repeat_deduplicates() {
    let (store, pool, _) = fresh_db("nats_dedup").await;
    let js = js().await;
    let s = fresh_stream(&js, "qbdedup").await;
    let (stop, task) = spawn(nats_source("events", source_config(&s), store).0);
    let headers = [
        ("x-tenant", "t9"),
        ("X-Correlation-Id", "corr-n"),
        ("x-event-type", "from.header"),
    ];
    publish(&js, &format!("{s}.a"), br#"{"id":"n-1"}"#, &headers).await;
    publish(&js, &format!("{s}.a"), br#"{"id":"n-1"}"#, &headers).await;
    publish(
        &js,
        &format!("{s}.a"),
        br#"{"id":"n-2","type":"from.body"}"#,
        &[],
    )
    .await;
    wait_until(WAIT, "two rows", || async {
        inbox_count(&pool, "events").await == 2
    })
    .await;
    wait_until(WAIT, "every message acknowledged", || async {
        pending_acks(&js, &s).await == (0, 0)
    })
    .await;
    assert_eq!(key_count(&pool, "events", "n-1").await, 1);
    let row = inbox_row(&pool, "events", "n-1").await.unwrap();
    assert_eq!(row["consumption"], "push");
    assert_eq!(
        row["event_type"], "from.header",
        "no eventTypePath value: the header gives it"
    );
    assert_eq!(row["correlation_id"], "corr-n");
    assert_eq!(row["headers"]["x-tenant"], "t9");
    assert_eq!(
        inbox_row(&pool, "events", "n-2").await.unwrap()["event_type"],
        "from.body"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_relay_killed_between_store_and_ack_gets_the_message_again_and_keeps_one_row() {
    let (store, pool, _) = fresh_db("nats_crash").await;
    let js = js().await;
    let s = fresh_stream(&js, "qbcrash").await;
    let (source, ingest) = nats_source("crashy", source_config(&s), store.clone());
    ingest.crash_after_stores(1);
    let (_stop, task) = spawn(source);
    publish(&js, &format!("{s}.a"), br#"{"id":"c-1"}"#, &[]).await;
    let ended = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(ended.unwrap_err().to_string().contains("failpoint"));
    assert_eq!(key_count(&pool, "crashy", "c-1").await, 1);
    assert_eq!(
        pending_acks(&js, &s).await.1,
        1,
        "JetStream still waits for the ack"
    );

    let (stop, task) = spawn(nats_source("crashy", source_config(&s), store).0);
    wait_until(WAIT, "the redelivery acknowledged", || async {
        pending_acks(&js, &s).await == (0, 0)
    })
    .await;
    assert_eq!(
        key_count(&pool, "crashy", "c-1").await,
        1,
        "the redelivered copy deduplicated"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_failed_store_is_nacked_and_the_message_comes_back() {
    let (store, pool, _) = fresh_db("nats_fail").await;
    fail_inserts_of(&pool, "f-1").await;
    let js = js().await;
    let s = fresh_stream(&js, "qbfail").await;
    let (stop, task) = spawn(nats_source("failing", source_config(&s), store).0);
    publish(&js, &format!("{s}.a"), br#"{"id":"f-1"}"#, &[]).await;
    // Nak → JetStream redelivers at once: the redelivery counter climbs without ackWait.
    wait_until(WAIT, "redeliveries after naks", || async {
        let c: Result<jetstream::consumer::Consumer<pull::Config>, _> = js
            .get_stream(&s)
            .await
            .unwrap()
            .get_consumer("queuebox")
            .await;
        match c {
            Ok(mut c) => c.info().await.unwrap().num_redelivered >= 1,
            Err(_) => false, // the source has not created its durable yet
        }
    })
    .await;
    assert_eq!(inbox_count(&pool, "failing").await, 0);
    heal_inserts(&pool).await;
    wait_until(WAIT, "the row once the store works", || async {
        key_count(&pool, "failing", "f-1").await == 1
    })
    .await;
    wait_until(WAIT, "acknowledged", || async {
        pending_acks(&js, &s).await == (0, 0)
    })
    .await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_non_json_body_becomes_a_dead_row_and_the_consumer_moves_on() {
    let (store, pool, _) = fresh_db("nats_dead").await;
    let js = js().await;
    let s = fresh_stream(&js, "qbdead").await;
    let (stop, task) = spawn(nats_source("raw", source_config(&s), store).0);
    publish(&js, &format!("{s}.a"), b"plain text", &[]).await;
    publish(&js, &format!("{s}.a"), br#"{"id":"after"}"#, &[]).await;
    wait_until(WAIT, "the row behind the bad one", || async {
        key_count(&pool, "raw", "after").await == 1
    })
    .await;
    let row = inbox_row(&pool, "raw", &queuebox_core::keys::digest(b"plain text"))
        .await
        .unwrap();
    assert_eq!(row["state"], "dead");
    wait_until(WAIT, "both acknowledged", || async {
        pending_acks(&js, &s).await == (0, 0)
    })
    .await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_core_source_is_refused_and_a_missing_stream_fails_loudly() {
    let (store, _, _) = fresh_db("nats_refuse").await;
    let mut cfg = source_config("NOPE");
    cfg.jet_stream = false;
    let ingest = Ingest::new(
        SourceRule::new("core", &BrokerSourceCommon::default()).unwrap(),
        store.clone(),
    );
    let e = NatsSource::new("core", cfg, Arc::new(ingest), Health::new())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("sources.core.jetStream") && e.contains("JetStream only"),
        "{e}"
    );

    let missing = unique("QBMISSING").to_uppercase();
    let (source, _) = nats_source("lost", source_config(&missing), store);
    let e = tokio::time::timeout(WAIT, source.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains(&missing) && e.contains("does not exist"), "{e}");
}

fn outbound(topic: &str) -> OutboundMessage {
    let mut headers = serde_json::Map::new();
    headers.insert("x-idempotency-key".into(), "evt-n".into());
    headers.insert("X-Correlation-Id".into(), "corr-out".into());
    OutboundMessage {
        id: uuid::Uuid::new_v4(),
        topic: topic.into(),
        key: Some("key-7".into()),
        aggregate_type: None,
        payload: json!({"n": 1}),
        headers,
        attempt: 1,
        routing_key: None,
    }
}

fn dest_config(subject: &str, jet_stream: bool) -> NatsDestinationConfig {
    NatsDestinationConfig {
        servers: nats_url(),
        subject: subject.into(),
        subject_from: None,
        jet_stream,
        timeout_ms: 5000,
        login: Default::default(),
        headers: [("x-static".to_string(), "s".to_string())]
            .into_iter()
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_destination_publishes_to_jetstream_with_headers_and_a_real_consumer_reads_them() {
    let js = js().await;
    let s = fresh_stream(&js, "qbdest").await;
    let publisher = NatsPublisher::new(
        "bus",
        dest_config(&format!("{s}.{{{{ topic }}}}"), true),
        Health::new(),
    )
    .unwrap();
    let msg = outbound("orders.created");
    publisher
        .publish(&msg)
        .await
        .expect("acknowledged by the stream");
    // A subject no stream captures: JetStream has nobody to ack, so the publish fails.
    let lost = NatsPublisher::new(
        "lost",
        dest_config("nobody.listens.here", true),
        Health::new(),
    )
    .unwrap();
    assert!(
        lost.publish(&msg).await.is_err(),
        "a JetStream publish without a stream must not count as sent"
    );

    let consumer = js
        .get_stream(&s)
        .await
        .unwrap()
        .create_consumer(pull::Config {
            durable_name: Some("reader".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let m = tokio::time::timeout(WAIT, batch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(m.subject.as_str(), format!("{s}.orders.created"));
    let h = m.headers.as_ref().unwrap();
    let get = |n: &str| h.get(n).map(|v| v.as_str().to_string());
    assert_eq!(get("x-message-id"), Some(msg.id.to_string()));
    assert_eq!(get("Nats-Msg-Id"), Some(msg.id.to_string()));
    assert_eq!(get("x-topic").as_deref(), Some("orders.created"));
    assert_eq!(get("x-attempt").as_deref(), Some("1"));
    assert_eq!(get("x-message-key").as_deref(), Some("key-7"));
    assert_eq!(get("x-idempotency-key").as_deref(), Some("evt-n"));
    assert_eq!(get("X-Correlation-Id").as_deref(), Some("corr-out"));
    assert_eq!(get("x-static").as_deref(), Some("s"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&m.payload).unwrap(),
        json!({"n": 1})
    );
    m.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_destination_republishing_a_row_within_the_duplicate_window_stores_it_once() {
    let js = js().await;
    let s = fresh_stream(&js, "qbdedup").await;
    let publisher = NatsPublisher::new(
        "bus",
        dest_config(&format!("{s}.{{{{ topic }}}}"), true),
        Health::new(),
    )
    .unwrap();
    // The same row published twice (a crash between the publish and the sent mark), and a
    // row header that tries to choose its own deduplication id.
    let mut msg = outbound("orders.created");
    msg.headers
        .insert("Nats-Msg-Id".into(), "chosen-by-the-row".into());
    publisher
        .publish(&msg)
        .await
        .expect("first publish acknowledged");
    publisher
        .publish(&msg)
        .await
        .expect("the repeat is acknowledged too");
    let other = outbound("orders.created");
    publisher
        .publish(&other)
        .await
        .expect("another row acknowledged");

    let mut info = js.get_stream(&s).await.unwrap();
    let stored = info.info().await.unwrap().state.messages;
    assert_eq!(
        stored, 2,
        "the repeat of one row must be stored once, the other row once"
    );
    let first = info.get_raw_message(1).await.unwrap();
    assert_eq!(
        first
            .headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_string()),
        Some(msg.id.to_string()),
        "the deduplication id is the outbox row id, whatever the row's headers say"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_destination_on_core_nats_reaches_a_subscriber() {
    let client = async_nats::connect(nats_url()).await.unwrap();
    let subject = unique("qb.core");
    let mut sub = client.subscribe(subject.clone()).await.unwrap();
    client.flush().await.unwrap();
    let publisher =
        NatsPublisher::new("plain", dest_config(&subject, false), Health::new()).unwrap();
    publisher.publish(&outbound("t")).await.unwrap();
    let m = tokio::time::timeout(WAIT, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.headers.unwrap().get("x-topic").unwrap().as_str(), "t");
}
