//! Rows 23–27 and 51–54: broker destinations and sources against real RabbitMQ, Kafka and
//! NATS (scripts/brokers.sh; part 25-acceptance starts them). Without a broker's URL in the
//! environment its rows are not run.

use std::time::Duration;

use lapin::options::{BasicGetOptions, BasicPublishOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::kit::*;
use super::{NotRun, Outcome};

fn broker_env(var: &str) -> Result<String, NotRun> {
    std::env::var(var).map_err(|_| {
        NotRun(format!(
            "{var} is not set (start the brokers: bash scripts/brokers.sh start; eval \"$(bash scripts/brokers.sh env)\")"
        ))
    })
}

fn unique(p: &str) -> String {
    format!("{p}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

async fn amqp() -> Result<(String, Connection, Channel), NotRun> {
    let url = broker_env("QUEUEBOX_TEST_AMQP_URL")?;
    let c = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| panic!("RabbitMQ at {url}: {e}"));
    let ch = c.create_channel().await.unwrap();
    Ok((url, c, ch))
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

/// Declares `exchange` as a durable topic exchange (accepted only if an existing one is the
/// same) and a new queue bound to it with `pattern`; returns the queue.
async fn bound_queue(ch: &Channel, exchange: &str, pattern: &str) -> Result<String, lapin::Error> {
    let q = unique("acc_q");
    crate::common::amqp_bound_queue(ch, exchange, &q, pattern).await?;
    Ok(q)
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

async fn publish(ch: &Channel, q: &str, body: &[u8], props: BasicProperties) {
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

/// The next message on `q` within 20 s.
async fn get(ch: &Channel, q: &str) -> lapin::message::BasicGetMessage {
    for _ in 0..200 {
        if let Some(m) = ch
            .basic_get(q.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no message on {q} within 20 s");
}

fn header(props: &BasicProperties, name: &str) -> Option<String> {
    let h = props.headers().as_ref()?;
    h.inner().iter().find_map(|(k, v)| {
        if !k.as_str().eq_ignore_ascii_case(name) {
            return None;
        }
        match v {
            AMQPValue::LongString(s) => Some(s.to_string()),
            AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
            // x-attempt travels as an AMQP integer.
            AMQPValue::LongInt(n) => Some(n.to_string()),
            AMQPValue::LongLongInt(n) => Some(n.to_string()),
            AMQPValue::ShortInt(n) => Some(n.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

/// Row 23: the relay declares a durable topic exchange and publishes with routing key = topic,
/// messageId = row id, persistent delivery, x-topic / x-attempt headers; a message no queue is
/// bound for is a failure to retry, not sent.
pub async fn rabbitmq_destination_publishes_persistent_messages_by_topic() -> Outcome {
    let (amqp_url, _c, ch) = amqp().await?;
    let exchange = unique("acc_r23_ex");
    let (url, store) = empty_db("acc_r23").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "  bus:\n    type: rabbitmq\n    url: {amqp_url}\n    exchange: {exchange}\nroutes:\n  - topicPattern: '**'\n    destination: bus\n"
        );
    let _relay = Relay::start(&yaml).await;
    // Nothing bound yet: unroutable, so retried.
    let lost = insert(&store, "nobody.listens", None).await;
    eventually("the unroutable row retried", 20, || async {
        outbox_row(&store, lost).await.1 >= 1
    })
    .await;
    assert_ne!(outbox_row(&store, lost).await.0, "sent");
    // The exchange the relay declared is a durable topic exchange: declaring it so again is
    // accepted (RabbitMQ refuses a declaration that differs).
    let q = bound_queue(&ch, &exchange, "order.#")
        .await
        .expect("the relay's exchange is a durable topic exchange");
    let id = insert(&store, "order.created", Some("k-1")).await;
    let m = get(&ch, &q).await;
    assert_eq!(m.delivery.routing_key.as_str(), "order.created");
    let p = &m.delivery.properties;
    assert_eq!(
        p.message_id().as_ref().map(|s| s.as_str().to_string()),
        Some(id.to_string())
    );
    assert_eq!(*p.delivery_mode(), Some(2), "persistent");
    assert_eq!(header(p, "x-topic").as_deref(), Some("order.created"));
    assert_eq!(header(p, "x-attempt").as_deref(), Some("0"));
    wait_state(&store, id, "sent", 20).await;
    Ok(())
}

/// Row 24: a route's `routingKeyTemplate: "{{ payload.region }}.{{ topic }}"` replaces the
/// destination's routing key (`{{ topic }}`) for its rows; a row without the field gets the
/// route's `routingKeyMissingFieldDefault`; a route without a template keeps the
/// destination's. An unknown placeholder stops the start naming the route's key, and a route
/// template to an HTTP destination (which has no routing key) is refused, not ignored.
pub async fn a_routes_routing_key_template_wins_over_the_destinations() -> Outcome {
    let (amqp_url, _c, ch) = amqp().await?;
    let exchange = unique("acc_r24_ex");
    let (url, store) = empty_db("acc_r24").await;
    let routes = |template: &str, destination: &str| {
        format!(
            "routes:\n  - topicPattern: 'regional.*'\n    destination: {destination}\n    routingKeyTemplate: '{template}'\n    routingKeyMissingFieldDefault: unknown\n  - topicPattern: '**'\n    destination: bus\n"
        )
    };
    let bus =
        format!("  bus:\n    type: rabbitmq\n    url: {amqp_url}\n    exchange: {exchange}\n");
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &bus
        + &routes("{{ payload.region }}.{{ topic }}", "bus");
    let q = bound_queue(&ch, &exchange, "#").await.unwrap();
    let _relay = Relay::start(&yaml).await;
    for (topic, payload, expected) in [
        (
            "regional.created",
            r#"{"region":"eu"}"#,
            "eu.regional.created",
        ),
        (
            "regional.created",
            r#"{"other":1}"#,
            "unknown.regional.created",
        ),
        ("plain.created", r#"{"region":"eu"}"#, "plain.created"),
    ] {
        let id: uuid::Uuid = sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload) VALUES ($1, $2::jsonb) RETURNING id",
        )
        .bind(topic)
        .bind(payload)
        .fetch_one(store.pool())
        .await
        .unwrap();
        let m = get(&ch, &q).await;
        assert_eq!(
            m.delivery.routing_key.as_str(),
            expected,
            "{topic} {payload}"
        );
        wait_state(&store, id, "sent", 20).await;
    }
    for (bad, destination, expect) in [
        ("{{ nope }}", "bus", "routes[0].routingKeyTemplate"),
        ("{{ topic }}", "rx", "routes[0].routingKeyTemplate"),
    ] {
        let yaml = base_config(&url, "http://127.0.0.1:9") + &bus + &routes(bad, destination);
        let (code, out) = run_to_exit(&yaml, &url, &["run"]).await;
        assert_ne!(code, 0, "{bad} to {destination} is refused: {out}");
        assert!(out.contains(expect), "the refusal names {expect}: {out}");
    }
    Ok(())
}

/// Row 25: `exchange: "public.{{ aggregateType }}.v1"` publishes to `public.orders.v1`;
/// `exchangeFrom: topic` to the topic's exchange; an unknown placeholder or column fails the
/// start naming the destination; an empty render is a failure to retry.
pub async fn address_templates_render_from_the_row() -> Outcome {
    let (amqp_url, _c, ch) = amqp().await?;
    let tag = unique("r25");
    let (url, store) = empty_db("acc_r25").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "  templated:\n    type: rabbitmq\n    url: {amqp_url}\n    exchange: 'public.{{{{ aggregateType }}}}.{tag}'\n  fromtopic:\n    type: rabbitmq\n    url: {amqp_url}\n    exchange: unused\n    exchangeFrom: topic\nroutes:\n  - topicPattern: 'tpl.*'\n    destination: templated\n  - topicPattern: '**'\n    destination: fromtopic\n"
        );
    let _relay = Relay::start(&yaml).await;
    // Exchanges and queues first, so the first publish is routable.
    let mut queues = Vec::new();
    for ex in [format!("public.orders.{tag}"), format!("ex_{tag}")] {
        let q = bound_queue(&ch, &ex, "#").await.unwrap();
        queues.push(q);
    }
    let a: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, aggregate_type, payload) VALUES ('tpl.x', 'orders', '{}') RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    let m = get(&ch, &queues[0]).await;
    assert_eq!(m.delivery.exchange.as_str(), format!("public.orders.{tag}"));
    wait_state(&store, a, "sent", 20).await;
    let b = insert(&store, &format!("ex_{tag}"), None).await;
    let m = get(&ch, &queues[1]).await;
    assert_eq!(m.delivery.exchange.as_str(), format!("ex_{tag}"));
    wait_state(&store, b, "sent", 20).await;
    // Without an aggregate type the placeholder renders empty: a failure to retry, never a
    // publish to some other exchange.
    let empty: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload) VALUES ('tpl.y', '{}') RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    eventually("the empty render retried", 20, || async {
        outbox_row(&store, empty).await.1 >= 1
    })
    .await;
    assert_ne!(outbox_row(&store, empty).await.0, "sent");
    for (bad, what) in [
        ("exchange: 'x.{{ nope }}'", "placeholder"),
        ("exchange: x\n    exchangeFrom: nope", "column"),
    ] {
        let yaml = format!(
            "database:\n  url: {{db}}\ndestinations:\n  broken:\n    type: rabbitmq\n    url: {amqp_url}\n    {bad}\n"
        );
        let (code, out) = run_to_exit(&yaml, &url, &["run"]).await;
        assert_ne!(code, 0, "unknown {what}: {out}");
        assert!(
            out.contains("destinations.broken"),
            "unknown {what} names the destination: {out}"
        );
    }
    Ok(())
}

/// A RabbitMQ source reading a new queue: the connection, channel and queue, and the binary
/// started with pull source `rabbit` on it (plus the source `keys`) on a database of its own.
struct RabbitSource {
    _conn: Connection,
    ch: Channel,
    queue: String,
    amqp_url: String,
    store: queuebox_core::store::postgres::PgStore,
    relay: Relay,
}

async fn rabbit_source(tag: &str, keys: &str) -> Result<RabbitSource, NotRun> {
    let (amqp_url, conn, ch) = amqp().await?;
    let queue = unique(&format!("{tag}_q"));
    declare_queue(&ch, &queue).await;
    let (url, store) = empty_db(tag).await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "sources:\n  rabbit:\n    type: rabbitmq\n    queueName: {queue}\n    connectionUrl: {amqp_url}\n    consumption: pull\n{keys}"
        );
    let relay = Relay::start(&yaml).await;
    Ok(RabbitSource {
        _conn: conn,
        ch,
        queue,
        amqp_url,
        store,
        relay,
    })
}

/// Row 50's broker half (and row 49 on a broker source): `initialDelay` holds RabbitMQ rows
/// too, and with `scheduledAtPath` set but absent from the body the AMQP `timestamp`
/// property is the publish time.
pub async fn rabbitmq_rows_are_held_from_their_broker_time() -> Outcome {
    let RabbitSource {
        _conn,
        ch,
        queue: q,
        store,
        relay: _relay, // bound, not `..`: a dropped Relay is killed
        ..
    } = rabbit_source(
        "acc_r50b",
        "    idempotencyKeyPath: $.id\n    initialDelay: 30s\n    scheduledAtPath: $.time\n",
    )
    .await?;
    let ten_ago = (chrono::Utc::now().timestamp() - 10) as u64;
    publish(
        &ch,
        &q,
        br#"{"id":"stamped"}"#,
        BasicProperties::default().with_timestamp(ten_ago),
    )
    .await;
    publish(
        &ch,
        &q,
        br#"{"id":"unstamped"}"#,
        BasicProperties::default(),
    )
    .await;
    eventually("both stored", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 2
    })
    .await;
    // (key, due time in epoch seconds, due time - receipt in seconds)
    let held: Vec<(String, f64, f64)> = sqlx::query_as(
        "SELECT idempotency_key, EXTRACT(EPOCH FROM scheduled_at)::float8, EXTRACT(EPOCH FROM scheduled_at - created_at)::float8 FROM inbox ORDER BY idempotency_key",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(held[0].0, "stamped");
    // Due at the stamp + 30 s, compared with the stamp itself: measured from receipt it would
    // depend on how far into its second the stamp was cut (AMQP timestamps are whole seconds)
    // and on the delivery's latency, which once read 18.48 s under load. The relay stores
    // the remaining delay counted from the database clock at its insert, so the due time
    // lands a few ms after stamp + 30 s (the time from reading the hold to the insert).
    let late = held[0].1 - (ten_ago + 30) as f64;
    assert!(
        (-0.01..2.0).contains(&late),
        "held from the AMQP timestamp ({ten_ago}) + 30 s, {late} s late: {held:?}"
    );
    assert!(
        (15.0..=21.0).contains(&held[0].2),
        "a stamp 10 s before receipt holds about 20 s, not the 30 s from receipt: {held:?}"
    );
    assert!(
        (29.0..=31.0).contains(&held[1].2),
        "no timestamp: held from receipt + 30 s: {held:?}"
    );
    Ok(())
}

/// Row 51: messages from a queue become rows keyed by body, header or messageId; a
/// duplicate is one row; a non-JSON body is one dead row and acknowledged; a missing queue is
/// an error that mentions declareQueue.
pub async fn rabbitmq_source_stores_each_message_once() -> Outcome {
    let RabbitSource {
        _conn,
        ch,
        queue: q,
        amqp_url,
        store,
        relay,
    } = rabbit_source("acc_r51", "    idempotencyKeyPath: $.id\n").await?;
    let mut h = FieldTable::default();
    h.insert(
        "x-idempotency-key".into(),
        AMQPValue::LongString("from-header".into()),
    );
    publish(
        &ch,
        &q,
        br#"{"id":"from-body"}"#,
        BasicProperties::default(),
    )
    .await;
    publish(
        &ch,
        &q,
        br#"{"id":"from-body"}"#,
        BasicProperties::default(),
    )
    .await;
    publish(
        &ch,
        &q,
        br#"{"other":1}"#,
        BasicProperties::default().with_headers(h),
    )
    .await;
    publish(
        &ch,
        &q,
        br#"{"other":2}"#,
        BasicProperties::default().with_message_id("from-message-id".into()),
    )
    .await;
    publish(&ch, &q, b"not json", BasicProperties::default()).await;
    eventually("four rows", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 4
    })
    .await;
    eventually("the queue drained (all acknowledged)", 20, || async {
        queue_depth(&ch, &q).await == 0
    })
    .await;
    let keys: Vec<(String, String)> =
        sqlx::query_as("SELECT idempotency_key, state FROM inbox ORDER BY created_at")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(keys[0], ("from-body".to_string(), "pending".to_string()));
    assert_eq!(keys[1], ("from-header".to_string(), "pending".to_string()));
    assert_eq!(
        keys[2],
        ("from-message-id".to_string(), "pending".to_string())
    );
    assert_eq!(keys[3].1, "dead", "the non-JSON body is stored dead");
    drop(relay);
    let missing = format!(
        "server:\n  httpPort: {{port}}\ndatabase:\n  url: {{db}}\nsources:\n  rabbit:\n    type: rabbitmq\n    queueName: {}\n    connectionUrl: {amqp_url}\n",
        unique("acc_r51_missing")
    );
    let (url2, _) = empty_db("acc_r51b").await;
    let config = write_config(
        &missing
            .replace("{port}", &free_port().to_string())
            .replace("{db}", &url2),
    );
    let mut child = relay_command(config.path(), &["run"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It either exits or keeps retrying the consumer; either way its log names declareQueue.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let _ = child.start_kill();
    let out = child.wait_with_output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("declareQueue"),
        "the error mentions declareQueue: {text}"
    );
    Ok(())
}

/// Row 54: a broker message with no key source is keyed by the SHA-256 digest of its body;
/// identical bodies are one row.
pub async fn a_message_without_a_key_is_keyed_by_its_digest() -> Outcome {
    let RabbitSource {
        _conn,
        ch,
        queue: q,
        store,
        relay: _relay,
        ..
    } = rabbit_source("acc_r54", "").await?;
    for body in [br#"{"same":1}"#, br#"{"same":1}"#, br#"{"same":2}"#] {
        publish(&ch, &q, body, BasicProperties::default()).await;
    }
    eventually("drained", 20, || async { queue_depth(&ch, &q).await == 0 }).await;
    eventually("two rows", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT idempotency_key FROM inbox ORDER BY created_at")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(keys.len(), 2);
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(br#"{"same":1}"#));
    assert!(keys[0].starts_with("sha256:"), "{keys:?}");
    assert!(
        keys[0].contains(&digest),
        "the body's SHA-256: {keys:?} vs {digest}"
    );
    Ok(())
}

/// Row 37: an HTTP source with `require x-tenant equals acme` and `exclude x-test exists`
/// answers `202 {"status":"filtered"}` to `x-tenant: other` and to a message carrying
/// `x-test`, stores nothing for them and counts `queuebox_inbox_filtered_total{source}`; a
/// RabbitMQ source's filtered message is acknowledged (the queue empties) and not stored; a
/// rule with `exists: false` is refused at start-up by its key path.
pub async fn header_filters_drop_messages_without_storing_them() -> Outcome {
    let filter = "    filter:\n      require:\n        - header: x-tenant\n          equals: acme\n      exclude:\n        - header: x-test\n          exists: true\n";
    let http = format!(
        "    filter:\n      exclude:\n        - header: x-test\n          exists: true\n  tenants:\n    path: /tenants\n    consumption: pull\n    idempotencyKeyPath: $.id\n{filter}"
    );
    let RabbitSource {
        _conn,
        ch,
        queue: q,
        store,
        relay,
        ..
    } = rabbit_source("acc_r37", &format!("    idempotencyKeyPath: $.id\n{http}")).await?;
    let count = |source: &'static str| {
        let store = store.clone();
        async move {
            scalar_i64(
                &store,
                &format!("SELECT count(*) FROM inbox WHERE source = '{source}'"),
            )
            .await
        }
    };
    let filtered = r#"{"status":"filtered"}"#;
    let (s, b) = relay
        .post(
            "/inbox/tenants",
            r#"{"id":"t-1"}"#,
            &[("x-tenant", "other")],
        )
        .await;
    assert_eq!(
        (s, b.as_str()),
        (202, filtered),
        "another tenant is filtered"
    );
    let (s, b) = relay
        .post(
            "/inbox/tenants",
            r#"{"id":"t-2"}"#,
            &[("x-tenant", "acme"), ("x-test", "1")],
        )
        .await;
    assert_eq!(
        (s, b.as_str()),
        (202, filtered),
        "a test message is excluded"
    );
    assert_eq!(
        count("tenants").await,
        0,
        "nothing stored for filtered requests"
    );
    let (s, b) = relay
        .post("/inbox/tenants", r#"{"id":"t-3"}"#, &[("X-Tenant", "acme")])
        .await;
    assert_eq!(s, 202, "{b}");
    assert!(b.contains("messageId"), "stored: {b}");
    assert_eq!(count("tenants").await, 1);
    assert_eq!(
        relay
            .metric(r#"queuebox_inbox_filtered_total{source="tenants"}"#)
            .await,
        2.0
    );
    // RabbitMQ: the filtered message is acknowledged, the other stored.
    let mut h = FieldTable::default();
    h.insert("x-test".into(), AMQPValue::LongString("1".into()));
    publish(
        &ch,
        &q,
        br#"{"id":"r-1"}"#,
        BasicProperties::default().with_headers(h),
    )
    .await;
    publish(&ch, &q, br#"{"id":"r-2"}"#, BasicProperties::default()).await;
    eventually("the queue drained", 20, || async {
        queue_depth(&ch, &q).await == 0
    })
    .await;
    eventually("the unfiltered message stored", 20, || async {
        count("rabbit").await == 1
    })
    .await;
    let key: String =
        sqlx::query_scalar("SELECT idempotency_key FROM inbox WHERE source = 'rabbit'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(key, "r-2");
    assert_eq!(
        relay
            .metric(r#"queuebox_inbox_filtered_total{source="rabbit"}"#)
            .await,
        1.0
    );
    let yaml = "database:\n  url: {db}\nsources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    topic: t\n    filter:\n      require:\n        - header: x-a\n          exists: false\n";
    let (code, out) = run_to_exit(yaml, "postgres://127.0.0.1:1/x", &["check-config"]).await;
    assert_ne!(code, 0, "exists: false is refused: {out}");
    assert!(
        out.contains("sources.s.filter.require[0].exists"),
        "the refusal names the key: {out}"
    );
    Ok(())
}

async fn jetstream() -> Result<(String, async_nats::jetstream::Context), NotRun> {
    let url = broker_env("QUEUEBOX_TEST_NATS_URL")?;
    let client = async_nats::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("NATS at {url}: {e}"));
    Ok((url, async_nats::jetstream::new(client)))
}

/// A stream capturing `<NAME>.>`; returns its name.
async fn nats_stream(js: &async_nats::jetstream::Context, prefix: &str) -> String {
    let name = unique(prefix).to_uppercase();
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("{name}.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    name
}

/// Row 27: a JetStream publish with x-message-id / x-topic / x-attempt / x-message-key; with
/// no stream for the subject a failure to retry; `jetStream: false` is sent after the flush.
pub async fn nats_destination_publishes_to_jetstream_with_the_headers() -> Outcome {
    use futures::StreamExt;
    let (nats_url, js) = jetstream().await?;
    let stream = nats_stream(&js, "acc_r27").await;
    let nowhere = unique("acc_r27_nostream");
    let (url, store) = empty_db("acc_r27").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "  js:\n    type: nats\n    servers: {nats_url}\n    subject: {stream}.out\n  lost:\n    type: nats\n    servers: {nats_url}\n    subject: {nowhere}\n  core:\n    type: nats\n    servers: {nats_url}\n    subject: {nowhere}.core\n    jetStream: false\nroutes:\n  - topicPattern: t.js\n    destination: js\n  - topicPattern: t.lost\n    destination: lost\n  - topicPattern: t.core\n    destination: core\n"
        );
    let _relay = Relay::start(&yaml).await;
    let id = insert(&store, "t.js", Some("k-9")).await;
    let lost = insert(&store, "t.lost", None).await;
    let core = insert(&store, "t.core", None).await;
    wait_state(&store, id, "sent", 20).await;
    wait_state(&store, core, "sent", 20).await;
    eventually("the stream-less publish retried", 20, || async {
        outbox_row(&store, lost).await.1 >= 1
    })
    .await;
    assert_ne!(outbox_row(&store, lost).await.0, "sent");
    let consumer = js
        .get_stream(&stream)
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let m = tokio::time::timeout(Duration::from_secs(10), batch.next())
        .await
        .expect("the message is in the stream")
        .unwrap()
        .unwrap();
    let h = m.headers.clone().expect("headers");
    let get = |n: &str| h.get(n).map(|v| v.as_str().to_string());
    assert_eq!(get("x-message-id"), Some(id.to_string()));
    assert_eq!(get("x-topic").as_deref(), Some("t.js"));
    assert_eq!(get("x-attempt").as_deref(), Some("0"));
    assert_eq!(get("x-message-key").as_deref(), Some("k-9"));
    Ok(())
}

/// Row 53: a durable JetStream consumer stores messages and acknowledges them after the
/// commit; while the store fails the message is not acknowledged and comes again.
pub async fn nats_source_acknowledges_after_the_commit_and_redelivers_on_failure() -> Outcome {
    let (nats_url, js) = jetstream().await?;
    let stream = nats_stream(&js, "acc_r53").await;
    let (url, store) = empty_db("acc_r53").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "sources:\n  events:\n    type: nats\n    servers: {nats_url}\n    stream: {stream}\n    durable: queuebox\n    ackWaitMs: 1000\n    consumption: pull\n    idempotencyKeyPath: $.id\n"
        );
    let _relay = Relay::start(&yaml).await;
    let publish = |body: &'static str| {
        let js = js.clone();
        let subject = format!("{stream}.in");
        async move {
            js.publish(subject, body.into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    publish(r#"{"id":"n-1"}"#).await;
    publish(r#"{"id":"n-1"}"#).await;
    eventually("stored once", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 1
    })
    .await;
    let acked = || async {
        let c: Result<
            async_nats::jetstream::consumer::Consumer<
                async_nats::jetstream::consumer::pull::Config,
            >,
            _,
        > = js
            .get_stream(&stream)
            .await
            .unwrap()
            .get_consumer("queuebox")
            .await;
        match c {
            Ok(mut c) => {
                let info = c.info().await.unwrap();
                info.num_pending == 0 && info.num_ack_pending == 0
            }
            Err(_) => false,
        }
    };
    eventually("both acknowledged", 20, acked).await;
    // The store fails: no row, no ack; once it works again the redelivered message is stored.
    refuse_inserts(&store, "inbox").await;
    publish(r#"{"id":"n-2"}"#).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!acked().await, "not acknowledged while the store fails");
    allow_inserts(&store, "inbox").await;
    eventually("redelivered and stored", 30, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'n-2'",
        )
        .await
            == 1
    })
    .await;
    eventually("acknowledged after the commit", 20, acked).await;
    Ok(())
}

mod kafka {
    use std::time::Duration;

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    pub fn producer(brokers: &str) -> FutureProducer {
        ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("acks", "all")
            .create()
            .unwrap()
    }

    pub async fn produce(p: &FutureProducer, topic: &str, body: &[u8], headers: &[(&str, &[u8])]) {
        let mut h = OwnedHeaders::new();
        for (k, v) in headers {
            h = h.insert(Header {
                key: k,
                value: Some(*v),
            });
        }
        p.send(
            FutureRecord::<(), [u8]>::to(topic).payload(body).headers(h),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    }

    /// The group's committed offset of partition 0 (-1 when none).
    pub fn committed(brokers: &str, topic: &str, group: &str) -> i64 {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
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
}

/// Row 26: a record on the topic with key = the row's key and the x-message-id / x-topic /
/// x-attempt headers; the row is sent once the broker acknowledged it.
pub async fn kafka_destination_produces_keyed_records_with_the_headers() -> Outcome {
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::{Headers, Message};
    let brokers = broker_env("QUEUEBOX_TEST_KAFKA_BROKERS")?;
    let topic = unique("acc-r26");
    let (url, store) = empty_db("acc_r26").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "  log:\n    type: kafka\n    bootstrapServers: {brokers}\n    topic: {topic}\nroutes:\n  - topicPattern: '**'\n    destination: log\n"
        );
    let _relay = Relay::start(&yaml).await;
    let id = insert(&store, "order.created", Some("cust-7")).await;
    wait_state(&store, id, "sent", 40).await;
    let c: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[&topic]).unwrap();
    let m = tokio::time::timeout(Duration::from_secs(30), c.recv())
        .await
        .expect("the record is on the topic")
        .unwrap();
    assert_eq!(m.key(), Some(&b"cust-7"[..]));
    let h: Vec<(String, String)> = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| {
                    (
                        h.key.to_string(),
                        String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(get("x-message-id"), Some(id.to_string()));
    assert_eq!(get("x-topic").as_deref(), Some("order.created"));
    assert_eq!(get("x-attempt").as_deref(), Some("0"));
    Ok(())
}

/// Row 52: records are stored and their offsets committed after the store; a failing store
/// is read again from that record; a non-JSON record is one dead row with `{"raw":…}` and a
/// `sha256:` key; a header that is not UTF-8 is stored as `base64:…`.
pub async fn kafka_source_commits_offsets_after_the_store() -> Outcome {
    let brokers = broker_env("QUEUEBOX_TEST_KAFKA_BROKERS")?;
    let topic = unique("acc-r52");
    let group = unique("acc-r52-g");
    let p = kafka::producer(&brokers);
    // The topic exists once its first record is in.
    kafka::produce(
        &p,
        &topic,
        br#"{"id":"k-1"}"#,
        &[("x-bin", &[0xff, 0xfe][..])],
    )
    .await;
    let (url, store) = empty_db("acc_r52").await;
    let yaml = base_config(&url, "http://127.0.0.1:9")
        + &format!(
            "sources:\n  stream:\n    type: kafka\n    bootstrapServers: {brokers}\n    topics: [{topic}]\n    groupId: {group}\n    consumption: pull\n    idempotencyKeyPath: $.id\n"
        );
    let _relay = Relay::start(&yaml).await;
    kafka::produce(&p, &topic, b"not json", &[]).await;
    eventually("two rows", 40, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox").await == 2
    })
    .await;
    let b = brokers.clone();
    let (t, g) = (topic.clone(), group.clone());
    eventually("offsets committed after the store", 30, || {
        let (b, t, g) = (b.clone(), t.clone(), g.clone());
        async move {
            tokio::task::spawn_blocking(move || kafka::committed(&b, &t, &g))
                .await
                .unwrap()
                == 2
        }
    })
    .await;
    let headers: serde_json::Value =
        sqlx::query_scalar("SELECT headers FROM inbox WHERE idempotency_key = 'k-1'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let bin = headers
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-bin"))
        .map(|(_, v)| v.clone());
    assert!(
        bin.as_ref()
            .and_then(|v| v.as_str())
            .is_some_and(|v| v.starts_with("base64:")),
        "{headers}"
    );
    let (key, state, payload): (String, String, serde_json::Value) = sqlx::query_as(
        "SELECT idempotency_key, state, payload FROM inbox WHERE idempotency_key <> 'k-1'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(key.starts_with("sha256:"), "{key}");
    assert_eq!(state, "dead");
    assert!(payload.get("raw").is_some(), "{payload}");
    // A failing store: the record is read again once the store works.
    refuse_inserts(&store, "inbox").await;
    kafka::produce(&p, &topic, br#"{"id":"k-3"}"#, &[]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (b, t, g) = (brokers.clone(), topic.clone(), group.clone());
    let offset = tokio::task::spawn_blocking(move || kafka::committed(&b, &t, &g))
        .await
        .unwrap();
    assert_eq!(offset, 2, "nothing committed past the failing record");
    allow_inserts(&store, "inbox").await;
    eventually("read again and stored", 40, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'k-3'",
        )
        .await
            == 1
    })
    .await;
    Ok(())
}
