//! Online migrations: migration 9 builds its outbox indexes CONCURRENTLY, outside a
//! transaction, so the application's inserts go on while it runs; a build that is interrupted
//! is repaired by the next run; two migrators at once both finish; a database that applied 9
//! as first released is accepted as it is. Every test drives the real `queuebox migrate` on a
//! database at version 8 holding 50,000 outbox rows (seconds; the 1,000,000-row figures are a
//! benchmark: benchmarks/migrations/stall.sh).

mod common;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::migrate::{self, POSTGRES};
use queuebox_core::store::postgres::PgStore;
use sqlx::{Connection, PgConnection};

const ROWS: i64 = 50_000;

/// A database at schema version 8 holding `ROWS` outbox rows, most of them `sent` (what
/// retention keeps, and what the topic index of 9 is built over).
async fn at_version_8(suite: &str) -> (String, PgStore) {
    let (url, store) = common::empty_db(suite).await;
    migrate::postgres::run_to(&store, 8)
        .await
        .expect("migrate to 8");
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload, state)
         SELECT 'topic-' || (g % 10), CASE WHEN g % 2 = 0 THEN 'k' || (g % 1000) END,
                jsonb_build_object('n', g), CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'sent' END
           FROM generate_series(1, $1) g",
    )
    .bind(ROWS)
    .execute(store.pool())
    .await
    .expect("fill the outbox");
    (url, store)
}

async fn migrate_cmd(url: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(common::queuebox_bin());
    cmd.args(["migrate", "--database-url", url])
        .env_remove("QUEUEBOX_DATABASE_URL")
        .env("RUST_LOG", "info,sqlx=warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs `queuebox migrate` to its end: (success, stdout + stderr).
async fn migrate_bin(url: &str) -> (bool, String) {
    let out = tokio::time::timeout(Duration::from_secs(120), migrate_cmd(url).await.output())
        .await
        .expect("queuebox migrate ended within 120 s")
        .expect("run queuebox migrate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The outbox's indexes as `pg_indexes` defines them, with whether each is valid.
async fn outbox_indexes(store: &PgStore) -> Vec<(String, bool)> {
    sqlx::query_as(
        "SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i
          WHERE i.indrelid = 'outbox'::regclass ORDER BY 1",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
}

async fn history(store: &PgStore) -> Vec<(i32, String)> {
    sqlx::query_as("SELECT version, checksum FROM queuebox_schema_history ORDER BY version")
        .fetch_all(store.pool())
        .await
        .unwrap()
}

/// What a fresh database migrated by this build has: the indexes every path must end with.
async fn expected_indexes() -> Vec<(String, bool)> {
    let (_, store) = common::empty_db("online_expected").await;
    migrate::postgres::run(&store).await.unwrap();
    let indexes = outbox_indexes(&store).await;
    store.close().await;
    indexes
}

/// Backends of `url`'s database running a statement that starts with `prefix` and waiting
/// for a lock (a concurrent build waiting for older transactions).
async fn waiting_backend(admin: &PgStore, db: &str, prefix: &str) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
          WHERE datname = $1 AND query LIKE $2 || '%' AND wait_event_type = 'Lock'",
    )
    .bind(db)
    .bind(prefix)
    .fetch_optional(admin.pool())
    .await
    .unwrap()
}

async fn wait_for_backend(admin: &PgStore, db: &str, prefix: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = waiting_backend(admin, db, prefix).await {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no backend ran `{prefix}…` within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn db_name(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_string()
}

/// The application: one insert into the outbox after another on a connection of its own,
/// until `stop`; returns the longest time between two inserts' completions and the count.
fn inserter(url: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(Duration, u64)> {
    tokio::spawn(async move {
        let mut conn = PgConnection::connect(&url).await.unwrap();
        let (mut longest, mut count) = (Duration::ZERO, 0u64);
        let mut last = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('app', '{}')")
                .execute(&mut conn)
                .await
                .unwrap();
            let now = Instant::now();
            longest = longest.max(now - last);
            last = now;
            count += 1;
        }
        (longest, count)
    })
}

/// Inserts go on while migration 9 runs, even while it waits for a long transaction: an
/// application's report that holds the outbox open for 3 s. Migration 9 as first released took
/// an ACCESS EXCLUSIVE lock (DROP INDEX) in its transaction: it queued behind the report, and
/// every insert queued behind it (a stall of ~3 s, failing this test).
#[tokio::test]
async fn inserts_go_on_while_migration_9_runs() {
    let (url, store) = at_version_8("online_stall").await;
    let stop = Arc::new(AtomicBool::new(false));
    let app = inserter(url.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The report: a transaction that read the outbox and is still open.
    let mut report = PgConnection::connect(&url).await.unwrap();
    let mut tx = report.begin().await.unwrap();
    sqlx::query("SELECT count(*) FROM outbox")
        .execute(&mut *tx)
        .await
        .unwrap();
    let finish_report = async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        tx.commit().await.unwrap();
    };
    let started = Instant::now();
    let migrate = async {
        let result = migrate_bin(&url).await;
        (result, started.elapsed())
    };
    let (((ok, out), took), ()) = tokio::join!(migrate, finish_report);
    assert!(ok, "queuebox migrate failed:\n{out}");
    assert!(out.contains("applied 0009_outbox_claim_indexes"), "{out}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let (longest, count) = app.await.unwrap();
    // The migration overlapped the report (a concurrent build waits for it to end): else this
    // test would not have shown anything.
    assert!(
        took >= Duration::from_millis(2500),
        "migration 9 took {took:?}: it did not wait for the open transaction"
    );
    assert!(
        longest < Duration::from_secs(1),
        "an insert into the outbox waited {longest:?} while migration 9 ran ({count} inserts, migration {took:?})"
    );
    println!("migration 9: {took:?}, {count} inserts, longest gap {longest:?}");
    assert_eq!(outbox_indexes(&store).await, expected_indexes().await);
    store.close().await;
}

/// A concurrent build cancelled midway leaves an INVALID index; the next run drops it and
/// builds it again (IF NOT EXISTS alone would keep the invalid one, which queries never use
/// and writes still maintain), then records version 9.
#[tokio::test]
async fn an_interrupted_concurrent_build_is_built_again() {
    let (url, store) = at_version_8("online_cancel").await;
    let admin = PgStore::connect(&format!("{}/postgres", common::server_url()), 2)
        .await
        .unwrap();
    // An open write transaction: the build waits for it after creating its (invalid) index.
    let mut writer = PgConnection::connect(&url).await.unwrap();
    let mut tx = writer.begin().await.unwrap();
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('open', '{}')")
        .execute(&mut *tx)
        .await
        .unwrap();
    let child = migrate_cmd(&url).await.spawn().unwrap();
    let pid = wait_for_backend(&admin, &db_name(&url), "CREATE INDEX CONCURRENTLY").await;
    let cancelled: bool = sqlx::query_scalar("SELECT pg_cancel_backend($1)")
        .bind(pid)
        .fetch_one(admin.pool())
        .await
        .unwrap();
    assert!(cancelled);
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the cancelled run failed");
    assert!(text.contains("0009_outbox_claim_indexes failed"), "{text}");
    tx.rollback().await.unwrap();
    let invalid: Vec<String> = outbox_indexes(&store)
        .await
        .into_iter()
        .filter(|(_, valid)| !valid)
        .map(|(d, _)| d)
        .collect();
    assert_eq!(
        invalid.len(),
        1,
        "the cancel left an invalid index: {invalid:?}"
    );
    assert!(history(&store).await.iter().all(|(v, _)| *v < 9));

    let (ok, out) = migrate_bin(&url).await;
    assert!(ok, "the next run failed:\n{out}");
    assert!(out.contains("dropping it to build it again"), "{out}");
    assert_eq!(outbox_indexes(&store).await, expected_indexes().await);
    let nine = POSTGRES.iter().find(|m| m.version == 9).unwrap();
    assert!(
        history(&store).await.contains(&(9, nine.checksum())),
        "9 recorded with its checksum"
    );
    store.close().await;
    admin.close().await;
}

/// Two `queuebox migrate` at once (two replicas starting) while the first one's concurrent
/// build waits: both finish, one applies 9, the other finds it applied. With the second one
/// waiting inside `pg_advisory_lock` (a statement holding a snapshot) the first one's build,
/// which waits for every older snapshot, and the second one waited for each other:
/// PostgreSQL ended one with "deadlock detected".
#[tokio::test]
async fn two_migrators_at_once_both_finish() {
    let (url, store) = at_version_8("online_two").await;
    let admin = PgStore::connect(&format!("{}/postgres", common::server_url()), 2)
        .await
        .unwrap();
    let mut writer = PgConnection::connect(&url).await.unwrap();
    let mut tx = writer.begin().await.unwrap();
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('open', '{}')")
        .execute(&mut *tx)
        .await
        .unwrap();
    let first = migrate_cmd(&url).await.spawn().unwrap();
    let building = wait_for_backend(&admin, &db_name(&url), "CREATE INDEX CONCURRENTLY").await;
    let second = migrate_cmd(&url).await.spawn().unwrap();
    // Until the second one has asked for the lock (polling it, or waiting in it), then a few
    // of its polls more.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let asked: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                 WHERE datname = $1 AND pid <> $2 AND query LIKE '%advisory_lock%')",
        )
        .bind(db_name(&url))
        .bind(building)
        .fetch_one(admin.pool())
        .await
        .unwrap();
        if asked || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    tx.commit().await.unwrap();
    let wait = |c: tokio::process::Child| async move {
        let out = tokio::time::timeout(Duration::from_secs(120), c.wait_with_output())
            .await
            .expect("ended within 120 s")
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let ((ok1, out1), (ok2, out2)) = tokio::join!(wait(first), wait(second));
    assert!(ok1, "the first migrator failed:\n{out1}");
    assert!(ok2, "the second migrator failed:\n{out2}");
    assert!(out1.contains("applied 0009_outbox_claim_indexes"), "{out1}");
    assert!(out2.contains("(0 applied now"), "{out2}");
    assert!(!out2.contains("deadlock"), "{out2}");
    assert!(out2.contains("another process is migrating"), "{out2}");
    assert_eq!(outbox_indexes(&store).await, expected_indexes().await);
    store.close().await;
    admin.close().await;
}

/// A database that applied migration 9 as first released (in one transaction, its checksum
/// recorded) is accepted by this build without running anything, and has the same indexes as
/// one that ran the online 9.
#[tokio::test]
async fn a_database_that_applied_9_as_released_is_accepted() {
    let released = include_str!("../../core/tests/fixtures/postgres_0009_as_shipped.sql");
    let (url, store) = at_version_8("online_released").await;
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::raw_sql(released).execute(&mut *tx).await.unwrap();
    let checksum = migrate::POSTGRES_SUPERSEDED[0].checksum;
    sqlx::query(
        "INSERT INTO queuebox_schema_history (version, name, checksum)
         VALUES (9, '0009_outbox_claim_indexes', $1)",
    )
    .bind(checksum)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (ok, out) = migrate_bin(&url).await;
    assert!(ok, "a database at the released 9 was refused:\n{out}");
    assert!(out.contains(", 9 already applied)"), "{out}");
    assert!(!out.contains("applied 0009"), "{out}");
    assert!(
        history(&store).await.contains(&(9, checksum.to_string())),
        "9's history row is kept as it was"
    );
    assert_eq!(outbox_indexes(&store).await, expected_indexes().await);
    store.close().await;
}
