//! Items of the client contract (proto-docs/client-contract.md) that the Rust suite had no test of its own
//! for: 16 (no polling storm on an empty table) and 19 (a claim-lock failure, SQL Server's Msg
//! 51000, is transient: back off, retry the whole call, never mark the row failed or dead),
//! with the completion half of 19: a transient error of the completion statement is retried
//! too, so the row is neither handled again after its lease nor failed. PostgreSQL plays SQL
//! Server's part through a trigger that raises SQLSTATE 51000, the code the SQL Server store
//! reports for its claim lock (`core/src/store/sqlserver/sql.rs`); `Error::is_transient` is
//! what both decisions consult, whatever the backend.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::store::postgres::PgStore;
use queuebox_core::store::Store;
use queuebox_core::{Outcome, Worker, WorkerOptions};
use sqlx::PgPool;

fn options(source: &str, poll: Duration) -> WorkerOptions {
    let mut o = WorkerOptions::new(source);
    o.poll_interval = poll;
    o.lease = Duration::from_secs(30);
    o
}

/// Makes the first `n` updates of an inbox row from `from` to `to` fail with SQLSTATE
/// 51000. The count lives in a sequence, which a failed statement does not roll back.
async fn fail_with_51000(pool: &PgPool, from: &str, to: &str, n: u32) {
    sqlx::raw_sql(&format!(
        "CREATE SEQUENCE failures;
         CREATE FUNCTION lock_timeout() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           IF nextval('failures') <= {n} THEN
             RAISE EXCEPTION 'sp_getapplock did not acquire the claim lock' USING ERRCODE = '51000';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER lock_timeout BEFORE UPDATE ON inbox FOR EACH ROW
           WHEN (OLD.state = '{from}' AND NEW.state = '{to}') EXECUTE FUNCTION lock_timeout();"
    ))
    .execute(pool)
    .await
    .unwrap();
}

/// How often the trigger ran: the failures it raised, plus one for the update it let pass.
async fn trigger_runs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT last_value FROM failures")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Item 19: a claim that fails with 51000 three times is retried by the worker (counted as
/// claim errors), and the row is then claimed and handled with its attempt unspent: never
/// failed, retried or dead for the failed claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_19_a_claim_failing_with_51000_is_retried_and_never_fails_the_row() {
    let (store, url) = support::fresh_store("contract19_claim").await;
    support::insert_pull_rows(store.pool(), "locks", 1, |_| None).await;
    fail_with_51000(store.pool(), "pending", "processing", 3).await;
    let worker = Worker::connect(&url, options("locks", Duration::from_millis(50)))
        .await
        .unwrap();
    let task = tokio::time::timeout(Duration::from_secs(10), worker.next())
        .await
        .expect("claimed once the claim lock is granted")
        .unwrap()
        .expect("a task");
    assert_eq!(
        task.message().attempt,
        0,
        "the failed claims spent no attempt"
    );
    task.complete().await.unwrap();
    worker.shutdown().await;
    assert_eq!(
        trigger_runs(store.pool()).await,
        4,
        "three claims failed, the fourth passed"
    );
    let stats = worker.stats();
    assert!(stats.claim_errors >= 3, "{stats:?}");
    assert_eq!(
        (stats.completed, stats.retried, stats.dead),
        (1, 0, 0),
        "{stats:?}"
    );
    assert_eq!(
        support::row_state(store.pool(), "k0").await,
        ("processed".to_string(), 0, None)
    );
}

/// Item 19, the completion: the completion statement fails with 51000 twice; the worker
/// tries it again at once instead of leaving the row to come back after its 30 s lease, so
/// the handler runs once and the row is processed within seconds, attempt 0, never dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_19_a_completion_failing_with_51000_is_retried_not_redelivered_or_dead() {
    let (store, url) = support::fresh_store("contract19_complete").await;
    support::insert_pull_rows(store.pool(), "locks", 1, |_| None).await;
    fail_with_51000(store.pool(), "processing", "processed", 2).await;
    let worker = Worker::connect(&url, options("locks", Duration::from_millis(50)))
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let pool = store.pool().clone();
    let processed = async move {
        for _ in 0..200 {
            if support::row_state(&pool, "k0").await.0 == "processed" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    worker
        .run(
            move |_task| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok(Outcome::Complete) }
            },
            processed,
        )
        .await
        .unwrap();
    assert_eq!(
        trigger_runs(store.pool()).await,
        3,
        "two completions failed, the third passed"
    );
    assert_eq!(
        support::row_state(store.pool(), "k0").await,
        ("processed".to_string(), 0, None),
        "processed by the retried completion, within 10 s (the lease is 30 s)"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    let stats = worker.stats();
    assert_eq!(
        (
            stats.completed,
            stats.retried,
            stats.dead,
            stats.claims_lost
        ),
        (1, 0, 0, 0),
        "{stats:?}"
    );
}

/// Item 16: a worker on an empty source claims about once per poll interval. Every claim
/// statement is an UPDATE of the inbox, which fires a statement trigger even when it updates
/// nothing; the trigger counts them. Over 2 s at a 200 ms poll interval that is about 10
/// (a storm makes thousands). The database's committed transactions over the same run,
/// read after the worker's connections closed (a backend flushes its counters on exit),
/// bound everything else it ran too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_16_an_idle_worker_claims_about_once_per_poll_interval() {
    let url = queuebox_testkit::fresh_database("contract16").await;
    let name = url.rsplit_once('/').unwrap().1.to_string();
    let admin = PgPool::connect(&queuebox_testkit::database_url())
        .await
        .unwrap();
    let commits = || {
        let (admin, name) = (admin.clone(), name.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            sqlx::query("SELECT pg_stat_force_next_flush()")
                .execute(&admin)
                .await
                .unwrap();
            sqlx::query_scalar::<_, i64>(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
            )
            .bind(&name)
            .fetch_one(&admin)
            .await
            .unwrap()
        }
    };
    let setup = PgStore::connect(&url, 2).await.unwrap();
    queuebox_core::migrate::postgres::run(&setup).await.unwrap();
    sqlx::raw_sql(
        "CREATE SEQUENCE claims_seen;
         CREATE FUNCTION claim_seen() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN PERFORM nextval('claims_seen'); RETURN NULL; END $$;
         CREATE TRIGGER claim_seen AFTER UPDATE ON inbox FOR EACH STATEMENT EXECUTE FUNCTION claim_seen();",
    )
    .execute(setup.pool())
    .await
    .unwrap();
    setup.close().await;
    let before = commits().await;

    let store = Arc::new(PgStore::connect(&url, 4).await.unwrap());
    let worker = Worker::new(
        store.clone() as Arc<dyn Store>,
        options("idle", Duration::from_millis(200)),
    )
    .await
    .unwrap();
    worker
        .run(
            |_task| async { Ok(Outcome::Complete) },
            tokio::time::sleep(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    drop(worker);
    store.close().await;
    let transactions = commits().await - before;

    let check = PgStore::connect(&url, 1).await.unwrap();
    let (seen, called): (i64, bool) =
        sqlx::query_as("SELECT last_value, is_called FROM claims_seen")
            .fetch_one(check.pool())
            .await
            .unwrap();
    let seen = if called { seen } else { 0 };
    check.close().await;
    eprintln!(
        "idle worker, 2 s at a 200 ms poll interval: {seen} claim statements, {transactions} transactions"
    );
    assert!(
        (4..=20).contains(&seen),
        "{seen} claim statements in 2 s: want about 10 (one per poll interval)"
    );
    assert!(
        transactions <= 60,
        "{transactions} transactions in 2 s of an idle worker: a polling storm"
    );
}
