//! The small pool the Node and Python bindings offer for enqueueing pull rows, cancelling
//! pending rows and running statements outside a handler (tests, set-up scripts, producers),
//! and the one-call cancel of the C ABI.

use std::sync::Arc;

use queuebox_core::app_tx;
use queuebox_core::backend::{self, DatabaseSettings};
use queuebox_core::store::relay::CancelTarget;
use queuebox_core::store::SqlValue;
use queuebox_core::{Result, Store};
use serde_json::json;

use crate::json;

/// A pool of at most `max_connections` connections on the backend the URL names (the core's
/// backend factory: PostgreSQL, or SQL Server in a build with core's `sqlserver` feature).
/// Clones share it.
#[derive(Clone)]
pub struct Database {
    db: Arc<dyn backend::Database>,
    store: Arc<dyn Store>,
}

impl Database {
    /// Connects a pool of at most `max_connections` (default 4).
    pub async fn connect(database_url: &str, max_connections: Option<u32>) -> Result<Database> {
        let settings = DatabaseSettings::new(database_url).pool_size(max_connections.unwrap_or(4));
        let db = backend::connect(&settings).await?;
        Ok(Database {
            store: db.store(),
            db,
        })
    }

    /// Runs one statement in its own transaction; returns the affected row count.
    pub async fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64> {
        let mut tx = self.store.begin().await?;
        let n = tx.execute(sql, params).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Runs one query in its own transaction; returns the rows as JSON array text.
    pub async fn query(&self, sql: &str, params: &[SqlValue]) -> Result<String> {
        let mut tx = self.store.begin().await?;
        let rows = tx.query(sql, params).await?;
        tx.commit().await?;
        Ok(json::rows_to_text(rows))
    }

    /// Runs SQL text outside any transaction, several statements allowed, no parameters:
    /// `CREATE DATABASE`, `VACUUM`, set-up scripts.
    pub async fn execute_script(&self, sql: &str) -> Result<u64> {
        self.db.execute_script(sql).await
    }

    /// Stores one pull row from `{source, payload, idempotencyKey?, aggregateId?, eventType?,
    /// headers?, correlationId?, priority?, maxAttempts?, delayMs?, scheduledAt?}` JSON text,
    /// in a transaction of its own; returns `{"id", "duplicate"}` as JSON text. The same rule
    /// and statement as an enqueue in the application's transaction
    /// (`queuebox_core::app_tx::enqueue_statement`); a missing key makes a new row each time.
    pub async fn enqueue(&self, message_json: &str) -> Result<String> {
        let msg = json::enqueue_message_from_json(&json::parse("message", message_json)?)?;
        let st = app_tx::enqueue_statement_native(std::slice::from_ref(&msg), self.db.backend())?;
        let params: Vec<SqlValue> = st
            .params
            .iter()
            .map(|p| p.clone().map_or(SqlValue::Null, SqlValue::Text))
            .collect();
        let mut tx = self.store.begin().await?;
        let rows = tx.query(&st.sql, &params).await?;
        tx.commit().await?;
        let rows = json::enqueue_rows(&rows)?;
        let out = app_tx::read_enqueue_rows(&rows, 1)?;
        Ok(json!({"id": out[0].id().to_string(), "duplicate": out[0].is_duplicate()}).to_string())
    }

    /// Cancels the pending rows of `table` (`inbox` or `outbox`) that `target_json` names
    /// (`queuebox_core::store::relay::CancelTarget::from_json`: `id`, or `source` with `key`
    /// or `aggregate`, or `topic` with `key`); returns the core's counts as
    /// `{"cancelled", "inFlight", "finished", "push"}` JSON text. The rule, the statement and
    /// the refusals (naming the missing or unknown field) are the core's.
    pub async fn cancel(&self, table: &str, target_json: &str) -> Result<String> {
        cancel_on(self.db.as_ref(), &cancel_target(table, target_json)?).await
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.db.close().await;
    }
}

/// The target a binding hands over as JSON text, read by the core.
fn cancel_target(table: &str, target_json: &str) -> Result<CancelTarget> {
    CancelTarget::from_json(table, &json::parse("target", target_json)?)
}

/// The one cancel of every binding, on any backend handle; the counts as JSON text.
async fn cancel_on(db: &dyn backend::Database, target: &CancelTarget) -> Result<String> {
    let counts = db.relay_store().cancel(target).await?;
    // The admin API's answer too (`Cancelled` serialises camelCase).
    serde_json::to_string(&counts)
        .map_err(|e| queuebox_core::Error::InvalidInput(format!("cancel counts: {e}")))
}

/// [`Database::cancel`] on a pool of its own, opened for this call and closed after it: the
/// C ABI's `qb_cancel`, whose callers (Go, C#) hold no pool of the bridge's. A target that
/// names no row is refused before connecting.
pub async fn cancel(database_url: &str, table: &str, target_json: &str) -> Result<String> {
    let target = cancel_target(table, target_json)?;
    let db = backend::connect(&DatabaseSettings::new(database_url).pool_size(1)).await?;
    let out = cancel_on(db.as_ref(), &target).await;
    db.close().await;
    out
}
