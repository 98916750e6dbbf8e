//! Rows 11 and 40–49: webhooks on push sources relayed into the outbox and delivered, and
//! pull sources left to their clients.

use std::time::Duration;

use super::kit::*;
use super::Outcome;

/// A push source `stripe` whose topic is `{{ source }}.{{ eventType }}`, routed to the receiver.
const STRIPE: &str = "routes:
  - topicPattern: '**'
    destination: rx
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    aggregateIdPath: $.customer
    topic: '{{ source }}.{{ eventType }}'
  other:
    path: /other
    idempotencyKeyPath: $.id
    aggregateIdPath: $.customer
    topic: other.event
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyPath: $.id
";

/// Row 11: relayed rows carry `outbox.maxAttempts`, or `inbox.relay.maxAttempts` when set.
pub async fn max_attempts_settings_are_stamped_on_relayed_rows() -> Outcome {
    for (tag, relay_max, expected) in [("acc_r11a", None, 7), ("acc_r11b", Some(10), 10)] {
        let (url, store) = empty_db(tag).await;
        let rx = Receiver::start().await;
        let mut yaml = outbox_setting(base_config(&url, &rx.url()), "maxAttempts", "7");
        if let Some(m) = relay_max {
            yaml = yaml.replacen(
                "  relay:\n",
                &format!("  relay:\n    maxAttempts: {m}\n"),
                1,
            );
        }
        let relay = Relay::start(&format!("{yaml}{STRIPE}")).await;
        let (s, b) = relay
            .post(
                "/inbox/stripe",
                r#"{"id":"e1","type":"x","customer":"c"}"#,
                &[],
            )
            .await;
        assert_eq!(s, 202, "{b}");
        eventually("relayed", 20, || async {
            scalar_i64(&store, "SELECT count(*) FROM outbox").await == 1
        })
        .await;
        let max: i32 = sqlx::query_scalar("SELECT max_attempts FROM outbox")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(max, expected);
    }
    Ok(())
}

/// Row 40: the webhook's inbox row is processed, its outbox row has the rendered topic, the
/// aggregate id as key and the relay headers, and the receiver gets the payload.
pub async fn a_push_webhook_is_relayed_to_the_outbox_with_the_relay_headers() -> Outcome {
    let (relay, rx, store) = start("acc_r40", STRIPE).await;
    let body = r#"{"id":"evt_1","type":"payment.succeeded","customer":"cus_9","amount":12}"#;
    assert_eq!(relay.post("/inbox/stripe", body, &[]).await.0, 202);
    eventually("delivered", 20, || async { rx.to("/hooks").len() == 1 }).await;
    let (inbox_id, state): (String, String) = sqlx::query_as("SELECT id::text, state FROM inbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    eventually("inbox row processed", 10, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE state = 'processed'",
        )
        .await
            == 1
    })
    .await;
    let _ = state;
    let (topic, key, headers): (String, Option<String>, serde_json::Value) =
        sqlx::query_as("SELECT topic, key, headers FROM outbox")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(topic, "stripe.payment.succeeded");
    assert_eq!(key.as_deref(), Some("cus_9"));
    assert_eq!(headers["x-inbox-id"], serde_json::json!(inbox_id));
    assert_eq!(headers["x-source"], "stripe");
    assert_eq!(headers["x-idempotency-key"], "evt_1");
    let d = &rx.to("/hooks")[0];
    assert_eq!(d.body["amount"], 12);
    assert_eq!(d.h("x-inbox-id"), Some(inbox_id.as_str()));
    Ok(())
}

/// The binary with its relays off receives `posts` (path, body), so the rows pile up
/// pending; then two replicas with the relays on start on the same database.
async fn pile_up_then_two_replicas(
    url: &str,
    rx: &Receiver,
    posts: &[(&str, String)],
) -> [Relay; 2] {
    let receive_only = base_config(url, &rx.url())
        .replacen("  relay:\n", "  relay:\n    enabled: false\n", 1)
        .replacen("outbox:\n", "outbox:\n  enabled: false\n", 1);
    let mut a = Relay::start(&format!("{receive_only}{STRIPE}")).await;
    for (path, body) in posts {
        assert_eq!(a.post(path, body, &[]).await.0, 202, "{body}");
    }
    a.kill();
    let yaml = format!("{}{STRIPE}", base_config(url, &rx.url()));
    [Relay::start(&yaml).await, Relay::start(&yaml).await]
}

/// Row 41: 100 pending push rows and two relays → exactly 100 outbox rows, 100 processed.
pub async fn two_replicas_forward_each_push_row_once() -> Outcome {
    let (url, store) = empty_db("acc_r41").await;
    let rx = Receiver::start().await;
    let posts: Vec<(&str, String)> = (0..100)
        .map(|i| {
            (
                "/inbox/other",
                format!(r#"{{"id":"e{i}","customer":"c{}"}}"#, i % 7),
            )
        })
        .collect();
    let _replicas = pile_up_then_two_replicas(&url, &rx, &posts).await;
    eventually("100 processed", 40, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE state = 'processed'",
        )
        .await
            == 100
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM outbox").await, 100);
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(DISTINCT headers->>'x-inbox-id') FROM outbox"
        )
        .await,
        100
    );
    Ok(())
}

/// Row 42: a sender's own `x-inbox-id` (any case) is replaced by the real one.
pub async fn a_senders_relay_headers_are_replaced() -> Outcome {
    let (relay, rx, store) = start("acc_r42", STRIPE).await;
    let (s, _) = relay
        .post(
            "/inbox/other",
            r#"{"id":"f1","customer":"c"}"#,
            &[("X-Inbox-Id", "fake"), ("x-source", "fake")],
        )
        .await;
    assert_eq!(s, 202);
    eventually("delivered", 20, || async { rx.to("/hooks").len() == 1 }).await;
    let inbox_id: String = sqlx::query_scalar("SELECT id::text FROM inbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let d = &rx.to("/hooks")[0];
    assert_eq!(d.h("x-inbox-id"), Some(inbox_id.as_str()));
    assert_eq!(d.h("x-source"), Some("other"));
    let headers: serde_json::Value = sqlx::query_scalar("SELECT headers FROM outbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let fakes = headers
        .as_object()
        .unwrap()
        .values()
        .filter(|v| *v == "fake")
        .count();
    assert_eq!(
        fakes, 0,
        "no copy of the sender's value survives: {headers}"
    );
    Ok(())
}

/// Row 43: an `{{ eventType }}` topic without an event type → the inbox row is dead; a
/// config with such a topic and no event-type source is refused at start-up.
pub async fn an_empty_topic_is_dead_and_such_a_config_is_refused() -> Outcome {
    let typed = format!("{STRIPE}  typed:\n    path: /typed\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    topic: '{{{{ eventType }}}}'\n");
    let (relay, _rx, store) = start("acc_r43", &typed).await;
    assert_eq!(
        relay.post("/inbox/typed", r#"{"id":"n1"}"#, &[]).await.0,
        202
    );
    eventually("dead", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox WHERE state = 'dead'").await == 1
    })
    .await;
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM outbox").await, 0);
    let (url, _) = empty_db("acc_r43b").await;
    let yaml = "database:\n  url: {db}\nsources:\n  untyped:\n    path: /untyped\n    topic: 'x.{{ eventType }}'\n";
    let (code, out) = run_to_exit(yaml, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("untyped"), "the error names the source: {out}");
    Ok(())
}

/// Row 46: a pull source's rows stay pending for their clients; no route or destination needed.
pub async fn the_relay_never_touches_pull_rows() -> Outcome {
    let (url, store) = empty_db("acc_r46").await;
    let yaml = "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: DB\ninbox:\n  relay:\n    pollIntervalMs: 20\nsources:\n  jobs:\n    path: /jobs\n    consumption: pull\n    idempotencyKeyPath: $.id\n"
        .replace("DB", &url);
    let relay = Relay::start(&yaml).await;
    for i in 0..3 {
        assert_eq!(
            relay
                .post("/inbox/jobs", &format!(r#"{{"id":"j{i}"}}"#), &[])
                .await
                .0,
            202
        );
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let untouched = scalar_i64(
        &store,
        "SELECT count(*) FROM inbox WHERE consumption = 'pull' AND state = 'pending' AND attempt = 0 AND claim_token IS NULL",
    )
    .await;
    assert_eq!(untouched, 3);
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM outbox").await, 0);
    Ok(())
}

/// Row 49: `initialDelay: 30s` → scheduled_at ≈ receipt + 30 s; the push relay leaves the row
/// alone and a pull client's claim does not take it (though it takes a due row of the same
/// source, and the held row once its time has come); `30` and `-5s` are refused at start-up.
pub async fn initial_delay_holds_rows_back() -> Outcome {
    let delayed = STRIPE
        .replace(
            "    topic: other.event\n",
            "    topic: other.event\n    initialDelay: 30s\n",
        )
        .replace(
            "    consumption: pull\n",
            "    consumption: pull\n    initialDelay: 30s\n",
        );
    let (url, store) = empty_db("acc_r49").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{delayed}", base_config(&url, &rx.url()))).await;
    for (path, body) in [
        ("/inbox/other", r#"{"id":"d1","customer":"c"}"#),
        ("/inbox/jobs", r#"{"id":"p1"}"#),
    ] {
        assert_eq!(relay.post(path, body, &[]).await.0, 202, "{body}");
    }
    for key in ["d1", "p1"] {
        let secs: f64 = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM scheduled_at - created_at)::float8 FROM inbox WHERE idempotency_key = $1",
        )
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert!(
            (29.0..=31.0).contains(&secs),
            "{key} scheduled {secs} s after receipt"
        );
    }
    // A due pull row of the same source: the client's claims run, and take only this one.
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('jobs', 'due', '{}', 'pull')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let mut o = queuebox_core::WorkerOptions::new("jobs");
    o.poll_interval = Duration::from_millis(20);
    let worker = queuebox_core::Worker::connect(&url, o)
        .await
        .expect("worker connects");
    let first = tokio::time::timeout(Duration::from_secs(10), worker.next())
        .await
        .expect("the due row is claimed")
        .unwrap()
        .expect("a task");
    assert_eq!(first.message().idempotency_key, "due");
    first.complete().await.unwrap();
    // A second of claims (20 ms polls) by the pull client, and of the push relay's.
    let early = tokio::time::timeout(Duration::from_millis(1000), worker.next()).await;
    assert!(
        early.is_err(),
        "a pull claim took a row before its initialDelay: {:?}",
        early.map(|t| t.map(|t| t.map(|t| t.message().idempotency_key.clone())))
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key IN ('d1', 'p1') AND state = 'pending' AND attempt = 0"
        )
        .await,
        2,
        "both delayed rows untouched"
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM outbox").await, 0);
    assert!(rx.deliveries().is_empty());
    // Its time come, the held pull row is claimed.
    sqlx::query("UPDATE inbox SET scheduled_at = now() WHERE idempotency_key = 'p1'")
        .execute(store.pool())
        .await
        .unwrap();
    let held = tokio::time::timeout(Duration::from_secs(10), worker.next())
        .await
        .expect("claimed once due")
        .unwrap()
        .expect("a task");
    assert_eq!(held.message().idempotency_key, "p1");
    held.complete().await.unwrap();
    worker.shutdown().await;
    for bad in ["30", "-5s"] {
        let (url, _) = empty_db("acc_r49b").await;
        let yaml = format!(
            "database:\n  url: {{db}}\nsources:\n  s:\n    path: /s\n    initialDelay: '{bad}'\n"
        );
        let (code, out) = run_to_exit(&yaml, &url, &["run"]).await;
        assert_ne!(code, 0, "initialDelay {bad}: {out}");
        assert!(
            out.contains("initialDelay"),
            "the error names the key: {out}"
        );
    }
    Ok(())
}

/// Row 50: with `scheduledAtPath` / `scheduledAtHeader` and `initialDelay`, a row is held
/// until `min(publish time, receipt) + initialDelay`: two messages stored in the reverse of
/// their publish order are delivered in publish order, the header wins over the body path,
/// a future publish time holds from receipt, and a value that is no time (`yesterday`) holds
/// from receipt with one warn line naming the source. The broker half (AMQP `timestamp`) is
/// `brokers::rabbitmq_rows_are_held_from_their_broker_time`.
pub async fn publish_time_orders_the_claim() -> Outcome {
    let (url, store) = empty_db("acc_r50").await;
    let rx = Receiver::start().await;
    let yaml = base_config(&url, &rx.url())
        + "routes:
  - topicPattern: '**'
    destination: rx
sources:
  ordered:
    path: /ordered
    idempotencyKeyPath: $.id
    topic: ordered.event
    initialDelay: 4s
    scheduledAtPath: $.time
    scheduledAtHeader: X-Published-At
";
    let port = free_port();
    let config = write_config(&yaml.replace("{port}", &port.to_string()));
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = relay_command(config.path(), &["run"])
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut relay = Relay {
        child,
        port,
        config,
    };
    relay.wait_listening().await;
    let now = chrono::Utc::now();
    let at = |secs: i64| (now + chrono::Duration::seconds(secs)).to_rfc3339();
    let posts = [
        // (id, body time, header): b is published after a but stored first.
        ("b", at(-2), None),
        ("a", at(-3), None),
        // The header (ms since 1970) wins over the body's later time: held least.
        (
            "e",
            at(-1),
            Some(
                (now - chrono::Duration::seconds(4))
                    .timestamp_millis()
                    .to_string(),
            ),
        ),
        ("future", at(3600), None),
        ("bad", "yesterday".to_string(), None),
    ];
    for (id, time, header) in &posts {
        let body = format!(r#"{{"id":"{id}","time":"{time}"}}"#);
        let headers: Vec<(&str, &str)> = header
            .iter()
            .map(|h| ("X-Published-At", h.as_str()))
            .collect();
        assert_eq!(relay.post("/inbox/ordered", &body, &headers).await.0, 202);
    }
    let held = |id: &'static str| {
        let store = &store;
        async move {
            sqlx::query_scalar::<_, f64>(
                "SELECT EXTRACT(EPOCH FROM scheduled_at - created_at)::float8 FROM inbox WHERE idempotency_key = $1",
            )
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap()
        }
    };
    for id in ["future", "bad"] {
        let s = held(id).await;
        assert!((3.5..=4.5).contains(&s), "{id}: held {s} s after receipt");
    }
    assert!(
        held("e").await <= 0.5,
        "the header's time: held {}",
        held("e").await
    );
    eventually("all five delivered", 30, || async {
        rx.deliveries().len() == 5
    })
    .await;
    let order: Vec<String> = rx
        .deliveries()
        .iter()
        .map(|d| d.body["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(order[..3], ["e", "a", "b"], "publish order: {order:?}");
    let warnings = std::fs::read_to_string(log.path()).unwrap();
    let lines: Vec<&str> = warnings
        .lines()
        .filter(|l| l.contains("publish time") && l.contains("ordered"))
        .collect();
    assert_eq!(lines.len(), 1, "one warn line for `yesterday`: {warnings}");
    assert!(lines[0].contains("WARN"), "{}", lines[0]);
    // The keys need initialDelay; the error names both.
    let (url, _) = empty_db("acc_r50c").await;
    let yaml =
        "database:\n  url: {db}\nsources:\n  s:\n    path: /s\n    scheduledAtPath: $.time\n";
    let (code, out) = run_to_exit(yaml, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("scheduledAtPath") && out.contains("initialDelay"),
        "the error names both keys: {out}"
    );
    super::brokers::rabbitmq_rows_are_held_from_their_broker_time().await
}

/// Row 44: while the outbox refuses inserts (a trigger raises) the inbox row is not lost: it
/// stays claimed, goes back to be claimed again after its lease, the failures are counted,
/// and once inserts work it is forwarded.
pub async fn a_failed_forward_is_retried_after_the_lease() -> Outcome {
    let (url, store) = empty_db("acc_r44").await;
    let rx = Receiver::start().await;
    let yaml = base_config(&url, &rx.url()).replacen(
        "    claimTimeoutMs: 5000\n",
        "    claimTimeoutMs: 1000\n",
        2,
    );
    let relay = Relay::start(&format!("{yaml}{STRIPE}")).await;
    refuse_inserts(&store, "outbox").await;
    assert_eq!(
        relay
            .post("/inbox/other", r#"{"id":"r1","customer":"c"}"#, &[])
            .await
            .0,
        202
    );
    eventually("relay errors counted", 20, || async {
        relay.metric("queuebox_inbox_relay_errors_total").await >= 2.0
    })
    .await;
    let state: String = sqlx::query_scalar("SELECT state FROM inbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(
        state == "processing" || state == "pending",
        "not lost, not dead: {state}"
    );
    allow_inserts(&store, "outbox").await;
    eventually("forwarded once inserts work", 20, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE state = 'processed'",
        )
        .await
            == 1
    })
    .await;
    eventually("delivered", 20, || async { rx.to("/hooks").len() == 1 }).await;
    Ok(())
}

/// Row 45: push rows of one aggregate, across two sources, are forwarded in the order they
/// arrived; while a row of an aggregate is claimed (`processing`) or an earlier one is pending,
/// the relays' claims take none of that aggregate's later rows, though other aggregates pass.
pub async fn one_aggregate_is_forwarded_in_arrival_order_across_sources() -> Outcome {
    let (url, store) = empty_db("acc_r45").await;
    let rx = Receiver::start().await;
    // Alternating sources, one aggregate.
    let posts: Vec<(&str, String)> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                (
                    "/inbox/stripe",
                    format!(r#"{{"id":"s{i}","type":"t","customer":"agg","n":{i}}}"#),
                )
            } else {
                (
                    "/inbox/other",
                    format!(r#"{{"id":"o{i}","customer":"agg","n":{i}}}"#),
                )
            }
        })
        .collect();
    let replicas = pile_up_then_two_replicas(&url, &rx, &posts).await;
    eventually("8 delivered", 30, || async { rx.to("/hooks").len() == 8 }).await;
    let forwarded: Vec<i64> =
        sqlx::query_scalar("SELECT (payload->>'n')::bigint FROM outbox ORDER BY sequence")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(
        forwarded,
        (0..8).collect::<Vec<i64>>(),
        "forwarded in arrival order"
    );
    let delivered: Vec<i64> = rx
        .to("/hooks")
        .iter()
        .map(|d| d.body["n"].as_i64().unwrap())
        .collect();
    assert_eq!(
        delivered,
        (0..8).collect::<Vec<i64>>(),
        "and delivered in that order (key = aggregate)"
    );
    // A claim while a row of an aggregate is `processing` returns none of that aggregate,
    // and an earlier pending row (not due yet) holds the later ones back too: `held` has its
    // head claimed by a replica that stopped (a lease of an hour), `later` a head due in an
    // hour; their next rows arrive now, with one of an aggregate nobody holds.
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, state, claim_token, claimed_at, lease_expires_at) \
         VALUES ('other', 'h0', 'held', '{\"id\":\"h0\",\"customer\":\"held\"}', 'processing', gen_random_uuid(), now(), now() + interval '1 hour')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, scheduled_at) \
         VALUES ('other', 'l0', 'later', '{\"id\":\"l0\",\"customer\":\"later\"}', now() + interval '1 hour')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for (id, customer) in [
        ("h1", "held"),
        ("l1", "later"),
        ("h2", "held"),
        ("free", "free"),
    ] {
        let body = format!(r#"{{"id":"{id}","customer":"{customer}"}}"#);
        assert_eq!(replicas[0].post("/inbox/other", &body, &[]).await.0, 202);
    }
    // The forwarded rows of an aggregate (the outbox row's key), in forward order.
    async fn forwarded_of(
        store: &queuebox_core::store::postgres::PgStore,
        aggregate: &str,
    ) -> Vec<String> {
        sqlx::query_scalar("SELECT payload->>'id' FROM outbox WHERE key = $1 ORDER BY sequence")
            .bind(aggregate)
            .fetch_all(store.pool())
            .await
            .unwrap()
    }
    let keys = |aggregate: &'static str| forwarded_of(&store, aggregate);
    eventually("the free aggregate forwarded", 20, || async {
        keys("free").await.len() == 1
    })
    .await;
    // Many claims later (20 ms polls, two replicas), still nothing of the held ones.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        keys("held").await,
        Vec::<String>::new(),
        "no row of an aggregate is forwarded while another of its rows is processing"
    );
    assert_eq!(
        keys("later").await,
        Vec::<String>::new(),
        "no row of an aggregate is forwarded past an earlier pending row"
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key IN ('h1', 'h2', 'l1') AND state = 'pending'"
        )
        .await,
        3,
        "the rows behind the heads are left pending, not claimed"
    );
    // The heads free up (the lease runs out, the delay is over): the rows follow, in order.
    sqlx::query("UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE idempotency_key = 'h0'")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE inbox SET scheduled_at = now() WHERE idempotency_key = 'l0'")
        .execute(store.pool())
        .await
        .unwrap();
    eventually("the held aggregates forwarded", 20, || async {
        keys("held").await.len() == 3 && keys("later").await.len() == 2
    })
    .await;
    assert_eq!(keys("held").await, ["h0", "h1", "h2"]);
    assert_eq!(keys("later").await, ["l0", "l1"]);
    Ok(())
}
