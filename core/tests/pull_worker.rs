//! The pull protocol against a real PostgreSQL: exactly-once processing without crashes,
//! per-aggregate order, lease expiry and fencing, crash redelivery, transactional
//! completion, the retry schedule, shutdown, and the errors a user meets first.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuebox_core::store::Store;
use queuebox_core::{
    Error, InsertOutcome, NewInboxMessage, Outcome, RetryPolicy, SqlValue, Worker, WorkerOptions,
};
use sqlx::PgPool;
use support::*;

fn fast_opts(source: &str) -> WorkerOptions {
    WorkerOptions {
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            jitter: 0.0,
            ..RetryPolicy::default()
        },
        ..WorkerOptions::new(source)
    }
}

async fn wait_until<F, Fut>(timeout: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    queuebox_testkit::wait_until(timeout, "the condition", check).await;
}

/// Waits until `rows` rows are processed, stops the workers, checks that none lost a claim
/// and returns how many completions they reported in all.
async fn finish_all(
    pool: &PgPool,
    rows: usize,
    stop: Arc<tokio::sync::Notify>,
    runs: Vec<tokio::task::JoinHandle<queuebox_core::worker::StatsSnapshot>>,
) -> u64 {
    // A generous bound: this proves completion, not speed (the CI machine has 2 cores).
    wait_until(Duration::from_secs(600), || async {
        count_state(pool, "processed").await == rows as i64
    })
    .await;
    stop.notify_waiters();
    let mut completed = 0;
    for r in runs {
        let s = r.await.unwrap();
        assert_eq!(s.claims_lost, 0);
        completed += s.completed;
    }
    completed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_workers_process_every_row_once_in_aggregate_order() {
    let (store, url) = fresh_store("once").await;
    let pool = store.pool().clone();
    sqlx::query("CREATE TABLE seen (ord BIGSERIAL PRIMARY KEY, inbox_id UUID NOT NULL, agg TEXT, n INT NOT NULL)").execute(&pool).await.unwrap();
    const ROWS: usize = 20_000;
    insert_pull_rows(&pool, "orders", ROWS, |i| {
        if i % 5 == 0 {
            None
        } else {
            Some(format!("a{}", i % 200))
        }
    })
    .await;

    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let overlaps = Arc::new(Mutex::new(0usize));
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut runs = Vec::new();
    for _ in 0..4 {
        // A separate pool per worker, as separate processes would have.
        // batch 8: a worker holds at most 8 aggregates, so the others find work too.
        let w = Worker::connect(
            &url,
            WorkerOptions {
                batch_size: Some(8),
                concurrency: 4,
                ..fast_opts("orders")
            },
        )
        .await
        .unwrap();
        let (in_flight, overlaps, stop) = (in_flight.clone(), overlaps.clone(), stop.clone());
        runs.push(tokio::spawn(async move {
            let handler = move |task: queuebox_core::Task| {
                let (in_flight, overlaps) = (in_flight.clone(), overlaps.clone());
                async move {
                    let m = task.message().clone();
                    if let Some(a) = &m.aggregate_id {
                        if !in_flight.lock().unwrap().insert(a.clone()) {
                            *overlaps.lock().unwrap() += 1;
                        }
                    }
                    let n = m.payload["n"].as_i64().unwrap();
                    let r = task
                        .execute(
                            "INSERT INTO seen (inbox_id, agg, n) VALUES ($1::uuid, $2, $3)",
                            &[
                                m.id.to_string().into(),
                                m.aggregate_id
                                    .clone()
                                    .map(SqlValue::Text)
                                    .unwrap_or(SqlValue::Null),
                                n.into(),
                            ],
                        )
                        .await;
                    if let Some(a) = &m.aggregate_id {
                        in_flight.lock().unwrap().remove(a);
                    }
                    r?;
                    Ok(Outcome::Complete)
                }
            };
            w.run(handler, async move { stop.notified().await })
                .await
                .unwrap();
            w.stats()
        }));
    }
    let completed = finish_all(&pool, ROWS, stop, runs).await;
    assert_eq!(
        completed, ROWS as u64,
        "each row completed exactly once across workers"
    );
    let (total, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT inbox_id) FROM seen")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (total, distinct),
        (ROWS as i64, ROWS as i64),
        "no row handled twice, none skipped"
    );
    let out_of_order: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT n, lag(n) OVER (PARTITION BY agg ORDER BY ord) AS prev FROM seen WHERE agg IS NOT NULL) x WHERE prev > n",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        out_of_order, 0,
        "rows of one aggregate are handled in arrival order"
    );
    assert_eq!(
        *overlaps.lock().unwrap(),
        0,
        "never two rows of one aggregate in flight at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_hands_row_to_next_worker_and_fences_the_first() {
    let (store, url) = fresh_store("lease").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    // A's lease is long so that its renewer stays asleep for the whole test: a renewal after
    // B's claim would cancel task_a first (also correct, but then complete() reports Cancelled
    // and this test would no longer see the fenced completion it is about).
    let a = Worker::connect(
        &url,
        WorkerOptions {
            lease: Duration::from_secs(120),
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let b = Worker::connect(&url, fast_opts("s")).await.unwrap();
    let task_a = a.next().await.unwrap().unwrap();
    // A stops renewing in effect: its lease is forced to have run out on the database clock.
    sqlx::query("UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    let task_b = tokio::time::timeout(Duration::from_secs(5), b.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(task_a.message().id, task_b.message().id);
    let lost_before = queuebox_core::metrics::claims_lost(queuebox_core::metrics::Component::Pull);
    let err = task_a.complete().await.unwrap_err();
    assert!(matches!(err, Error::ClaimLost { .. }), "got {err:?}");
    assert!(
        queuebox_core::metrics::claims_lost(queuebox_core::metrics::Component::Pull) > lost_before
    );
    let (state, attempt, _) = row_state(&pool, "k0").await;
    assert_eq!(
        (state.as_str(), attempt),
        ("processing", 0),
        "the stale completion changed nothing"
    );
    task_b.complete().await.unwrap();
    assert_eq!(row_state(&pool, "k0").await.0, "processed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_outlives_its_lease_is_cancelled_when_renewal_fails() {
    let (store, url) = fresh_store("renewfail").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let w = Worker::connect(
        &url,
        WorkerOptions {
            lease: Duration::from_millis(600),
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let task = w.next().await.unwrap().unwrap();
    // Renewal keeps the lease alive past its length...
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(!task.cancelled().is_cancelled());
    assert_eq!(row_state(&pool, "k0").await.0, "processing");
    // ...until another owner appears: then the next renewal finds nothing and cancels.
    sqlx::query("UPDATE inbox SET claim_token = gen_random_uuid()")
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), task.cancelled().cancelled())
        .await
        .expect("cancelled after a failed renewal");
    // The renewer already counted the lost claim; a cancelled task may only be abandoned.
    assert!(matches!(task.complete().await, Err(Error::Cancelled)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_may_only_be_abandoned() {
    let (store, url) = fresh_store("cancelonly").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 5, |_| None).await;
    let opts = WorkerOptions {
        batch_size: Some(5),
        concurrency: 5,
        shutdown_grace: Duration::from_millis(100),
        ..fast_opts("s")
    };
    let w = Worker::connect(&url, opts).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..5 {
        tasks.push(w.next().await.unwrap().unwrap());
    }
    tasks[0]
        .execute("CREATE TABLE cancelled_write (x int)", &[])
        .await
        .unwrap();
    assert_eq!(
        w.shutdown().await,
        5,
        "the grace runs out with five running tasks"
    );
    assert!(tasks.iter().all(|t| t.cancelled().is_cancelled()));

    let finishes = [
        ("complete", tasks[0].complete().await),
        ("fail", tasks[1].fail("boom").await.map(|_| ())),
        (
            "retry",
            tasks[2].retry(Duration::from_secs(1), "later").await,
        ),
        ("dead", tasks[3].dead("poison").await),
        ("release", tasks[4].release().await),
    ];
    for (name, r) in finishes {
        assert!(
            matches!(r, Err(Error::Cancelled)),
            "{name} on a cancelled task: {r:?}"
        );
    }
    // Each refused finish abandoned its task: nothing written, writes rolled back.
    for i in 0..5 {
        let (state, attempt, _) = row_state(&pool, &format!("k{i}")).await;
        assert_eq!(
            (state.as_str(), attempt),
            ("processing", 0),
            "k{i} untouched"
        );
    }
    let table: Option<String> = sqlx::query_scalar("SELECT to_regclass('cancelled_write')::text")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        table.is_none(),
        "the cancelled task's transaction rolled back"
    );
    assert!(
        matches!(
            tasks[0].complete().await,
            Err(Error::AlreadyFinished { .. })
        ),
        "abandoned for good"
    );
    tasks[0].abandon().await;
    let s = w.stats();
    assert_eq!((s.completed, s.retried, s.dead, s.released), (0, 0, 0, 0));
}

/// Not a test on its own: the child process of `killed_worker_row_is_redelivered_after_the_lease`.
#[tokio::test]
#[ignore]
async fn child_claims_and_hangs() {
    let url = std::env::var("QB_CHILD_URL").unwrap();
    let w = Worker::connect(
        &url,
        WorkerOptions {
            lease: Duration::from_millis(1500),
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let task = w.next().await.unwrap().unwrap();
    println!("CLAIMED {}", task.message().id);
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_worker_row_is_redelivered_after_the_lease() {
    use tokio::io::AsyncBufReadExt;
    let (store, url) = fresh_store("kill").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_claims_and_hangs",
            "--nocapture",
        ])
        .env("QB_CHILD_URL", &url)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let claimed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some(id) = l.strip_prefix("CLAIMED ") {
                return id.to_string();
            }
        }
        panic!("child ended without claiming");
    })
    .await
    .unwrap();
    // SIGKILL: no shutdown, no release; the row stays processing until its lease runs out or
    // a live worker finds the dead worker's owner session gone, whichever is first (the
    // second is tested with a 60 s lease in tests/crash_recovery.rs).
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed_at = Instant::now();
    assert_eq!(row_state(&pool, "k0").await.0, "processing");
    let w = Worker::connect(&url, fast_opts("s")).await.unwrap();
    let task = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(task.message().id.to_string(), claimed);
    assert_eq!(task.message().attempt, 0, "a crash spends no attempt");
    assert!(
        killed_at.elapsed() >= Duration::from_millis(500),
        "redelivered only after the lease"
    );
    task.complete().await.unwrap();
    assert_eq!(row_state(&pool, "k0").await.0, "processed");
}

async fn business_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM business")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_write_and_completion_commit_together_or_not_at_all() {
    let (store, url) = fresh_store("tx").await;
    let pool = store.pool().clone();
    sqlx::query("CREATE TABLE business (id TEXT PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    let w = Worker::connect(&url, fast_opts("s")).await.unwrap();

    // 1. Write, then fail: the write rolls back and the row is retried.
    let t = w.next().await.unwrap().unwrap();
    let key = t.message().idempotency_key.clone();
    t.execute(
        "INSERT INTO business (id) VALUES ($1)",
        &[key.as_str().into()],
    )
    .await
    .unwrap();
    t.fail("handler failed after its write").await.unwrap();
    assert_eq!(business_count(&pool).await, 0);
    let (state, attempt, err) = row_state(&pool, &key).await;
    assert_eq!((state.as_str(), attempt), ("pending", 1));
    assert_eq!(err.as_deref(), Some("handler failed after its write"));

    // 2. The business write itself fails (duplicate key): nothing commits, the row stays claimable.
    sqlx::query("INSERT INTO business (id) VALUES ('taken')")
        .execute(&pool)
        .await
        .unwrap();
    let t = w.next().await.unwrap().unwrap();
    let key2 = t.message().idempotency_key.clone();
    assert!(t
        .execute("INSERT INTO business (id) VALUES ('taken')", &[])
        .await
        .is_err());
    assert!(
        t.complete().await.is_err(),
        "an aborted transaction cannot complete"
    );
    assert_eq!(business_count(&pool).await, 1);
    assert_ne!(row_state(&pool, &key2).await.0, "processed");

    // 3. Write and succeed: both commit.
    let t = w.next().await.unwrap().unwrap();
    let key3 = t.message().idempotency_key.clone();
    t.execute(
        "INSERT INTO business (id) VALUES ($1)",
        &[key3.as_str().into()],
    )
    .await
    .unwrap();
    let rows = t
        .query(
            "SELECT id, 42::int AS answer FROM business WHERE id = $1",
            &[key3.as_str().into()],
        )
        .await
        .unwrap();
    assert_eq!(rows[0]["answer"], serde_json::json!(42));
    t.complete().await.unwrap();
    assert_eq!(row_state(&pool, &key3).await.0, "processed");
    assert_eq!(business_count(&pool).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_handler_retries_on_schedule_then_dies_at_max_attempts() {
    let (store, url) = fresh_store("retry").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let w = Worker::connect(&url, fast_opts("s")).await.unwrap();
    let deliveries: Arc<Mutex<Vec<(i32, Instant)>>> = Arc::default();
    let d = deliveries.clone();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let run = tokio::spawn(async move {
        w.run(
            move |task| {
                let d = d.clone();
                async move {
                    d.lock()
                        .unwrap()
                        .push((task.message().attempt, Instant::now()));
                    Err::<Outcome, _>("receiver said no".into())
                }
            },
            async move { s2.notified().await },
        )
        .await
    });
    wait_until(Duration::from_secs(20), || async {
        row_state(&pool, "k0").await.0 == "dead"
    })
    .await;
    stop.notify_waiters();
    run.await.unwrap().unwrap();
    let d = deliveries.lock().unwrap().clone();
    assert_eq!(
        d.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "max_attempts 2 gives 3 deliveries"
    );
    // Delays 50 ms then 100 ms (no jitter): each redelivery waits at least its backoff.
    assert!(d[1].1 - d[0].1 >= Duration::from_millis(50));
    assert!(d[2].1 - d[1].1 >= Duration::from_millis(100));
    let (state, attempt, err) = row_state(&pool, "k0").await;
    assert_eq!(
        (state.as_str(), attempt, err.as_deref()),
        ("dead", 2, Some("receiver said no"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_outcomes_and_panics_map_to_rows() {
    let (store, url) = fresh_store("outcomes").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    let w = Worker::connect(&url, fast_opts("s")).await.unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let run = tokio::spawn(async move {
        w.run(
            |task| async move {
                match task.message().payload["n"].as_i64().unwrap() {
                    0 => Ok(Outcome::Dead {
                        reason: "poison".into(),
                    }),
                    1 => Ok(Outcome::Retry {
                        after: Some(Duration::from_secs(3600)),
                        reason: "later".into(),
                    }),
                    _ => panic!("handler bug"),
                }
            },
            async move { s2.notified().await },
        )
        .await
    });
    wait_until(Duration::from_secs(10), || async {
        row_state(&pool, "k0").await.0 == "dead"
            && row_state(&pool, "k1").await.1 == 1
            && row_state(&pool, "k2").await.1 >= 1
    })
    .await;
    stop.notify_waiters();
    run.await.unwrap().unwrap();
    assert_eq!(row_state(&pool, "k0").await.2.as_deref(), Some("poison"));
    let later: bool = sqlx::query_scalar("SELECT scheduled_at > clock_timestamp() + interval '50 minutes' FROM inbox WHERE idempotency_key = 'k1'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(later, "Retry(after) moves scheduled_at by `after`");
    assert!(row_state(&pool, "k2")
        .await
        .2
        .unwrap()
        .contains("handler panicked: handler bug"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_insert_reports_duplicate_with_the_stored_id() {
    let (store, _) = fresh_store("dup").await;
    let m = NewInboxMessage::new("stripe", "evt_1", serde_json::json!({"a": 1})).pull();
    let first = store.insert_inbox(&m).await.unwrap();
    let second = store.insert_inbox(&m).await.unwrap();
    assert!(matches!(first, InsertOutcome::Inserted(_)));
    assert_eq!(second, InsertOutcome::Duplicate(first.id()));
    // Same key, other source: a different message.
    let other = store
        .insert_inbox(&NewInboxMessage {
            source: "github".into(),
            ..m.clone()
        })
        .await
        .unwrap();
    assert!(matches!(other, InsertOutcome::Inserted(_)));
    let too_long = NewInboxMessage::new("stripe", "k".repeat(256), serde_json::json!({}));
    let err = store.insert_inbox(&too_long).await.unwrap_err();
    assert!(err.to_string().contains("idempotency_key"), "{err}");
}

#[tokio::test]
async fn bad_url_and_missing_tables_give_clear_errors() {
    let err = Worker::connect(
        "postgres://app:hunter2@127.0.0.1:1/nope",
        WorkerOptions::new("s"),
    )
    .await
    .err()
    .unwrap();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("hunter2"),
        "{text}"
    );
    let err = Worker::connect("not a url", WorkerOptions::new("s"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");

    let url = queuebox_testkit::fresh_database("nomigr").await;
    let err = Worker::connect(&url, WorkerOptions::new("s"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, Error::SchemaMissing { table } if table == "inbox"),
        "{err:?}"
    );
    assert!(err.to_string().contains("queuebox migrate"));

    let err = Worker::connect(
        &url,
        WorkerOptions {
            batch_size: Some(0),
            ..WorkerOptions::new("s")
        },
    )
    .await
    .err()
    .unwrap();
    assert!(
        matches!(&err, Error::Config { path, .. } if path == "batchSize"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_an_idle_worker_long_before_its_poll_interval() {
    let (store, url) = fresh_store("notify").await;
    let pool = store.pool().clone();
    let w = Worker::connect(
        &url,
        WorkerOptions {
            poll_interval: Duration::from_secs(60),
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let next = tokio::spawn(async move {
        w.next()
            .await
            .map(|t| t.map(|t| t.message().idempotency_key.clone()))
    });
    tokio::time::sleep(Duration::from_millis(300)).await; // the worker has claimed nothing and sleeps
    store
        .insert_inbox(&NewInboxMessage::new("other", "x", serde_json::json!({})).pull())
        .await
        .unwrap();
    store
        .insert_inbox(&NewInboxMessage::new("s", "wake", serde_json::json!({})).pull())
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("woken well before the 60 s poll")
        .unwrap()
        .unwrap();
    assert_eq!(got.as_deref(), Some("wake"));
    let _ = pool;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_waiting_rows_and_lets_running_ones_finish() {
    let (store, url) = fresh_store("shutdown").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 10, |_| None).await;
    let w = Worker::connect(
        &url,
        WorkerOptions {
            batch_size: Some(10),
            concurrency: 1,
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let running = w.next().await.unwrap().unwrap();
    assert_eq!(
        count_state(&pool, "processing").await,
        10,
        "the whole batch is claimed"
    );
    let w2 = w.clone();
    let shutdown = tokio::spawn(async move { w2.shutdown().await });
    wait_until(Duration::from_secs(5), || async {
        count_state(&pool, "pending").await == 9
    })
    .await;
    assert!(
        w.next().await.unwrap().is_none(),
        "no claims after shutdown began"
    );
    running.complete().await.unwrap();
    assert_eq!(shutdown.await.unwrap(), 0, "nothing abandoned");
    assert_eq!(count_state(&pool, "processed").await, 1);
    let spent: i64 = sqlx::query_scalar("SELECT coalesce(sum(attempt), 0) FROM inbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(spent, 0, "released rows spent no attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_grace_over_cancels_and_abandons_without_writing() {
    let (store, url) = fresh_store("grace").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let w = Worker::connect(
        &url,
        WorkerOptions {
            shutdown_grace: Duration::from_millis(300),
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let started = Arc::new(tokio::sync::Notify::new());
    let st2 = started.clone();
    let w2 = w.clone();
    let run = tokio::spawn(async move {
        w2.run(
            move |task| {
                let st2 = st2.clone();
                async move {
                    task.execute("CREATE TABLE half_done (x int)", &[]).await?;
                    st2.notify_one();
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Outcome::Complete)
                }
            },
            async move { s2.notified().await },
        )
        .await
    });
    started.notified().await;
    stop.notify_waiters();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns after the grace")
        .unwrap()
        .unwrap();
    let (state, attempt, _) = row_state(&pool, "k0").await;
    assert_eq!(
        (state.as_str(), attempt),
        ("processing", 0),
        "abandoned: no completion, no attempt spent"
    );
    let half: Option<String> = sqlx::query_scalar("SELECT to_regclass('half_done')::text")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        half.is_none(),
        "the abandoned handler's transaction rolled back"
    );
    assert_eq!(w.stats().completed, 0);
}

/// proto-docs/vectors/transitions.json: every fenced write against every row state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transition_vectors_hold_on_postgres() {
    let (store, _) = fresh_store("transitions").await;
    let pool = store.pool().clone();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../proto-docs/vectors/transitions.json"
    ))
    .unwrap();
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut n = 0;
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let input = &case["input"];
        let expected = &case["expected"];
        let key = format!("t{n}");
        n += 1;
        let (id, token): (uuid::Uuid, uuid::Uuid) = sqlx::query_as(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption, state, claim_token, lease_expires_at)
             VALUES ('v', $1, '{}', 'pull', $2, gen_random_uuid(),
                     CASE $3 WHEN 'live' THEN clock_timestamp() + interval '1 hour'
                             WHEN 'expired' THEN clock_timestamp() - interval '1 second' END)
             RETURNING id, claim_token",
        )
        .bind(&key)
        .bind(input["state"].as_str().unwrap())
        .bind(input["lease"].as_str().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
        let claim = queuebox_core::ClaimRef {
            id,
            token: if input["token"] == "own" {
                token
            } else {
                uuid::Uuid::new_v4()
            },
        };
        let affected = match input["operation"].as_str().unwrap() {
            "complete" => store.complete_pull(&claim).await.unwrap(),
            "retry" => store
                .retry_pull(&claim, Duration::from_secs(1), "boom")
                .await
                .unwrap(),
            "dead" => store.dead_pull(&claim, "boom").await.unwrap(),
            "release" => store.release_pull(&claim).await.unwrap(),
            "renew" => {
                store
                    .renew_pull(&[claim], Duration::from_secs(60))
                    .await
                    .unwrap()
                    == vec![id]
            }
            other => panic!("unknown operation {other}"),
        };
        let (state, attempt, last_error, token_after): (
            String,
            i32,
            Option<String>,
            Option<uuid::Uuid>,
        ) = sqlx::query_as(
            "SELECT state, attempt, last_error, claim_token FROM inbox WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            affected,
            expected["affected"].as_bool().unwrap(),
            "{name}: affected"
        );
        assert_eq!(state, expected["state"].as_str().unwrap(), "{name}: state");
        assert_eq!(
            attempt as i64,
            expected["attemptDelta"].as_i64().unwrap(),
            "{name}: attempt"
        );
        if let Some(cleared) = expected.get("tokenCleared").and_then(|v| v.as_bool()) {
            assert_eq!(token_after.is_none(), cleared, "{name}: token cleared");
        }
        if let Some(e) = expected.get("lastError").and_then(|v| v.as_str()) {
            assert_eq!(last_error.as_deref(), Some(e), "{name}: last_error");
        }
    }
    assert!(n >= 30);
    let _: HashMap<(), ()> = HashMap::new();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batched_plain_completions_complete_each_row_once() {
    let (store, url) = fresh_store("completer").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3000, |_| None).await;
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut runs = Vec::new();
    for _ in 0..2 {
        let w = Worker::connect(
            &url,
            WorkerOptions {
                batch_size: Some(100),
                concurrency: 16,
                ..fast_opts("s")
            },
        )
        .await
        .unwrap();
        let stop = stop.clone();
        runs.push(tokio::spawn(async move {
            w.run(|_task| async { Ok(Outcome::Complete) }, async move {
                stop.notified().await
            })
            .await
            .unwrap();
            w.stats()
        }));
    }
    assert_eq!(finish_all(&pool, 3000, stop, runs).await, 3000);
    let stray: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM inbox WHERE claim_token IS NOT NULL OR processed_at IS NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        stray, 0,
        "every completed row has its token cleared and processed_at set"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_business_table_is_a_database_error_not_a_schema_error() {
    let (store, url) = fresh_store("biztable").await;
    insert_pull_rows(store.pool(), "s", 1, |_| None).await;
    let w = Worker::connect(&url, fast_opts("s")).await.unwrap();
    let t = w.next().await.unwrap().unwrap();
    let err = t
        .execute("INSERT INTO no_such_table VALUES (1)", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Database { code: Some(c), .. } if c == "42P01"),
        "{err:?}"
    );
    t.release().await.unwrap();
}

/// A plain completion frees its concurrency slot as soon as it starts: while its statement
/// is blocked (a row lock held here), the next buffered row is handed out; the completion
/// still lands once the lock goes, and shutdown waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_completion_frees_the_slot_but_shutdown_waits_for_it() {
    let (store, url) = fresh_store("slot").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 2, |_| None).await;
    let w = Worker::connect(
        &url,
        WorkerOptions {
            batch_size: Some(2),
            concurrency: 1,
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let first = w.next().await.unwrap().unwrap();
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM inbox WHERE id = $1 FOR UPDATE")
        .bind(first.message().id)
        .execute(&mut *lock)
        .await
        .unwrap();
    let completing = tokio::spawn({
        let first = first.clone();
        async move { first.complete().await }
    });
    let second = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("the second row is handed out while the first completion is blocked")
        .unwrap()
        .unwrap();
    assert_ne!(second.message().id, first.message().id);
    assert!(
        !completing.is_finished(),
        "the first completion is still waiting for the row lock"
    );
    assert_eq!(
        w.in_flight(),
        2,
        "a completing task still counts until its statement commits"
    );
    // The second completion queues behind the blocked statement (one at a time per worker).
    let second_done = tokio::spawn(async move { second.complete().await });
    let w2 = w.clone();
    let shutdown = tokio::spawn(async move { w2.shutdown().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !shutdown.is_finished(),
        "shutdown waits for the blocked completion"
    );
    lock.rollback().await.unwrap();
    completing.await.unwrap().unwrap();
    second_done.await.unwrap().unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), shutdown)
            .await
            .unwrap()
            .unwrap(),
        0,
        "nothing abandoned"
    );
    assert_eq!(count_state(&pool, "processed").await, 2);
}

/// With the adaptive batch (no `batch_size`), rows whose completion statement runs do not
/// count against the batch: while every completion is blocked (row locks held here), the
/// worker goes on claiming and handing out rows — but no further than twice its batch, so a
/// stuck completion cannot let it hoard the queue. Everything handed out is completed once
/// the locks go. (An explicit batch caps completing rows too:
/// `a_blocked_completion_frees_the_slot_but_shutdown_waits_for_it` and every client's
/// contract item 17.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_adaptive_batch_claims_overlap_completions_up_to_twice_the_batch() {
    let (store, url) = fresh_store("overlap").await;
    let pool = store.pool().clone();
    let opts = WorkerOptions {
        concurrency: 1,
        ..fast_opts("s")
    };
    assert_eq!(opts.batch_size, None);
    let batch = opts.batch() as usize;
    // More rows than twice the batch, so that the cap, not the queue, stops the worker.
    insert_pull_rows(&pool, "s", 2 * batch + 100, |_| None).await;
    let w = Worker::connect(&url, opts).await.unwrap();
    let mut lock = pool.begin().await.unwrap();
    let mut completions = Vec::new();
    // Hand out rows until the worker stops: each one's row is locked here first, so its
    // completion blocks.
    while let Ok(next) = tokio::time::timeout(Duration::from_secs(2), w.next()).await {
        let task = next.unwrap().unwrap();
        sqlx::query("SELECT 1 FROM inbox WHERE id = $1 FOR UPDATE")
            .bind(task.message().id)
            .execute(&mut *lock)
            .await
            .unwrap();
        completions.push(tokio::spawn(async move { task.complete().await }));
        assert!(
            completions.len() <= 2 * batch,
            "more than twice the batch handed out"
        );
    }
    let handed_out = completions.len();
    assert!(
        handed_out > batch,
        "{handed_out} rows handed out while their completions were blocked; the batch is {batch}"
    );
    assert!(
        completions.iter().all(|c| !c.is_finished()),
        "every completion waits for its row lock"
    );
    assert_eq!(count_state(&pool, "processed").await, 0);
    lock.rollback().await.unwrap();
    for c in completions {
        c.await.unwrap().unwrap();
    }
    assert_eq!(count_state(&pool, "processed").await, handed_out as i64);
    assert_eq!(w.shutdown().await, 0, "nothing abandoned");
}

/// "A pull retry lets later messages pass" (proto-docs/sql-contract.md). The first row of an aggregate
/// fails once and waits out its backoff; the rows after it are handled meanwhile (one at a
/// time), and the retried row is handled again once it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_row_lets_the_rest_of_its_aggregate_pass() {
    let (store, url) = fresh_store("retrypass").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3, |_| Some("A".into())).await;
    let w = Worker::connect(
        &url,
        WorkerOptions {
            concurrency: 2,
            ..fast_opts("s")
        },
    )
    .await
    .unwrap();
    let seen: Arc<Mutex<Vec<(i64, i32)>>> = Arc::default();
    let stop = Arc::new(tokio::sync::Notify::new());
    let (s2, seen2) = (stop.clone(), seen.clone());
    let run = tokio::spawn(async move {
        w.run(
            move |task| {
                let seen = seen2.clone();
                async move {
                    let (n, attempt) = (
                        task.message().payload["n"].as_i64().unwrap(),
                        task.message().attempt,
                    );
                    seen.lock().unwrap().push((n, attempt));
                    if n == 0 && attempt == 0 {
                        return Ok(Outcome::Retry {
                            after: Some(Duration::from_millis(1500)),
                            reason: "not yet".into(),
                        });
                    }
                    Ok(Outcome::Complete)
                }
            },
            async move { s2.notified().await },
        )
        .await
    });
    wait_until(Duration::from_secs(20), || async {
        count_state(&pool, "processed").await == 3
    })
    .await;
    stop.notify_waiters();
    run.await.unwrap().unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(0, 0), (1, 0), (2, 0), (0, 1)],
        "rows 1 and 2 pass row 0 while it waits to be retried"
    );
    assert_eq!(
        row_state(&pool, "k0").await,
        ("processed".to_string(), 1, Some("not yet".to_string()))
    );
}
