//! The PostgreSQL migration runner: [`crate::migrate::POSTGRES`] applied in version order,
//! each file in its own transaction with its history row, or statement by statement when its
//! first line is [`crate::migrate::NO_TRANSACTION`] (what such a file may hold:
//! [`crate::migrate`]), recorded with its checksum in `queuebox_schema_history`, the whole run
//! under a session-level advisory lock so several replicas starting at once take turns.
//! Applying twice is a no-op; an edited released file fails unless [`POSTGRES_SUPERSEDED`]
//! lists its old checksum.

use sqlx::Row;

use super::sql::{
    HAS_HISTORY, HAS_TABLES, HISTORY_CREATE as HISTORY, HISTORY_INSERT, HISTORY_MAX,
    HISTORY_SELECT, INDEX_INVALID, MIGRATE_LOCK, MIGRATE_UNLOCK,
};
use super::{db_err, PgStore};
use crate::error::{Error, Result};
use crate::migrate::catalog::{
    baseline_of, baseline_refused, concurrent_index_name, statements, Migration, MigrationReport,
    NO_HISTORY, POSTGRES, POSTGRES_SUPERSEDED,
};

/// An arbitrary constant: concurrent `migrate` runs (several replicas starting at once)
/// take turns on this session-level advisory lock ([`take_lock`]).
const LOCK_KEY: i64 = 0x0051_5545_5542_4f58;

/// Applies every pending migration. Safe to run from several processes at once.
pub async fn run(store: &PgStore) -> Result<MigrationReport> {
    run_with_baseline(store, None).await
}

/// [`run`], after recording `baseline` and every version before it as applied without
/// running them (`queuebox migrate --baseline`, for a schema applied by hand); refused,
/// changing nothing, when the database has a history already.
pub async fn run_with_baseline(store: &PgStore, baseline: Option<i32>) -> Result<MigrationReport> {
    run_locked(store, baseline, i32::MAX).await
}

/// Applies the pending migrations up to and including version `last` only: a database
/// at an older schema, for tests and benchmarks of what a later migration does to it.
pub async fn run_to(store: &PgStore, last: i32) -> Result<MigrationReport> {
    run_locked(store, None, last).await
}

/// [`apply`] on one connection under the migration lock, released whatever the outcome.
async fn run_locked(store: &PgStore, baseline: Option<i32>, last: i32) -> Result<MigrationReport> {
    let mut conn = store
        .pool()
        .acquire()
        .await
        .map_err(|e| db_err("migrate", e))?;
    take_lock(&mut conn).await?;
    let result = apply(&mut conn, baseline, last).await;
    let _ = sqlx::query(MIGRATE_UNLOCK)
        .bind(LOCK_KEY)
        .execute(&mut *conn)
        .await;
    result
}

/// Takes the migration lock, waiting for another migrator to finish. Polls
/// `pg_try_advisory_lock` instead of waiting in `pg_advisory_lock`: a waiting
/// `pg_advisory_lock` is a running statement with a snapshot, and a `CREATE INDEX
/// CONCURRENTLY` of the lock holder waits for every such snapshot to end before it
/// finishes, while the waiter waits for the holder: PostgreSQL would end one of the two
/// with "deadlock detected". Between polls this session holds no snapshot.
async fn take_lock(conn: &mut sqlx::PgConnection) -> Result<()> {
    let mut waited = std::time::Duration::ZERO;
    let mut next_log = std::time::Duration::ZERO;
    loop {
        let got: bool = sqlx::query_scalar(MIGRATE_LOCK)
            .bind(LOCK_KEY)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| db_err("migrate lock", e))?;
        if got {
            return Ok(());
        }
        if waited >= next_log {
            tracing::info!(
                waited_s = waited.as_secs(),
                "another process is migrating this database; waiting for it to finish"
            );
            next_log = waited + std::time::Duration::from_secs(30);
        }
        let pause = std::time::Duration::from_millis(200);
        tokio::time::sleep(pause).await;
        waited += pause;
    }
}

/// Applies `m` outside a transaction (its first line is
/// [`crate::migrate::NO_TRANSACTION`]): one statement at a time, an index an interrupted
/// concurrent build left INVALID dropped before it is built again, the history row last.
async fn apply_online(conn: &mut sqlx::PgConnection, m: &Migration) -> Result<()> {
    let failed =
        |e: sqlx::Error| Error::Migration(format!("{} failed: {}", m.name, db_err("migrate", e)));
    for statement in statements(m.sql) {
        if let Some(index) = concurrent_index_name(&statement) {
            let invalid: bool = sqlx::query_scalar(INDEX_INVALID)
                .bind(index)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed)?;
            if invalid {
                tracing::warn!(
                    migration = m.name,
                    index,
                    "an interrupted concurrent build left this index invalid; dropping it to build it again"
                );
                let drop = format!("DROP INDEX CONCURRENTLY IF EXISTS {index}");
                sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(&drop))
                    .await
                    .map_err(failed)?;
            }
        }
        tracing::info!(
            migration = m.name,
            statement = statement.lines().next().unwrap_or(""),
            "running outside a transaction"
        );
        sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(&statement))
            .await
            .map_err(failed)?;
    }
    record(conn, m).await
}

/// Writes `m`'s history row (version, name, checksum): applied, or recorded as a baseline.
async fn record(conn: &mut sqlx::PgConnection, m: &Migration) -> Result<()> {
    sqlx::query(HISTORY_INSERT)
        .bind(m.version)
        .bind(m.name)
        .bind(m.checksum())
        .execute(conn)
        .await
        .map_err(|e| db_err("migrate", e))?;
    Ok(())
}

// `Executor::execute(conn, raw_sql(..))` rather than `raw_sql(..).execute(conn)`: the latter
// defeats the compiler's `Send` proof once the runner sits behind `async_trait`
// ([`crate::backend::Database::migrate`]).
async fn apply(
    conn: &mut sqlx::PgConnection,
    baseline: Option<i32>,
    last: i32,
) -> Result<MigrationReport> {
    let had_history: bool = sqlx::query_scalar(HAS_HISTORY)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| db_err("migrate", e))?;
    if had_history && baseline.is_some() {
        let v: Option<i32> = sqlx::query_scalar(HISTORY_MAX)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| db_err("migrate", e))?;
        return Err(baseline_refused(v.unwrap_or(0)));
    }
    if let Some(version) = baseline {
        // Checked before anything is written, so a bad version changes nothing.
        let recorded = baseline_of(POSTGRES, version)?;
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(|e| db_err("migrate", e))?;
        sqlx::Executor::execute(&mut *tx, sqlx::raw_sql(HISTORY))
            .await
            .map_err(|e| db_err("migrate", e))?;
        for m in recorded {
            record(&mut tx, m).await?;
            tracing::info!(migration = m.name, "recorded as applied (baseline)");
        }
        tx.commit().await.map_err(|e| db_err("migrate", e))?;
    } else if !had_history {
        let existing: bool = sqlx::query_scalar(HAS_TABLES)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| db_err("migrate", e))?;
        if existing {
            return Err(Error::Migration(NO_HISTORY.into()));
        }
    }
    sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(HISTORY))
        .await
        .map_err(|e| db_err("migrate", e))?;
    let rows = sqlx::query(HISTORY_SELECT)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| db_err("migrate", e))?;
    let mut report = MigrationReport::default();
    for row in &rows {
        let version: i32 = row.get("version");
        let checksum: String = row.get("checksum");
        match POSTGRES.iter().find(|m| m.version == version) {
            None => {
                return Err(Error::Migration(format!(
                    "the database has migration version {version}, which this build does not know; run a newer queuebox"
                )))
            }
            Some(m) if !m.accepts_checksum(&checksum, POSTGRES_SUPERSEDED) => {
                return Err(Error::Migration(format!(
                    "migration {} was changed after it was applied (checksum {} in the database, {} in this build)",
                    m.name,
                    checksum,
                    m.checksum()
                )))
            }
            Some(m) => report.already_applied.push(m.name.to_string()),
        }
    }
    let applied: Vec<i32> = rows.iter().map(|r| r.get::<i32, _>("version")).collect();
    let pending: Vec<&Migration> = POSTGRES
        .iter()
        .filter(|m| !applied.contains(&m.version) && m.version <= last)
        .collect();
    drop(rows);
    for m in pending {
        if !m.in_transaction() {
            apply_online(conn, m).await?;
            tracing::info!(migration = m.name, "applied migration");
            report.applied.push(m.name.to_string());
            continue;
        }
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(|e| db_err("migrate", e))?;
        sqlx::Executor::execute(&mut *tx, sqlx::raw_sql(m.sql))
            .await
            .map_err(|e| {
                Error::Migration(format!("{} failed: {}", m.name, db_err("migrate", e)))
            })?;
        record(&mut tx, m).await?;
        tx.commit().await.map_err(|e| db_err("migrate", e))?;
        tracing::info!(migration = m.name, "applied migration");
        report.applied.push(m.name.to_string());
    }
    Ok(report)
}

/// The highest applied version, 0 when the history table does not exist.
pub async fn current_version(store: &PgStore) -> Result<i32> {
    let exists: bool = sqlx::query_scalar(HAS_HISTORY)
        .fetch_one(store.pool())
        .await
        .map_err(|e| db_err("schema version", e))?;
    if !exists {
        return Ok(0);
    }
    let v: Option<i32> = sqlx::query_scalar(HISTORY_MAX)
        .fetch_one(store.pool())
        .await
        .map_err(|e| db_err("schema version", e))?;
    Ok(v.unwrap_or(0))
}
