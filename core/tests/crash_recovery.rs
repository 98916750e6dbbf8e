//! Crash recovery in seconds, with real processes: a pull worker runs as a child
//! process (this test binary re-run on the ignored `child_worker`), claims rows with a slow
//! handler and is then SIGKILLed or SIGSTOPped; a second worker in the test process must
//! - finish a killed worker's rows within 2 s of the kill, each exactly once, although their
//!   60 s lease has barely started (the dead worker's owner session is gone);
//! - leave a paused worker's rows alone until their lease runs out (its session is alive), and
//!   the paused worker, once resumed, must not complete a row that was taken from it.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuebox_core::{Worker, WorkerOptions};
use sqlx::PgPool;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

/// Not a test on its own: the worker process of the tests below. Claims with a lease of
/// `QB_CHILD_LEASE_MS`, runs a handler that sleeps `QB_CHILD_HANDLER_MS` (ignoring
/// cancellation, like a handler stuck in a call) and then tries to complete; prints
/// `CLAIMED <id>` and `COMPLETE <id> ok|refused: <error>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn child_worker() {
    let url = std::env::var("QB_CHILD_URL").unwrap();
    let ms = |v: &str| Duration::from_millis(std::env::var(v).unwrap().parse().unwrap());
    let (lease, handler) = (ms("QB_CHILD_LEASE_MS"), ms("QB_CHILD_HANDLER_MS"));
    let opts = WorkerOptions {
        lease,
        batch_size: Some(10),
        concurrency: 10,
        ..WorkerOptions::new("s")
    };
    let w = Worker::connect(&url, opts).await.unwrap();
    loop {
        let task = w.next().await.unwrap().unwrap();
        println!("CLAIMED {}", task.message().id);
        tokio::spawn(async move {
            tokio::time::sleep(handler).await;
            match task.complete().await {
                Ok(()) => println!("COMPLETE {} ok", task.message().id),
                Err(e) => println!("COMPLETE {} refused: {e}", task.message().id),
            }
        });
    }
}

/// Starts the child worker and waits until it has claimed `rows` rows; returns their ids.
async fn start_child(
    url: &str,
    lease_ms: u64,
    handler_ms: u64,
    rows: usize,
) -> (Child, Lines<BufReader<ChildStdout>>, Vec<String>) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_worker", "--nocapture"])
        .env("QB_CHILD_URL", url)
        .env("QB_CHILD_LEASE_MS", lease_ms.to_string())
        .env("QB_CHILD_HANDLER_MS", handler_ms.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut claimed = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while claimed.len() < rows {
            let l = lines.next_line().await.unwrap().expect("child ended early");
            if let Some(id) = l.strip_prefix("CLAIMED ") {
                claimed.push(id.to_string());
            }
        }
    })
    .await
    .expect("the child claimed every row");
    claimed.sort();
    (child, lines, claimed)
}

/// A worker in this process that completes whatever it claims and counts completions per id.
fn start_rescuer(w: Worker) -> Arc<Mutex<HashMap<String, u32>>> {
    let done = Arc::new(Mutex::new(HashMap::new()));
    let seen = done.clone();
    tokio::spawn(async move {
        while let Ok(Some(task)) = w.next().await {
            // Counted before the completion commits: the test reads this map once the
            // database shows every row processed, which can be before `complete` returns.
            *seen
                .lock()
                .unwrap()
                .entry(task.message().id.to_string())
                .or_insert(0) += 1;
            task.complete().await.unwrap();
        }
    });
    done
}

async fn processed(pool: &PgPool) -> i64 {
    count_state(pool, "processed").await
}

fn signal(child: &Child, sig: &str) {
    let pid = child.id().unwrap().to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

fn rescuer_opts() -> WorkerOptions {
    WorkerOptions {
        lease: Duration::from_secs(60),
        ..WorkerOptions::new("s")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_rows_run_again_within_two_seconds_exactly_once() {
    let (store, url) = fresh_store("crash").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 5, |_| None).await;
    let (mut child, _lines, claimed) = start_child(&url, 60_000, 600_000, 5).await;
    let owners: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT claim_owner) FROM inbox WHERE state = 'processing' AND claim_owner IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(owners, 1, "the child's claims record its owner key");
    // The rescuer is up before the kill, so the time measured is recovery, not start-up.
    let rescuer = Worker::connect(&url, rescuer_opts()).await.unwrap();
    let done = start_rescuer(rescuer.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(processed(&pool).await, 0, "live leases are not taken");

    child.start_kill().unwrap(); // SIGKILL: no shutdown, no release
    let killed_at = Instant::now();
    child.wait().await.unwrap();
    while processed(&pool).await < 5 {
        assert!(
            killed_at.elapsed() < Duration::from_secs(2),
            "the killed worker's rows were not all completed within 2 s of the kill (60 s lease)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = killed_at.elapsed();
    eprintln!("crash_recovery: 5 rows of a SIGKILLed worker completed {took:?} after the kill");
    let done = done.lock().unwrap().clone();
    let mut ids: Vec<String> = done.keys().cloned().collect();
    ids.sort();
    assert_eq!(
        ids, claimed,
        "the rescuer completed exactly the killed worker's rows"
    );
    assert!(
        done.values().all(|n| *n == 1),
        "each exactly once: {done:?}"
    );
    let attempts: i32 = sqlx::query_scalar("SELECT max(attempt) FROM inbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(attempts, 0, "a crash spends no attempt");
    assert_eq!(rescuer.stats().claims_lost, 0);
    rescuer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_worker_keeps_its_rows_until_its_lease_and_cannot_complete_them_after() {
    let (store, url) = fresh_store("pause").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    // Lease 6 s (renewed every 2 s), handler 9 s: once resumed, the child tries to complete
    // rows the rescuer has taken after the lease ran out.
    let (mut child, mut lines, claimed) = start_child(&url, 6_000, 9_000, 3).await;
    let rescuer = Worker::connect(&url, rescuer_opts()).await.unwrap();
    let done = start_rescuer(rescuer.clone());

    signal(&child, "-STOP");
    let stopped_at = Instant::now();
    // Longer than the 2 s a dead worker's rows take: the paused worker's session is alive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        processed(&pool).await,
        0,
        "a paused worker's rows wait for its lease"
    );
    while processed(&pool).await < 3 {
        assert!(
            stopped_at.elapsed() < Duration::from_secs(15),
            "rows not redelivered after the lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "crash_recovery: a paused worker's rows (6 s lease) were taken {:?} after the pause",
        stopped_at.elapsed()
    );

    signal(&child, "-CONT");
    let mut refused = 0;
    tokio::time::timeout(Duration::from_secs(30), async {
        while refused < 3 {
            let l = lines.next_line().await.unwrap().expect("child ended early");
            if l.starts_with("COMPLETE ") {
                assert!(
                    l.contains(" refused: "),
                    "the resumed worker completed a row taken from it: {l}"
                );
                refused += 1;
            }
        }
    })
    .await
    .expect("the resumed worker tried to complete its three rows");
    let done = done.lock().unwrap().clone();
    let mut ids: Vec<String> = done.keys().cloned().collect();
    ids.sort();
    assert_eq!(ids, claimed);
    assert!(
        done.values().all(|n| *n == 1),
        "each exactly once: {done:?}"
    );
    assert_eq!(processed(&pool).await, 3);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    rescuer.shutdown().await;
}

/// The owner keys whose session locks are held in this test's database (a bigint advisory
/// key shows in pg_locks as classid = high half, objid = low half, objsubid = 1).
async fn held_owner_keys(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT ((classid::bigint << 32) | objid::bigint) FROM pg_locks
          WHERE locktype = 'advisory' AND objsubid = 1 AND granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_session_broke_loses_its_rows_and_opens_a_new_session() {
    let (store, url) = fresh_store("session").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    let opts = WorkerOptions {
        batch_size: Some(3),
        concurrency: 3,
        ..rescuer_opts()
    };
    let a = Worker::connect(&url, opts).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(a.next().await.unwrap().unwrap());
    }
    let old_keys = held_owner_keys(&pool).await;
    assert_eq!(old_keys.len(), 1, "one worker, one owner lock");
    let recorded: Vec<Option<i64>> =
        sqlx::query_scalar("SELECT DISTINCT claim_owner FROM inbox WHERE state = 'processing'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(recorded, vec![Some(old_keys[0])]);
    // The owner session's connection dies while the worker lives on (a network cut, an
    // administrator's pg_terminate_backend).
    let killed: bool = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_locks
          WHERE locktype = 'advisory' AND objsubid = 1 AND granted
            AND ((classid::bigint << 32) | objid::bigint) = $1",
    )
    .bind(old_keys[0])
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(killed);
    let cut_at = Instant::now();
    let b = Worker::connect(&url, rescuer_opts()).await.unwrap();
    let done = start_rescuer(b.clone());
    while processed(&pool).await < 3 {
        assert!(
            cut_at.elapsed() < Duration::from_secs(5),
            "rows of a broken owner session were not recovered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(done.lock().unwrap().values().all(|n| *n == 1));
    for t in &tasks {
        assert!(
            t.complete().await.is_err(),
            "a row taken from a worker can never be completed by it"
        );
    }
    // Within a second or two the worker holds a new key (and B its own); the old one is gone.
    let start = Instant::now();
    loop {
        let keys = held_owner_keys(&pool).await;
        if keys.len() == 2 && !keys.contains(&old_keys[0]) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no new owner session: {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processed(&pool).await, 3);
    a.shutdown().await;
    b.shutdown().await;
}
