//! Schema migrations, embedded in the binary from `core/migrations/<backend>/` (inside this
//! crate, so `cargo package` ships them), applied in version order, each in its own
//! transaction, recorded with a checksum in `queuebox_schema_history`. Applying twice is a
//! no-op; an edited released file fails.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// One migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    pub fn checksum(&self) -> String {
        hex::encode(Sha256::digest(self.sql.as_bytes()))
    }
}

macro_rules! migration {
    ($dir:literal, $version:literal, $name:literal) => {
        Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../migrations/", $dir, "/", concat!($name, ".sql"))),
        }
    };
}

/// The PostgreSQL migrations, in order.
pub const POSTGRES: &[Migration] = &[
    migration!("postgres", 1, "0001_create_outbox"),
    migration!("postgres", 2, "0002_create_inbox"),
    migration!("postgres", 3, "0003_inbox_pull_notify"),
    migration!("postgres", 4, "0004_outbox_publish"),
    migration!("postgres", 5, "0005_inbox_trace_context"),
    migration!("postgres", 6, "0006_inbox_claim_owner"),
    migration!("postgres", 7, "0007_outbox_claim_owner"),
    migration!("postgres", 8, "0008_time_ordered_ids"),
    migration!("postgres", 9, "0009_outbox_claim_indexes"),
];

/// The SQL Server migrations, in order: the same versions as [`POSTGRES`] (a version that does
/// not apply to SQL Server, like the NOTIFY trigger of 3, is a comment-only file).
pub const SQLSERVER: &[Migration] = &[
    migration!("sqlserver", 1, "0001_create_outbox"),
    migration!("sqlserver", 2, "0002_create_inbox"),
    migration!("sqlserver", 3, "0003_inbox_pull_notify"),
    migration!("sqlserver", 4, "0004_outbox_publish"),
    migration!("sqlserver", 5, "0005_inbox_trace_context"),
    migration!("sqlserver", 6, "0006_inbox_claim_owner"),
    migration!("sqlserver", 7, "0007_outbox_claim_owner"),
    migration!("sqlserver", 8, "0008_time_ordered_ids"),
    migration!("sqlserver", 9, "0009_outbox_claim_indexes"),
];

/// What a migration run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    pub applied: Vec<String>,
    pub already_applied: Vec<String>,
}

/// Why `migrate` and the service refuse QueueBox tables that have no migration history
/// (created by hand or by another tool): the reference's wording (§2.5).
pub const NO_HISTORY: &str = "QueueBox tables exist without a migration history. Run \
     `queuebox migrate --baseline <version>` with the last version you applied by hand.";

/// The migrations a `--baseline <version>` records as applied without running them: `version`
/// and every one before it. A version this build does not have is refused (0 records nothing).
pub fn baseline_of(migrations: &[Migration], version: i32) -> Result<Vec<&Migration>> {
    let latest = latest_version(migrations);
    if version < 0 || version > latest {
        return Err(Error::Migration(format!(
            "--baseline {version} is not a migration version of this build (0 to {latest})"
        )));
    }
    Ok(migrations.iter().filter(|m| m.version <= version).collect())
}

/// The refusal of a baseline on a database that has a history already (nothing was changed).
pub fn baseline_refused(current: i32) -> Error {
    Error::Migration(format!(
        "the database already has a migration history (at version {current}); --baseline is only \
         for a database without one. Nothing was changed"
    ))
}

/// The latest version this build knows; readiness compares the database with it.
pub fn latest_version(migrations: &[Migration]) -> i32 {
    migrations.iter().map(|m| m.version).max().unwrap_or(0)
}

#[cfg(feature = "postgres")]
pub mod postgres {
    //! The PostgreSQL migration runner.
    use super::*;
    use crate::store::postgres::sql::{
        HAS_HISTORY, HAS_TABLES, HISTORY_CREATE as HISTORY, HISTORY_INSERT, HISTORY_MAX,
        HISTORY_SELECT, MIGRATE_LOCK, MIGRATE_UNLOCK,
    };
    use crate::store::postgres::{db_err, PgStore};
    use sqlx::Row;

    /// An arbitrary constant: concurrent `migrate` runs (several replicas starting at once)
    /// take turns on this advisory lock.
    const LOCK_KEY: i64 = 0x0051_5545_5542_4f58;

    /// Applies every pending migration. Safe to run from several processes at once.
    pub async fn run(store: &PgStore) -> Result<MigrationReport> {
        run_with_baseline(store, None).await
    }

    /// [`run`], after recording `baseline` and every version before it as applied without
    /// running them (`queuebox migrate --baseline`, for a schema applied by hand); refused,
    /// changing nothing, when the database has a history already.
    pub async fn run_with_baseline(
        store: &PgStore,
        baseline: Option<i32>,
    ) -> Result<MigrationReport> {
        let mut conn = store
            .pool()
            .acquire()
            .await
            .map_err(|e| db_err("migrate", e))?;
        sqlx::query(MIGRATE_LOCK)
            .bind(LOCK_KEY)
            .execute(&mut *conn)
            .await
            .map_err(|e| db_err("migrate lock", e))?;
        let result = apply(&mut conn, baseline).await;
        let _ = sqlx::query(MIGRATE_UNLOCK)
            .bind(LOCK_KEY)
            .execute(&mut *conn)
            .await;
        result
    }

    // `Executor::execute(conn, raw_sql(..))` rather than `raw_sql(..).execute(conn)`: the latter
    // defeats the compiler's `Send` proof once the runner sits behind `async_trait`
    // ([`crate::backend::Database::migrate`]).
    async fn apply(
        conn: &mut sqlx::PgConnection,
        baseline: Option<i32>,
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
                sqlx::query(HISTORY_INSERT)
                    .bind(m.version)
                    .bind(m.name)
                    .bind(m.checksum())
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_err("migrate", e))?;
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
                Some(m) if m.checksum() != checksum => {
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
            .filter(|m| !applied.contains(&m.version))
            .collect();
        drop(rows);
        for m in pending {
            let mut tx = sqlx::Connection::begin(&mut *conn)
                .await
                .map_err(|e| db_err("migrate", e))?;
            sqlx::Executor::execute(&mut *tx, sqlx::raw_sql(m.sql))
                .await
                .map_err(|e| {
                    Error::Migration(format!("{} failed: {}", m.name, db_err("migrate", e)))
                })?;
            sqlx::query(HISTORY_INSERT)
                .bind(m.version)
                .bind(m.name)
                .bind(m.checksum())
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("migrate", e))?;
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
}

#[cfg(feature = "sqlserver")]
pub mod sqlserver {
    //! The SQL Server migration runner (`queuebox migrate` with a `sqlserver://` URL).
    pub use crate::store::sqlserver::migrate::{current_version, plan, run, run_with_baseline};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_records_its_version_and_every_earlier_one() {
        let recorded: Vec<i32> = baseline_of(POSTGRES, 3)
            .unwrap()
            .iter()
            .map(|m| m.version)
            .collect();
        assert_eq!(recorded, [1, 2, 3]);
        assert!(baseline_of(POSTGRES, 0).unwrap().is_empty());
        let latest = latest_version(POSTGRES);
        assert_eq!(baseline_of(POSTGRES, latest).unwrap().len(), POSTGRES.len());
        for bad in [-1, latest + 1] {
            let e = baseline_of(POSTGRES, bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--baseline {bad}")), "{e}");
        }
    }
}
