//! A broker restarted mid-run: the source and the publisher reconnect, readiness reports
//! the outage, and nothing is lost. Each test restarts a real broker with
//! `scripts/brokers.sh restart <broker>`, so the tests of this binary run one at a time and
//! apart from the other broker test binaries (cargo runs test binaries one after another).

mod support_brokers;

use std::sync::Arc;
use std::time::Duration;

use queuebox_brokers::config::{
    BrokerSourceCommon, NatsSourceConfig, RabbitMqDestinationConfig, RabbitMqSourceConfig,
};
use queuebox_brokers::ingest::{Ingest, SourceRule};
use queuebox_brokers::{kafka, nats, rabbitmq, Health, OutboundMessage};
use support_brokers::*;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());
const WAIT: Duration = Duration::from_secs(60);

/// Runs `f` until it succeeds or `WAIT` passes (a client's first attempts after a restart
/// may fail while it reconnects).
async fn eventually<F, Fut, E>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let start = std::time::Instant::now();
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if start.elapsed() > WAIT => panic!("{what}: still failing after {WAIT:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn restart(broker: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || brokers_sh(&["restart", broker]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_restart_mid_run_reconnects_source_and_publisher_and_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    use lapin::options::{BasicPublishOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};

    let (store, pool, _) = fresh_db("rmq_restart").await;
    let q = unique("qb_restart");
    let publish_batch = |from: usize, to: usize| {
        let q = q.clone();
        async move {
            let conn = Connection::connect(&amqp_url(), ConnectionProperties::default()).await?;
            let ch = conn.create_channel().await?;
            ch.queue_declare(
                q.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await?;
            for i in from..to {
                let body = format!(r#"{{"id":"m-{i}"}}"#);
                ch.basic_publish(
                    "".into(),
                    q.as_str().into(),
                    BasicPublishOptions::default(),
                    body.as_bytes(),
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await?
                .await?;
            }
            conn.close(200, "done".into()).await?;
            anyhow::Ok(())
        }
    };
    publish_batch(0, 0).await.unwrap(); // declares the queue
    let cfg = RabbitMqSourceConfig {
        queue_name: q.clone(),
        connection_url: amqp_url(),
        tls: None,
        prefetch_count: 10,
        declare_queue: false,
        event_type_from_header: false,
        attribute_headers: Default::default(),
    };
    let health = Health::new();
    let ingest = Ingest::new(
        SourceRule::new("r", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let source = Arc::new(rabbitmq::RabbitMqSource::new(
        "r",
        cfg,
        Arc::new(ingest),
        health.clone(),
    ));
    let stop = CancellationToken::new();
    let task = {
        let (s, st) = (source.clone(), stop.clone());
        tokio::spawn(async move { s.run(st).await })
    };
    // A destination on the same broker, with a queue bound to catch what it publishes.
    let exchange = unique("qb_restart_ex");
    let dest_q = unique("qb_restart_dest");
    let dest = rabbitmq::RabbitMqPublisher::new(
        "d",
        RabbitMqDestinationConfig {
            url: amqp_url(),
            tls: None,
            exchange: exchange.clone(),
            exchange_from: None,
            exchange_type: Default::default(),
            routing_key_template: "{{ topic }}".into(),
            delivery_mode: Default::default(),
            headers: Default::default(),
            timeout_ms: 5000,
        },
        health.clone(),
    )
    .unwrap();
    {
        let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        ch.exchange_declare(
            exchange.as_str().into(),
            lapin::ExchangeKind::Topic,
            lapin::options::ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
        ch.queue_declare(
            dest_q.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
        ch.queue_bind(
            dest_q.as_str().into(),
            exchange.as_str().into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    }
    let out = |i: usize| OutboundMessage {
        id: uuid::Uuid::new_v4(),
        topic: format!("t.{i}"),
        key: None,
        aggregate_type: None,
        payload: serde_json::json!({ "i": i }),
        headers: Default::default(),
        attempt: 0,
        routing_key: None,
    };

    publish_batch(0, 20).await.unwrap();
    dest.publish(&out(0)).await.unwrap();
    wait_until(WAIT, "the first 20 rows", || async {
        inbox_count(&pool, "r").await == 20
    })
    .await;
    assert!(health.ready());

    let restarting = restart("rabbitmq");
    wait_until(WAIT, "readiness to report the broker down", || async {
        !health.ready()
    })
    .await;
    let down = health.down();
    assert!(down.iter().any(|(c, _)| c == "rabbitmq.r"), "{down:?}");
    restarting.await.unwrap();

    eventually("publishing after the restart", || publish_batch(20, 40)).await;
    let second = out(1);
    eventually("the destination after the restart", || {
        dest.publish(&second)
    })
    .await;
    wait_until(WAIT, "all 40 rows", || async {
        inbox_count(&pool, "r").await == 40
    })
    .await;
    wait_until(WAIT, "readiness back up", || async { health.ready() }).await;
    for i in 0..40 {
        assert_eq!(key_count(&pool, "r", &format!("m-{i}")).await, 1, "m-{i}");
    }
    // Both confirmed destination messages survived the restart (durable queue, persistent).
    let conn = Connection::connect(&amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let info = ch
        .queue_declare(
            dest_q.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(info.message_count(), 2);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn nats_restart_mid_run_reconnects_and_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    use async_nats::jetstream::{self, stream};
    let (store, pool, _) = fresh_db("nats_restart").await;
    let name = unique("QBRESTART").to_uppercase();
    let publish_batch = |from: usize, to: usize| {
        let name = name.clone();
        async move {
            let js = jetstream::new(async_nats::connect(nats_url()).await?);
            for i in from..to {
                js.publish(
                    format!("{name}.x"),
                    format!(r#"{{"id":"m-{i}"}}"#).into_bytes().into(),
                )
                .await?
                .await?;
            }
            anyhow::Ok(())
        }
    };
    {
        let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
        js.create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let cfg = NatsSourceConfig {
        servers: nats_url(),
        stream: name.clone(),
        durable: "queuebox".into(),
        filter_subject: None,
        ack_wait_ms: 2000,
        batch_size: 10,
        jet_stream: true,
        login: Default::default(),
        event_type_from_header: false,
        attribute_headers: Default::default(),
    };
    let health = Health::new();
    let ingest = Ingest::new(
        SourceRule::new("n", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let source =
        Arc::new(nats::NatsSource::new("n", cfg, Arc::new(ingest), health.clone()).unwrap());
    let stop = CancellationToken::new();
    let task = {
        let (s, st) = (source.clone(), stop.clone());
        tokio::spawn(async move { s.run(st).await })
    };
    publish_batch(0, 20).await.unwrap();
    wait_until(WAIT, "the first 20 rows", || async {
        inbox_count(&pool, "n").await == 20
    })
    .await;
    restart("nats").await.unwrap();
    eventually("publishing after the restart", || publish_batch(20, 40)).await;
    wait_until(WAIT, "all 40 rows", || async {
        inbox_count(&pool, "n").await == 40
    })
    .await;
    wait_until(WAIT, "readiness back up", || async { health.ready() }).await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_restart_mid_run_reconnects_and_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let (store, pool, _) = fresh_db("kafka_restart").await;
    let topic = unique("qb-restart");
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("acks", "all")
        .create()
        .unwrap();
    let publish_batch = |from: usize, to: usize| {
        let (topic, producer) = (topic.clone(), producer.clone());
        async move {
            for i in from..to {
                let body = format!(r#"{{"id":"m-{i}"}}"#);
                producer
                    .send(
                        FutureRecord::<(), _>::to(&topic).payload(&body),
                        Duration::from_secs(5),
                    )
                    .await
                    .map_err(|(e, _)| e)?;
            }
            anyhow::Ok(())
        }
    };
    publish_batch(0, 20).await.unwrap();
    let cfg = kafka_source_config(&topic, &unique("g"));
    let health = Health::new();
    let ingest = Ingest::new(
        SourceRule::new("k", &BrokerSourceCommon::default()).unwrap(),
        store,
    );
    let source =
        Arc::new(kafka::KafkaSource::new("k", cfg, Arc::new(ingest), health.clone()).unwrap());
    let stop = CancellationToken::new();
    let task = {
        let (s, st) = (source.clone(), stop.clone());
        tokio::spawn(async move { s.run(st).await })
    };
    wait_until(WAIT, "the first 20 rows", || async {
        inbox_count(&pool, "k").await == 20
    })
    .await;
    let restarting = restart("kafka");
    wait_until(WAIT, "readiness to report the broker down", || async {
        !health.ready()
    })
    .await;
    restarting.await.unwrap();
    eventually("producing after the restart", || publish_batch(20, 40)).await;
    wait_until(WAIT, "all 40 rows", || async {
        inbox_count(&pool, "k").await == 40
    })
    .await;
    wait_until(WAIT, "readiness back up", || async { health.ready() }).await;
    for i in 0..40 {
        assert_eq!(key_count(&pool, "k", &format!("m-{i}")).await, 1, "m-{i}");
    }
    stop.cancel();
    task.await.unwrap().unwrap();
}
