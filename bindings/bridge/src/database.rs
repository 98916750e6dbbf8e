//! The small pool the Node and Python bindings offer for enqueueing pull rows and running
//! statements outside a handler (tests, set-up scripts, producers).

use std::sync::Arc;

use queuebox_core::store::postgres::PgStore;
use queuebox_core::store::SqlValue;
use queuebox_core::{Error, Result, Store};
use serde_json::json;

use crate::json;

/// A pool of at most `max_connections` connections. Clones share it.
#[derive(Clone)]
pub struct Database {
    store: Arc<PgStore>,
}

impl Database {
    /// Connects a pool of at most `max_connections` (default 4).
    pub async fn connect(database_url: &str, max_connections: Option<u32>) -> Result<Database> {
        let store = PgStore::connect(database_url, max_connections.unwrap_or(4)).await?;
        Ok(Database {
            store: Arc::new(store),
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

    /// Runs SQL text outside any transaction with the simple query protocol (several
    /// statements allowed, no parameters): `CREATE DATABASE`, `VACUUM`, set-up scripts.
    pub async fn execute_script(&self, sql: &str) -> Result<u64> {
        let r = sqlx::raw_sql(sql).execute(self.store.pool()).await;
        r.map(|d| d.rows_affected()).map_err(|e| Error::Database {
            operation: "script",
            message: e.to_string(),
            code: None,
        })
    }

    /// Stores one pull row from `{source, idempotencyKey, payload, aggregateId?, eventType?,
    /// headers?, correlationId?}` JSON text; returns `{"id", "duplicate"}` as JSON text.
    pub async fn enqueue(&self, message_json: &str) -> Result<String> {
        let msg = json::new_pull_message_from_json(&json::parse("message", message_json)?)?;
        let out = self.store.insert_inbox(&msg).await?;
        Ok(json!({"id": out.id().to_string(), "duplicate": out.is_duplicate()}).to_string())
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.store.pool().close().await;
    }
}
