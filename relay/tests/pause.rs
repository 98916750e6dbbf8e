//! Pause and resume on the real `queuebox` binary against a real PostgreSQL, a real HTTP
//! receiver and a real pull worker (the core's, which every language's worker wraps):
//! `queuebox pause|resume` and `POST /admin/pause|resume/{kind}` stop and restart a pull
//! source's workers, a push source's inbox relay, an outbox destination and an outbox topic,
//! without a restart; paused work is stored and stays pending, unattempted; readiness and
//! metrics say what is paused; an unknown name is refused, naming it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use queuebox_core::{Outcome, Worker, WorkerOptions};
use serde_json::Value;

const CONFIG: &str = "
admin:
  enabled: true
  insecure: true
routes:
  - topicPattern: 'audit.**'
    destination: rx
  - topicPattern: 'orders.**'
    destination: rx
  - topicPattern: 'feed.**'
    destination: rx
sources:
  jobs:
    path: /jobs
    idempotencyKeyPath: $.id
    consumption: pull
  feed:
    path: /feed
    idempotencyKeyPath: $.id
    topic: 'feed.event'
";

async fn count(store: &queuebox_core::store::postgres::PgStore, sql: &str) -> i64 {
    scalar_i64(store, sql).await
}

/// A pull source paused from the CLI: a running worker claims none of its new rows, which
/// are stored; resumed, they are handled within about a second. Readiness and the gauge say
/// what is paused, and the replica stays ready.
#[tokio::test]
async fn a_paused_pull_source_is_stored_but_not_claimed_until_resumed_from_the_cli() {
    let (url, store) = fresh_db("pause_pull").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{CONFIG}", base_config(&url, &rx.url()))).await;

    let handled = Arc::new(Mutex::new(Vec::<String>::new()));
    let worker = Worker::connect(
        &url,
        WorkerOptions {
            poll_interval: Duration::from_millis(200),
            ..WorkerOptions::new("jobs")
        },
    )
    .await
    .unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let (h, s) = (handled.clone(), stop.clone());
    let run = tokio::spawn(async move {
        worker
            .run(
                move |task| {
                    let h = h.clone();
                    async move {
                        h.lock()
                            .unwrap()
                            .push(task.message().idempotency_key.clone());
                        Ok(Outcome::Complete)
                    }
                },
                async move { s.notified().await },
            )
            .await
    });
    let (st, b) = relay.post("/inbox/jobs", r#"{"id":"before"}"#, &[]).await;
    assert_eq!(st, 202, "{b}");
    eventually("the worker handles a row", 20, || async {
        handled.lock().unwrap().len() == 1
    })
    .await;

    let (code, out, err) = relay_cli(&relay, &["pause", "source", "jobs"]).await;
    assert_eq!((code, out.as_str()), (0, "paused source 'jobs'\n"), "{err}");
    let (_, out, _) = relay_cli(&relay, &["pause", "source", "jobs"]).await;
    assert_eq!(out, "source 'jobs' was paused already\n");
    for i in 0..3 {
        let (st, b) = relay
            .post("/inbox/jobs", &format!(r#"{{"id":"paused-{i}"}}"#), &[])
            .await;
        assert_eq!(st, 202, "paused work keeps arriving: {b}");
    }
    // Well past the worker's poll interval and NOTIFY wake-up: nothing claimed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(handled.lock().unwrap().len(), 1, "claimed while paused");
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state = 'pending' AND attempt = 0"
        )
        .await,
        3
    );
    let (st, body) = relay.get("/health/ready").await;
    assert_eq!(st, 200, "paused is not unready: {body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["paused"][0]["kind"], "source", "{body}");
    assert_eq!(ready["paused"][0]["name"], "jobs", "{body}");
    assert_eq!(
        relay
            .metric("queuebox_paused{kind=\"source\",name=\"jobs\"}")
            .await,
        1.0
    );
    let (_, out, _) = relay_cli(&relay, &["paused", "--json"]).await;
    assert!(out.contains(r#""name":"jobs""#), "{out}");

    let (code, out, err) = relay_cli(&relay, &["resume", "source", "jobs"]).await;
    assert_eq!(
        (code, out.as_str()),
        (0, "resumed source 'jobs'\n"),
        "{err}"
    );
    let resumed = std::time::Instant::now();
    eventually("the paused rows handled after resume", 10, || async {
        handled.lock().unwrap().len() == 4
    })
    .await;
    assert!(
        resumed.elapsed() < Duration::from_millis(1500),
        "resume took {:?}",
        resumed.elapsed()
    );
    eventually("the gauge back to 0", 5, || async {
        relay
            .metric("queuebox_paused{kind=\"source\",name=\"jobs\"}")
            .await
            == 0.0
    })
    .await;
    stop.notify_waiters();
    run.await.unwrap().unwrap();
}

/// An outbox destination paused through the admin API, then a topic from the CLI, then a
/// push source: nothing reaches the receiver, the rows stay pending with attempt 0 and the
/// push rows stay in the inbox; resumed, everything is delivered.
#[tokio::test]
async fn paused_destinations_topics_and_push_sources_deliver_nothing_until_resumed() {
    let (url, store) = fresh_db("pause_outbox").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{CONFIG}", base_config(&url, &rx.url()))).await;
    let publish = |topic: &str| {
        format!(
            "WITH i AS (INSERT INTO outbox (topic, payload) VALUES ('{topic}', '{{}}') RETURNING 1) SELECT count(*) FROM i"
        )
    };

    let (st, b) = relay
        .post("/admin/pause/destination", r#"{"name":"rx"}"#, &[])
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        serde_json::from_str::<Value>(&b).unwrap(),
        serde_json::json!({"kind": "destination", "name": "rx", "paused": true})
    );
    // Every replica obeys within a second (a claim already on its way when the pause was
    // stored may still take the old set); rows published after that stay pending.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    count(&store, &publish("orders.created")).await;
    count(&store, &publish("audit.login")).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        rx.to("/hooks").is_empty(),
        "delivered to a paused destination: {:?}",
        rx.to("/hooks")
    );
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM outbox WHERE state = 'pending' AND attempt = 0"
        )
        .await,
        2
    );

    // A topic paused from the CLI holds its rows when the destination resumes.
    let (code, out, err) = relay_cli(&relay, &["pause", "topic", "audit.login"]).await;
    assert_eq!(
        (code, out.as_str()),
        (0, "paused topic 'audit.login'\n"),
        "{err}"
    );
    let (st, b) = relay
        .post("/admin/resume/destination", r#"{"name":"rx"}"#, &[])
        .await;
    assert_eq!(st, 200, "{b}");
    eventually("orders.created delivered after resume", 5, || async {
        rx.to("/hooks").len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(rx.to("/hooks").len(), 1, "a paused topic was delivered");
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM outbox WHERE topic = 'audit.login' AND state = 'pending' AND attempt = 0"
        )
        .await,
        1
    );
    let (st, b) = relay.get("/admin/paused").await;
    assert_eq!(st, 200);
    assert!(b.contains(r#""name":"audit.login""#), "{b}");
    let (code, _, err) = relay_cli(&relay, &["resume", "topic", "audit.login"]).await;
    assert_eq!(code, 0, "{err}");
    eventually("audit.login delivered after resume", 5, || async {
        rx.to("/hooks").len() == 2
    })
    .await;

    // A push source: received and stored, not forwarded while paused.
    let (st, b) = relay
        .post("/admin/pause/source", r#"{"name":"feed"}"#, &[])
        .await;
    assert_eq!(st, 200, "{b}");
    let (st, b) = relay.post("/inbox/feed", r#"{"id":"f1"}"#, &[]).await;
    assert_eq!(st, 202, "{b}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM inbox WHERE source = 'feed' AND state = 'pending'"
        )
        .await,
        1,
        "a paused push row stays pending in the inbox"
    );
    assert_eq!(rx.to("/hooks").len(), 2);
    let (st, _) = relay
        .post("/admin/resume/source", r#"{"name":"feed"}"#, &[])
        .await;
    assert_eq!(st, 200);
    eventually("the push row forwarded and delivered", 5, || async {
        rx.to("/hooks").len() == 3
    })
    .await;
}

/// Unknown names are refused, naming them, by the CLI (exit 1) and the admin API (404);
/// nothing is paused.
#[tokio::test]
async fn an_unknown_source_destination_or_topic_is_refused_naming_it() {
    let (url, store) = fresh_db("pause_unknown").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{CONFIG}", base_config(&url, &rx.url()))).await;
    for (args, named) in [
        (&["pause", "source", "jbos"][..], "unknown source 'jbos'"),
        (
            &["pause", "destination", "xr"][..],
            "unknown destination 'xr'",
        ),
        (
            &["pause", "topic", "nowhere"][..],
            "unknown topic 'nowhere'",
        ),
        (&["resume", "source", "jbos"][..], "unknown source 'jbos'"),
    ] {
        let (code, out, err) = relay_cli(&relay, args).await;
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(err.contains(named), "{args:?} names {named}: {err}");
    }
    for (path, body, status, named) in [
        (
            "/admin/pause/destination",
            r#"{"name":"xr"}"#,
            404,
            "unknown destination 'xr'",
        ),
        (
            "/admin/pause/source",
            r#"{"name":"jbos"}"#,
            404,
            "unknown source 'jbos'",
        ),
        ("/admin/pause/queue", r#"{"name":"jobs"}"#, 404, "queue"),
        ("/admin/pause/source", r#"{"nmae":"jobs"}"#, 400, "nmae"),
    ] {
        let (s, b) = relay.post(path, body, &[]).await;
        assert_eq!(s, status, "{path} {body}: {b}");
        assert!(b.contains(named), "{path} {body} names {named}: {b}");
    }
    assert_eq!(
        count(&store, "SELECT count(*) FROM queuebox_paused").await,
        0
    );
}
