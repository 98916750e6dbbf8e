//! The SQL Server migration runner: [`crate::migrate::SQLSERVER`] applied in version order,
//! each file as one batch in its own transaction, recorded with its checksum in
//! `queuebox_schema_history`, the whole run under a session-owned `sp_getapplock` so several
//! replicas starting at once take turns. Applying twice is a no-op; an edited released file
//! fails.

use tiberius::ToSql;

use super::{db_err, sql, Client, SqlServerStore};
use crate::error::{Error, Result};
use crate::migrate::catalog::{
    baseline_of, baseline_refused, Migration, MigrationReport, NO_HISTORY, SQLSERVER,
};

/// Applies every pending migration. Safe to run from several processes at once.
pub async fn run(store: &SqlServerStore) -> Result<MigrationReport> {
    run_with_baseline(store, None).await
}

/// [`run`], after recording `baseline` and every version before it as applied without running
/// them (`queuebox migrate --baseline`, for a schema applied by hand); refused, changing
/// nothing, when the database has a history already.
pub async fn run_with_baseline(
    store: &SqlServerStore,
    baseline: Option<i32>,
) -> Result<MigrationReport> {
    let mut conn = store.pool().get().await?;
    let client = conn.client();
    let lock: i32 = scalar(client, sql::MIGRATE_LOCK, &[], "result")
        .await?
        .unwrap_or(-999);
    if lock < 0 {
        return Err(Error::Migration(format!("could not take the migration lock (sp_getapplock returned {lock}); another migrate is still running")));
    }
    let result = apply(client, baseline).await;
    match result {
        Ok(report) => {
            exec(client, sql::MIGRATE_UNLOCK, &[]).await?;
            conn.release();
            Ok(report)
        }
        // Dropping the connection without release closes it, which rolls back and unlocks.
        Err(e) => Err(e),
    }
}

async fn apply(client: &mut Client, baseline: Option<i32>) -> Result<MigrationReport> {
    let (has_tables, has_history) = {
        let rows = client
            .simple_query(sql::SCHEMA_CHECK)
            .await
            .map_err(|e| db_err("migrate", e))?
            .into_first_result()
            .await
            .map_err(|e| db_err("migrate", e))?;
        let row = rows
            .first()
            .ok_or_else(|| Error::Migration("the schema check returned no row".into()))?;
        let flag = |c: &str| row.get::<i32, _>(c) == Some(1);
        (flag("has_inbox") || flag("has_outbox"), flag("has_history"))
    };
    if has_history && baseline.is_some() {
        let current: i32 = scalar(client, sql::HISTORY_MAX, &[], "version")
            .await?
            .unwrap_or(0);
        return Err(baseline_refused(current));
    }
    if !has_history && has_tables && baseline.is_none() {
        return Err(Error::Migration(NO_HISTORY.into()));
    }
    // Checked before anything is written, so a bad version changes nothing.
    let recorded = match baseline {
        Some(version) => baseline_of(SQLSERVER, version)?,
        None => Vec::new(),
    };
    exec(client, sql::HISTORY_CREATE, &[]).await?;
    for m in recorded {
        let checksum = m.checksum();
        exec(
            client,
            sql::HISTORY_INSERT,
            &[&m.version, &m.name, &checksum.as_str()],
        )
        .await?;
        tracing::info!(migration = m.name, "recorded as applied (baseline)");
    }
    let applied: Vec<(i32, String)> = client
        .simple_query(sql::HISTORY_SELECT)
        .await
        .map_err(|e| db_err("migrate", e))?
        .into_first_result()
        .await
        .map_err(|e| db_err("migrate", e))?
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>("version").unwrap_or(0),
                r.get::<&str, _>("checksum").unwrap_or("").to_string(),
            )
        })
        .collect();
    let (mut report, pending) = plan(SQLSERVER, &applied)?;
    for m in pending {
        // Transaction control goes as a plain batch: inside sp_executesql (every call with
        // parameters) an unbalanced BEGIN TRANSACTION fails with Msg 266.
        client
            .simple_query(sql::MIGRATE_BEGIN)
            .await
            .map_err(|e| db_err("migrate", e))?
            .into_results()
            .await
            .map_err(|e| db_err("migrate", e))?;
        let outcome = async {
            if has_statements(m.sql) {
                client.simple_query(m.sql).await?.into_results().await?;
            }
            let checksum = m.checksum();
            client
                .execute(
                    sql::HISTORY_INSERT,
                    &[&m.version, &m.name, &checksum.as_str()],
                )
                .await?;
            client
                .simple_query(sql::COMMIT)
                .await?
                .into_results()
                .await?;
            Ok::<_, tiberius::error::Error>(())
        }
        .await;
        if let Err(e) = outcome {
            // XACT_ABORT has rolled back already unless the failure was on the client side.
            let _ = client.simple_query(sql::ROLLBACK).await;
            return Err(Error::Migration(format!(
                "{} failed: {}",
                m.name,
                db_err("migrate", e)
            )));
        }
        tracing::info!(migration = m.name, "applied migration");
        report.applied.push(m.name.to_string());
    }
    Ok(report)
}

/// Compares the applied history with `migrations`: the report of what is applied, and the
/// migrations still to apply in version order. An unknown version or a changed checksum fails.
pub fn plan<'m>(
    migrations: &'m [Migration],
    applied: &[(i32, String)],
) -> Result<(MigrationReport, Vec<&'m Migration>)> {
    let mut report = MigrationReport::default();
    for (version, checksum) in applied {
        let m = migrations.iter().find(|m| m.version == *version).ok_or_else(|| {
            Error::Migration(format!("the database has migration version {version}, which this build does not know; run a newer queuebox"))
        })?;
        if &m.checksum() != checksum {
            return Err(Error::Migration(format!(
                "migration {} was changed after it was applied (checksum {} in the database, {} in this build)",
                m.name,
                checksum,
                m.checksum()
            )));
        }
        report.already_applied.push(m.name.to_string());
    }
    let mut pending: Vec<&Migration> = migrations
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .collect();
    pending.sort_by_key(|m| m.version);
    Ok((report, pending))
}

/// False for a file of comments and blank lines only (a version that does not apply to SQL
/// Server): the runner records it without sending an empty batch.
pub fn has_statements(sql_text: &str) -> bool {
    let mut in_block = false;
    for line in sql_text.lines() {
        let mut rest = line.trim();
        loop {
            if in_block {
                match rest.find("*/") {
                    Some(end) => {
                        rest = rest[end + 2..].trim();
                        in_block = false;
                    }
                    None => break,
                }
            } else if let Some(after) = rest.strip_prefix("/*") {
                rest = after;
                in_block = true;
            } else {
                if !rest.is_empty() && !rest.starts_with("--") {
                    return true;
                }
                break;
            }
        }
    }
    false
}

/// The highest applied version, 0 when the history table does not exist.
pub async fn current_version(store: &SqlServerStore) -> Result<i32> {
    let mut conn = store.pool().get().await?;
    let client = conn.client();
    let rows = client
        .simple_query(sql::SCHEMA_CHECK)
        .await
        .map_err(|e| db_err("schema version", e))?
        .into_first_result()
        .await
        .map_err(|e| db_err("schema version", e))?;
    let version = if rows.first().and_then(|r| r.get::<i32, _>("has_history")) == Some(1) {
        scalar(client, sql::HISTORY_MAX, &[], "version")
            .await?
            .unwrap_or(0)
    } else {
        0
    };
    conn.release();
    Ok(version)
}

async fn exec(client: &mut Client, text: &str, params: &[&dyn ToSql]) -> Result<()> {
    client
        .execute(text, params)
        .await
        .map_err(|e| db_err("migrate", e))?;
    Ok(())
}

async fn scalar(
    client: &mut Client,
    text: &str,
    params: &[&dyn ToSql],
    column: &str,
) -> Result<Option<i32>> {
    let rows = client
        .query(text, params)
        .await
        .map_err(|e| db_err("migrate", e))?
        .into_first_result()
        .await
        .map_err(|e| db_err("migrate", e))?;
    Ok(rows.first().and_then(|r| r.get::<i32, _>(column)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_database_applies_every_migration_in_order() {
        let (report, pending) = plan(SQLSERVER, &[]).unwrap();
        assert!(report.already_applied.is_empty());
        assert_eq!(
            pending.iter().map(|m| m.version).collect::<Vec<_>>(),
            (1..=SQLSERVER.len() as i32).collect::<Vec<_>>()
        );
    }

    #[test]
    fn applied_versions_are_skipped_and_checked() {
        let applied = vec![(1, SQLSERVER[0].checksum())];
        let (report, pending) = plan(SQLSERVER, &applied).unwrap();
        assert_eq!(report.already_applied, vec![SQLSERVER[0].name.to_string()]);
        assert_eq!(pending[0].version, 2);
        let edited = vec![(1, "0".repeat(64))];
        assert!(plan(SQLSERVER, &edited)
            .unwrap_err()
            .to_string()
            .contains("changed after it was applied"));
        let unknown = vec![(99, "x".into())];
        assert!(plan(SQLSERVER, &unknown)
            .unwrap_err()
            .to_string()
            .contains("version 99"));
    }

    #[test]
    fn comment_only_files_send_no_batch() {
        assert!(!has_statements("-- a\n\n  -- b\n/* block\n still */\n"));
        assert!(has_statements("-- a\nCREATE TABLE t (a INT);"));
        assert!(has_statements("/* x */ SELECT 1"));
        // 0003 (the NOTIFY trigger), 0008 (time-ordered ids), 0009 (narrower outbox
        // indexes) and 0016 (the set-based enqueue function) are PostgreSQL's only.
        let no_op = [3, 8, 9, 16];
        for m in SQLSERVER {
            assert_eq!(
                has_statements(m.sql),
                !no_op.contains(&m.version),
                "{} on SQL Server",
                m.name
            );
        }
    }
}
