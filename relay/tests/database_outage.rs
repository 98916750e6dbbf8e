//! A database that goes away and comes back, with the real `queuebox` binary and a
//! throwaway PostgreSQL cluster of each test: ingest answers 503 with `Retry-After` within
//! `database.connectionTimeoutMs` and stores nothing, recovers without a restart, and a
//! pull worker says the database is down and resumes by itself.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use queuebox_core::store::postgres::{PgStore, PoolSettings};
use queuebox_core::{Outcome, Worker, WorkerOptions};

const SOURCES: &str = "routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
  jobs:
    path: /jobs
    idempotencyKeyPath: $.id
    topic: jobs
    consumption: pull
";

/// A relay on `cluster` whose statements wait at most 1 s for a pooled connection.
async fn relay_on(cluster: &Cluster) -> Relay {
    let rx = Receiver::start().await;
    let yaml = base_config(&cluster.url(), &rx.url()).replace(
        "  startupTimeoutMs: 60000\n",
        "  startupTimeoutMs: 60000\n  connectionTimeoutMs: 1000\n",
    );
    Relay::start(&format!("{yaml}{SOURCES}")).await
}

async fn post(
    relay: &Relay,
    path: &str,
    body: &str,
) -> (u16, Option<String>, serde_json::Value, Duration) {
    let started = Instant::now();
    let resp = reqwest::Client::new()
        .post(relay.url(path))
        .body(body.to_string())
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(serde_json::Value::Null);
    (status, retry_after, body, started.elapsed())
}

async fn rows_with_key(cluster: &Cluster, key: &str) -> i64 {
    let store = PgStore::connect(&cluster.url(), 2)
        .await
        .expect("the cluster is up");
    let n = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE idempotency_key = $1")
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap();
    store.close().await;
    n
}

#[tokio::test]
async fn a_post_while_the_database_is_down_answers_503_with_retry_after_and_succeeds_once_it_is_back(
) {
    let cluster = Cluster::new(free_port(), "outage-ingest");
    cluster.script_async("start").await;
    let relay = relay_on(&cluster).await;
    let (s, _, b, _) = post(&relay, "/inbox/orders", r#"{"id":"before"}"#).await;
    assert_eq!(s, 202, "{b}");

    cluster.script_async("stop").await;
    let (status, retry_after, body, took) =
        post(&relay, "/inbox/orders", r#"{"id":"during"}"#).await;
    eprintln!("POST with the database down: {status} after {took:?}");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body, serde_json::json!({"error": "Database unavailable"}));
    let secs: u64 = retry_after
        .expect("a Retry-After header")
        .parse()
        .expect("Retry-After in seconds");
    assert!(secs > 0);
    // connectionTimeoutMs: 1000 bounds the wait (it was a fixed 10 s).
    assert!(took < Duration::from_secs(3), "the answer took {took:?}");
    assert_eq!(
        relay
            .metric("queuebox_inbox_rejections_total{reason=\"storage_unavailable\"}")
            .await,
        1.0
    );
    assert_eq!(
        relay
            .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
            .await,
        0.0,
        "an outage is no storage failure"
    );

    // Back without restarting the relay: the same POST is stored.
    cluster.script_async("start").await;
    eventually("ingest recovers", 30, || async {
        post(&relay, "/inbox/orders", r#"{"id":"during"}"#).await.0 == 202
    })
    .await;
    assert_eq!(rows_with_key(&cluster, "during").await, 1);
    assert_eq!(rows_with_key(&cluster, "before").await, 1);
}

/// Collects what the test's tracing subscriber writes.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

// A current-thread runtime: the worker's tasks run on this thread, under the subscriber.
#[tokio::test(flavor = "current_thread")]
async fn a_pull_worker_reports_the_database_down_once_and_resumes_when_it_returns() {
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let cluster = Cluster::new(free_port(), "outage-worker");
    cluster.script_async("start").await;
    let relay = relay_on(&cluster).await;
    let store = PgStore::connect_with(
        &cluster.url(),
        &PoolSettings {
            max_connections: 4,
            acquire_timeout: Duration::from_millis(500),
        },
    )
    .await
    .unwrap();
    let mut opts = WorkerOptions::new("jobs");
    opts.poll_interval = Duration::from_millis(100);
    let worker = Worker::new(Arc::new(store), opts).await.unwrap();
    let handled = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = handled.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = {
        let (worker, stop) = (worker.clone(), stop.clone());
        tokio::spawn(async move {
            worker
                .run(
                    move |task| {
                        let seen = seen.clone();
                        async move {
                            seen.lock()
                                .unwrap()
                                .push(task.message().idempotency_key.clone());
                            Ok(Outcome::Complete)
                        }
                    },
                    stop.cancelled_owned(),
                )
                .await
        })
    };
    assert_eq!(post(&relay, "/inbox/jobs", r#"{"id":"j1"}"#).await.0, 202);
    eventually("j1 handled", 20, || async {
        handled.lock().unwrap().len() == 1
    })
    .await;

    cluster.script_async("stop").await;
    eventually("several failed claims", 20, || async {
        worker.stats().claim_errors >= 3
    })
    .await;
    // The worker's outage line by its own words: the phrase "the database is unreachable"
    // also stands inside the error text of other warnings (a completion in flight when the
    // database stopped, retried), which a slow restart on a loaded machine lets in.
    const DOWN: &str = "the database is unreachable; pull worker retrying";
    let down = logs.lines(DOWN);
    assert_eq!(
        down.len(),
        1,
        "one warn line for the outage, not one per poll: {down:?}"
    );
    assert!(
        // warn, not error: the worker retries by itself (the level for an outage)
        down[0].contains("WARN")
            && down[0].contains("jobs")
            && down[0].contains("database unavailable"),
        "{}",
        down[0]
    );

    cluster.script_async("start").await;
    eventually("ingest recovers", 30, || async {
        post(&relay, "/inbox/jobs", r#"{"id":"j2"}"#).await.0 == 202
    })
    .await;
    eventually("j2 handled after the outage", 30, || async {
        handled.lock().unwrap().contains(&"j2".to_string())
    })
    .await;
    assert_eq!(logs.lines("the database is reachable again").len(), 1);
    assert_eq!(logs.lines(DOWN).len(), 1, "one outage, one warn line");

    stop.cancel();
    run.await.unwrap().unwrap();
}
