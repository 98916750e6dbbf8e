//! Periodic schedules through the real binary: three `queuebox` relays run the same
//! 200 ms schedule on one database and every tick is one row, none missing; after all of
//! them stopped for a while, a restart enqueues at most the latest missed tick (never the
//! gap), and the `missed` policies `latest` and `skip` hold for an hourly schedule.
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const EVERY_MS: i64 = 200;

fn config(db_url: &str) -> String {
    format!(
        "server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
  drainTimeoutMs: 500
database:
  url: {db_url}
  startupTimeoutMs: 60000
outbox:
  enabled: false
inbox:
  relay:
    enabled: false
schedules:
  - name: fast
    source: ticks
    everyMs: {EVERY_MS}
    payload: {{job: fast}}
  - name: hourly-latest
    source: hourly
    everyMs: 3600000
    payload: {{}}
  - name: hourly-skip
    source: hourly
    everyMs: 3600000
    payload: {{}}
    missed: skip
"
    )
}

/// The ticks of `name`'s rows in `source`, from their keys, with the number of rows.
async fn ticks(
    store: &queuebox_core::store::postgres::PgStore,
    source: &str,
    name: &str,
) -> (Vec<DateTime<Utc>>, usize) {
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT idempotency_key FROM inbox WHERE source = $1 AND idempotency_key LIKE $2",
    )
    .bind(source)
    .bind(format!("schedule:{name}:%"))
    .fetch_all(store.pool())
    .await
    .unwrap();
    let n = keys.len();
    let mut ticks: Vec<DateTime<Utc>> = keys
        .iter()
        .map(|k| {
            let t = k.strip_prefix(&format!("schedule:{name}:")).unwrap();
            DateTime::parse_from_rfc3339(t)
                .unwrap_or_else(|e| panic!("key `{k}` does not end with an RFC 3339 tick: {e}"))
                .with_timezone(&Utc)
        })
        .collect();
    ticks.sort();
    (ticks, n)
}

#[tokio::test]
async fn three_relays_enqueue_each_tick_once_and_a_restart_follows_the_missed_policy() {
    let (url, store) = fresh_db("schedules").await;
    let yaml = config(&url);
    let mut relays = Vec::new();
    for _ in 0..3 {
        relays.push(Relay::start(&yaml).await);
    }
    eventually("32 ticks of the 200 ms schedule", 60, || async {
        ticks(&store, "ticks", "fast").await.1 >= 32
    })
    .await;
    for r in &mut relays {
        r.term();
    }
    for r in &mut relays {
        let _ = tokio::time::timeout(Duration::from_secs(10), r.child.wait()).await;
    }
    let stopped_at = Utc::now();
    let (before, rows) = ticks(&store, "ticks", "fast").await;
    // One row per tick, every tick a multiple of the interval, none missing in between.
    let distinct: BTreeSet<_> = before.iter().collect();
    assert_eq!(
        distinct.len(),
        rows,
        "a tick was enqueued twice: {before:?}"
    );
    for t in &before {
        assert_eq!(
            t.timestamp_millis() % EVERY_MS,
            0,
            "tick {t} is not on the interval"
        );
    }
    let span = (*before.last().unwrap() - *before.first().unwrap()).num_milliseconds();
    assert_eq!(
        span / EVERY_MS + 1,
        rows as i64,
        "ticks missing between the first and the last: {before:?}"
    );
    assert!(rows >= 30, "{rows} ticks");

    // The hourly schedules: `latest` enqueued the current hour's tick once (three relays,
    // one row), `skip` enqueued nothing (its next tick is up to an hour away).
    let (hourly, n) = ticks(&store, "hourly", "hourly-latest").await;
    assert!(n >= 1, "missed: latest enqueued no row at start");
    assert!(
        hourly.iter().all(|t| t.timestamp() % 3600 == 0),
        "{hourly:?}"
    );
    assert_eq!(n, hourly.iter().collect::<BTreeSet<_>>().len());
    assert_eq!(
        ticks(&store, "hourly", "hourly-skip").await.1,
        0,
        "missed: skip enqueued a missed tick"
    );

    // Nothing runs for a second (five ticks), then one relay starts again: it enqueues the
    // latest tick at or before its start and goes on, and none of the ticks in the gap.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut again = Relay::start(&yaml).await;
    let last_before = *before.last().unwrap();
    eventually("ticks after the restart", 60, || async {
        ticks(&store, "ticks", "fast").await.0.last().unwrap()
            > &(last_before + chrono::Duration::milliseconds(EVERY_MS * 3))
    })
    .await;
    again.term();
    let _ = tokio::time::timeout(Duration::from_secs(10), again.child.wait()).await;
    let (after, _) = ticks(&store, "ticks", "fast").await;
    let resumed: Vec<_> = after.iter().filter(|t| **t > last_before).collect();
    let first = *resumed[0];
    assert!(
        first > stopped_at + chrono::Duration::milliseconds(EVERY_MS * 4),
        "the restart enqueued ticks of the gap: the first after {last_before} is {first} (stopped at {stopped_at})"
    );
    // Nothing was lost after the restart's first tick either.
    let span = (**resumed.last().unwrap() - first).num_milliseconds();
    assert_eq!(span / EVERY_MS + 1, resumed.len() as i64, "{resumed:?}");
    // The hourly `latest` row is still one: the restart's enqueue was a duplicate.
    assert_eq!(ticks(&store, "hourly", "hourly-latest").await.0, hourly);
}

/// Two Rust workers (`WorkerOptions::schedules`), then a relay too, run the same schedule;
/// the workers also claim its rows: every tick is one row, handled once, none missing.
#[tokio::test]
async fn a_relay_and_two_rust_workers_share_a_schedule_and_handle_its_rows() {
    use queuebox_core::schedule::{Schedule, Timing};
    use queuebox_core::{Outcome, Worker, WorkerOptions};
    use std::sync::Arc;

    let (url, store) = fresh_db("schedules_workers").await;
    let relay_yaml = format!(
        "server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
  drainTimeoutMs: 500
database:
  url: {url}
outbox:
  enabled: false
inbox:
  relay:
    enabled: false
schedules:
  - name: shared
    source: jobs
    everyMs: {EVERY_MS}
    payload: {{from: schedule}}
"
    );
    let schedule = Schedule::new(
        "shared",
        Timing::every(Duration::from_millis(EVERY_MS as u64), "schedules[0]").unwrap(),
        "jobs",
        serde_json::json!({"from": "schedule"}),
    );
    let stop = Arc::new(tokio::sync::Notify::new());
    let handled = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut runs = Vec::new();
    for _ in 0..2 {
        let worker = Worker::connect(
            &url,
            WorkerOptions {
                poll_interval: Duration::from_millis(50),
                schedules: vec![schedule.clone()],
                ..WorkerOptions::new("jobs")
            },
        )
        .await
        .unwrap();
        let (s, h) = (stop.clone(), handled.clone());
        runs.push(tokio::spawn(async move {
            worker
                .run(
                    move |task| {
                        let h = h.clone();
                        async move {
                            let key = task.message().idempotency_key.clone();
                            h.lock().unwrap().push(key);
                            Ok(Outcome::Complete)
                        }
                    },
                    async move { s.notified().await },
                )
                .await
        }));
    }
    // The workers alone first (these rows are theirs), then the relay joins the race.
    eventually("5 ticks handled before the relay starts", 30, || async {
        handled.lock().unwrap().len() >= 5
    })
    .await;
    let mut relay = Relay::start(&relay_yaml).await;
    eventually("20 handled ticks", 60, || async {
        handled.lock().unwrap().len() >= 20
    })
    .await;
    relay.term();
    // The workers' schedules stop with the workers.
    stop.notify_waiters();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), relay.child.wait()).await;
    let (ticks, rows) = ticks(&store, "jobs", "shared").await;
    let span = (*ticks.last().unwrap() - *ticks.first().unwrap()).num_milliseconds();
    assert_eq!(
        span / EVERY_MS + 1,
        rows as i64,
        "ticks missing or doubled: {ticks:?}"
    );
    let handled = handled.lock().unwrap().clone();
    let distinct: BTreeSet<_> = handled.iter().collect();
    assert_eq!(distinct.len(), handled.len(), "a row was handled twice");
    let unhandled = scalar_i64(
        &store,
        "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state <> 'processed'",
    )
    .await;
    assert!(unhandled <= 2, "{unhandled} rows left unhandled at stop");
}
