//! The start-up guards of a schema with custom names (proto-docs/own-schema.md, "Start-up guards"):
//! QueueBox does not migrate such a schema (the application owns it), so before the first statement
//! it checks that every mapped column exists, and says how to add the ones that later releases
//! added, and that QueueBox's own `queuebox_paused` table exists.

use sqlx::PgPool;

use super::{db_err, sql};
use crate::error::{Error, Result};
use crate::store::names::{Names, Table};
use crate::store::Backend;

/// Fails with [`Error::Config`] naming the table, the column and its configuration key when a
/// mapped column is missing; for the inbox `headers` and the `sequence` columns the message
/// ends with the statement that adds it.
pub(super) async fn check(pool: &PgPool, names: &Names) -> Result<()> {
    let mut missing_columns = Vec::new();
    for t in [Table::Inbox, Table::Outbox] {
        let table = names.table(Backend::Postgres, t);
        let present: Vec<String> = sqlx::query_scalar(sql::TABLE_COLUMNS)
            .bind(&table)
            .fetch_all(pool)
            .await
            .map_err(|e| db_err("schema check", e))?;
        for (key, column) in names.columns(t) {
            if !present.contains(&column) {
                missing_columns.push((t, key, column));
            }
        }
    }
    // The columns later releases added come first: an older hand-made schema lacks them,
    // and their message ends with the statement that adds them.
    let rank = |t: Table, key: &str| match (t, key) {
        (Table::Inbox, "headers") => 0,
        (Table::Outbox, "sequence") => 1,
        (Table::Inbox, "sequence") => 2,
        (Table::Inbox, "priority") => 3,
        (Table::Inbox, "maxAttempts") => 4,
        _ => 5,
    };
    missing_columns.sort_by_key(|(t, key, _)| rank(*t, key));
    if let Some((t, key, column)) = missing_columns.first() {
        return Err(missing(names, *t, key, column));
    }
    // Every claim reads the paused set (`sql::CLAIM`, `CLAIM_PUSH`): QueueBox's own table,
    // found through the search path like `queuebox_enqueue_many`.
    let paused: Option<String> = sqlx::query_scalar(sql::SCHEMA_CHECK)
        .bind("queuebox_paused")
        .fetch_one(pool)
        .await
        .map_err(|e| db_err("schema check", e))?;
    match paused {
        Some(_) => Ok(()),
        None => Err(Error::Config {
            path: "database".into(),
            reason: format!("the table queuebox_paused does not exist; every claim reads it (pause and resume). Create it, then start QueueBox again: {PAUSED_TABLE}"),
        }),
    }
}

/// The paused set's table as migration 15 creates it (one line).
const PAUSED_TABLE: &str = "CREATE TABLE queuebox_paused (kind VARCHAR(16) NOT NULL, name VARCHAR(255) NOT NULL, paused_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (kind, name), CHECK (kind IN ('source', 'destination', 'topic')));";

fn missing(names: &Names, t: Table, key: &str, column: &str) -> Error {
    let path = Names::column_key(t, key);
    let table = names.table(Backend::Postgres, t);
    let shown = names.table_display(t);
    let quoted = format!("\"{column}\"");
    let reason = match (t, key) {
        (Table::Inbox, "headers") => format!(
            "the inbox table {shown} has no column `{column}` ({path}), which stores each message's headers. Add it: ALTER TABLE {table} ADD COLUMN {quoted} JSONB NOT NULL DEFAULT '{{}}';"
        ),
        (_, "sequence") => format!(
            "the {} table {shown} has no column `{column}` ({path}), which keeps the order of rows of one key. Add it, then start QueueBox again: ALTER TABLE {table} ADD COLUMN {quoted} BIGSERIAL;",
            if t == Table::Inbox { "inbox" } else { "outbox" }
        ),
        (Table::Inbox, "priority") => format!(
            "the inbox table {shown} has no column `{column}` ({path}), which orders a pull source's rows. Add it, then start QueueBox again: ALTER TABLE {table} ADD COLUMN {quoted} SMALLINT NOT NULL DEFAULT 0; and key the pull pending index on it (proto-docs/own-schema.md)"
        ),
        (Table::Inbox, "maxAttempts") => format!(
            "the inbox table {shown} has no column `{column}` ({path}), an enqueued row's own dead-letter ceiling. Add it, then start QueueBox again: ALTER TABLE {table} ADD COLUMN {quoted} INTEGER;"
        ),
        _ => format!(
            "the table {shown} has no column `{column}` ({path}); a schema with custom names needs every column of proto-docs/own-schema.md"
        ),
    };
    Error::Config { path, reason }
}
