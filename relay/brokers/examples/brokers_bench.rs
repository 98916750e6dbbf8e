//! Broker throughput, QueueBox against the raw client in the same run:
//!   source:      N messages from the broker into the inbox (store, then ack/commit) versus
//!                the raw consumer of the same broker acknowledging each message;
//!   destination: N outbox messages published by the QueueBox publisher (confirm / ack per
//!                message) versus the raw client publishing the same way.
//! Needs the brokers of `scripts/brokers.sh` and the PostgreSQL of `scripts/postgres.sh`.
//!   cargo run --release -p queuebox-brokers --example brokers_bench -- [N] [out.json]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use queuebox_brokers::config::*;
use queuebox_brokers::ingest::{Ingest, SourceRule};
use queuebox_brokers::{kafka, nats, rabbitmq, Health, OutboundMessage};
use queuebox_core::store::postgres::PgStore;
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

fn env(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}
fn uniq(p: &str) -> String {
    format!("{p}{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

async fn fresh_db() -> (Arc<PgStore>, PgPool) {
    let url = queuebox_testkit::fresh_database("bench_brokers").await;
    let store = PgStore::connect(&url, 8).await.unwrap();
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    (Arc::new(store), PgPool::connect(&url).await.unwrap())
}

async fn wait_rows(pool: &PgPool, source: &str, n: i64) {
    loop {
        let c: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = $1")
            .bind(source)
            .fetch_one(pool)
            .await
            .unwrap();
        if c >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn body(i: usize) -> Vec<u8> {
    format!(r#"{{"id":"m-{i}","type":"bench","n":{i}}}"#).into_bytes()
}

fn outbound(i: usize) -> OutboundMessage {
    let mut headers = serde_json::Map::new();
    headers.insert("x-idempotency-key".into(), format!("m-{i}").into());
    OutboundMessage {
        id: uuid::Uuid::new_v4(),
        topic: "bench".into(),
        key: Some(format!("k{}", i % 16)),
        aggregate_type: None,
        payload: json!({"n": i}),
        headers,
        attempt: 0,
        routing_key: None,
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

// ---------------------------------------------------------------- RabbitMQ
async fn rabbit(n: usize) -> serde_json::Value {
    use lapin::options::*;
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};
    let url = env(
        "QUEUEBOX_TEST_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:55672/%2f",
    );
    let conn = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let fill = |q: String| {
        let ch = ch.clone();
        async move {
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
            let mut confirms = Vec::new();
            for i in 0..n {
                confirms.push(
                    ch.basic_publish(
                        "".into(),
                        q.as_str().into(),
                        BasicPublishOptions::default(),
                        &body(i),
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .unwrap(),
                );
            }
            for c in confirms {
                c.await.unwrap();
            }
        }
    };
    // Baseline consume: the raw consumer, prefetch 10, one ack per message.
    let q = uniq("bench_raw_");
    fill(q.clone()).await;
    let cch = conn.create_channel().await.unwrap();
    cch.basic_qos(10, BasicQosOptions::default()).await.unwrap();
    let mut cons = cch
        .basic_consume(
            q.as_str().into(),
            "b".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let t = Instant::now();
    for _ in 0..n {
        let d = cons.next().await.unwrap().unwrap();
        d.acker.ack(BasicAckOptions::default()).await.unwrap();
    }
    let raw_consume = rate(n, t.elapsed());
    // QueueBox source.
    let q = uniq("bench_qb_");
    fill(q.clone()).await;
    let (store, pool) = fresh_db().await;
    let cfg = RabbitMqSourceConfig {
        queue_name: q,
        connection_url: url.clone(),
        tls: None,
        prefetch_count: 10,
        declare_queue: false,
        event_type_from_header: false,
        attribute_headers: Default::default(),
    };
    let ingest = Ingest::new(
        SourceRule::new("rmq", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let src = Arc::new(rabbitmq::RabbitMqSource::new(
        "rmq",
        cfg,
        Arc::new(ingest),
        Health::new(),
    ));
    let stop = CancellationToken::new();
    let t = Instant::now();
    let task = tokio::spawn({
        let (s, st) = (src.clone(), stop.clone());
        async move { s.run(st).await }
    });
    wait_rows(&pool, "rmq", n as i64).await;
    let qb_source = rate(n, t.elapsed());
    stop.cancel();
    task.await.unwrap().unwrap();
    // Baseline publish: one persistent, mandatory publish at a time, waiting for its confirm.
    let ex = uniq("bench_ex_");
    ch.exchange_declare(
        ex.as_str().into(),
        lapin::ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let sink_q = uniq("bench_sink_");
    ch.queue_declare(
        sink_q.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        sink_q.as_str().into(),
        ex.as_str().into(),
        "#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        let payload = serde_json::to_vec(&outbound(i).payload).unwrap();
        ch.basic_publish(
            ex.as_str().into(),
            "bench".into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            &payload,
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let raw_publish = rate(n, t.elapsed());
    let p = rabbitmq::RabbitMqPublisher::new(
        "bench",
        RabbitMqDestinationConfig {
            url,
            tls: None,
            exchange: ex,
            exchange_from: None,
            exchange_type: ExchangeType::Topic,
            routing_key_template: "{{ topic }}".into(),
            delivery_mode: DeliveryMode::Persistent,
            headers: Default::default(),
            timeout_ms: 5000,
        },
        Health::new(),
    )
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        p.publish(&outbound(i)).await.unwrap();
    }
    let qb_publish = rate(n, t.elapsed());
    json!({"source": {"queuebox_msgs_per_s": qb_source, "baseline_raw_consume_ack_msgs_per_s": raw_consume, "ratio": qb_source / raw_consume},
           "destination": {"queuebox_msgs_per_s": qb_publish, "baseline_raw_confirmed_publish_msgs_per_s": raw_publish, "ratio": qb_publish / raw_publish}})
}

// ---------------------------------------------------------------- NATS
async fn nats_bench(n: usize) -> serde_json::Value {
    use async_nats::jetstream::{self, consumer::pull, stream};
    let url = env("QUEUEBOX_TEST_NATS_URL", "nats://127.0.0.1:54222");
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let fill = |name: String| {
        let js = js.clone();
        async move {
            js.create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![format!("{name}.>")],
                ..Default::default()
            })
            .await
            .unwrap();
            let mut acks = Vec::new();
            for i in 0..n {
                acks.push(
                    js.publish(format!("{name}.x"), body(i).into())
                        .await
                        .unwrap(),
                );
            }
            for a in acks {
                a.await.unwrap();
            }
        }
    };
    let s = uniq("BENCHRAW");
    fill(s.clone()).await;
    let c = js
        .get_stream(&s)
        .await
        .unwrap()
        .create_consumer(pull::Config {
            durable_name: Some("raw".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut msgs = c
        .stream()
        .max_messages_per_batch(100)
        .messages()
        .await
        .unwrap();
    let t = Instant::now();
    for _ in 0..n {
        let m = msgs.next().await.unwrap().unwrap();
        m.double_ack().await.unwrap();
    }
    let raw_consume = rate(n, t.elapsed());
    drop(msgs);
    let s = uniq("BENCHQB");
    fill(s.clone()).await;
    let (store, pool) = fresh_db().await;
    let cfg = NatsSourceConfig {
        servers: url.clone(),
        stream: s.clone(),
        durable: "qb".into(),
        filter_subject: None,
        ack_wait_ms: 30_000,
        batch_size: 100,
        jet_stream: true,
        login: Default::default(),
        event_type_from_header: false,
        attribute_headers: Default::default(),
    };
    let ingest = Ingest::new(
        SourceRule::new("nats", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let src =
        Arc::new(nats::NatsSource::new("nats", cfg, Arc::new(ingest), Health::new()).unwrap());
    let stop = CancellationToken::new();
    let t = Instant::now();
    let task = tokio::spawn({
        let (s, st) = (src.clone(), stop.clone());
        async move { s.run(st).await }
    });
    wait_rows(&pool, "nats", n as i64).await;
    let qb_source = rate(n, t.elapsed());
    stop.cancel();
    task.await.unwrap().unwrap();
    // Publish: one JetStream publish at a time, waiting for the stream's ack.
    let out = uniq("BENCHOUT");
    js.create_stream(stream::Config {
        name: out.clone(),
        subjects: vec![format!("{out}.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    js.publish(format!("{out}.bench"), "{}".into())
        .await
        .unwrap()
        .await
        .unwrap(); // warm-up
    let t = Instant::now();
    for i in 0..n {
        let payload = serde_json::to_vec(&outbound(i).payload).unwrap();
        js.publish(format!("{out}.bench"), payload.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let raw_publish = rate(n, t.elapsed());
    let p = nats::NatsPublisher::new(
        "bench",
        NatsDestinationConfig {
            servers: url,
            subject: format!("{out}.{{{{ topic }}}}"),
            subject_from: None,
            jet_stream: true,
            timeout_ms: 5000,
            login: Default::default(),
            headers: Default::default(),
        },
        Health::new(),
    )
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        p.publish(&outbound(i)).await.unwrap();
    }
    let qb_publish = rate(n, t.elapsed());
    json!({"source": {"queuebox_msgs_per_s": qb_source, "baseline_raw_consume_ack_msgs_per_s": raw_consume, "ratio": qb_source / raw_consume},
           "destination": {"queuebox_msgs_per_s": qb_publish, "baseline_raw_acked_publish_msgs_per_s": raw_publish, "ratio": qb_publish / raw_publish}})
}

// ---------------------------------------------------------------- Kafka
async fn kafka_bench(n: usize) -> serde_json::Value {
    use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka::ClientConfig;
    let brokers = env("QUEUEBOX_TEST_KAFKA_BROKERS", "127.0.0.1:59092");
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let fill = |topic: String| {
        let producer = producer.clone();
        async move {
            let futs: Vec<_> = (0..n)
                .map(|i| {
                    let b = body(i);
                    let (p, t) = (producer.clone(), topic.clone());
                    async move {
                        p.send(
                            FutureRecord::<(), _>::to(&t).payload(&b),
                            Duration::from_secs(10),
                        )
                        .await
                        .map_err(|(e, _)| e)
                        .unwrap()
                    }
                })
                .collect();
            futures::future::join_all(futs).await;
        }
    };
    let topic = uniq("bench-raw-");
    fill(topic.clone()).await;
    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", uniq("raw"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[&topic]).unwrap();
    let t = Instant::now();
    let mut got = 0;
    while got < n {
        let m = c.recv().await.unwrap();
        got += 1;
        if got % 100 == 0 || got == n {
            c.commit_message(&m, CommitMode::Async).unwrap();
        }
    }
    let raw_consume = rate(n, t.elapsed());
    let topic = uniq("bench-qb-");
    fill(topic.clone()).await;
    let (store, pool) = fresh_db().await;
    let ingest = Ingest::new(
        SourceRule::new("kafka", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let cfg = KafkaSourceConfig {
        bootstrap_servers: brokers.clone(),
        topics: vec![topic],
        group_id: uniq("qb"),
        auto_offset_reset: OffsetReset::Earliest,
        max_poll_records: 100,
        security_protocol: None,
        sasl_mechanism: None,
        sasl_username: None,
        sasl_password: None,
        tls: None,
        event_type_from_header: false,
        attribute_headers: Default::default(),
    };
    let src =
        Arc::new(kafka::KafkaSource::new("kafka", cfg, Arc::new(ingest), Health::new()).unwrap());
    let stop = CancellationToken::new();
    let t = Instant::now();
    let task = tokio::spawn({
        let (s, st) = (src.clone(), stop.clone());
        async move { s.run(st).await }
    });
    wait_rows(&pool, "kafka", n as i64).await;
    let qb_source = rate(n, t.elapsed());
    stop.cancel();
    task.await.unwrap().unwrap();
    // Publish: one record at a time, waiting for its acks=all acknowledgement.
    let out = uniq("bench-out-");
    // Warm-up: the first record creates the topic and fetches its metadata; neither side
    // should pay for that.
    producer
        .send(
            FutureRecord::to(&out).key("k").payload("{}"),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let t = Instant::now();
    for i in 0..n {
        let payload = serde_json::to_vec(&outbound(i).payload).unwrap();
        producer
            .send(
                FutureRecord::to(&out).key("k").payload(&payload),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
    let raw_publish = rate(n, t.elapsed());
    let p = kafka::KafkaPublisher::new(
        "bench",
        KafkaDestinationConfig {
            bootstrap_servers: brokers,
            topic: out,
            topic_from: None,
            key_template: "{{ key }}".into(),
            timeout_ms: 10_000,
            security_protocol: None,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            tls: None,
            headers: Default::default(),
        },
        Health::new(),
    )
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        p.publish(&outbound(i)).await.unwrap();
    }
    let qb_publish = rate(n, t.elapsed());
    json!({"source": {"queuebox_msgs_per_s": qb_source, "baseline_raw_consume_commit_msgs_per_s": raw_consume, "ratio": qb_source / raw_consume},
           "destination": {"queuebox_msgs_per_s": qb_publish, "baseline_raw_acked_publish_msgs_per_s": raw_publish, "ratio": qb_publish / raw_publish}})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let out = args.get(2).cloned();
    let rabbitmq = rabbit(n).await;
    eprintln!("rabbitmq: {rabbitmq}");
    let nats = nats_bench(n).await;
    eprintln!("nats: {nats}");
    let kafka = kafka_bench(n).await;
    eprintln!("kafka: {kafka}");
    let result = json!({
        "benchmark": "brokers",
        "messages_per_run": n,
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "machine": "2 vCPU shared with the other engineers' builds; brokers and PostgreSQL on loopback",
        "rabbitmq": rabbitmq,
        "nats": nats,
        "kafka": kafka,
    });
    let text = serde_json::to_string_pretty(&result).unwrap();
    println!("{text}");
    if let Some(path) = out {
        std::fs::write(path, text + "\n").unwrap();
    }
}
