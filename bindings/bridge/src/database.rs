//! The small pool the Node and Python bindings offer for enqueueing pull rows and running
//! statements outside a handler (tests, set-up scripts, producers).

use std::sync::Arc;

use queuebox_core::backend::{self, DatabaseSettings};
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

    /// Stores one pull row from `{source, idempotencyKey, payload, aggregateId?, eventType?,
    /// headers?, correlationId?}` JSON text; returns `{"id", "duplicate"}` as JSON text.
    pub async fn enqueue(&self, message_json: &str) -> Result<String> {
        let msg = json::new_pull_message_from_json(&json::parse("message", message_json)?)?;
        let out = self.store.insert_inbox(&msg).await?;
        Ok(json!({"id": out.id().to_string(), "duplicate": out.is_duplicate()}).to_string())
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.db.close().await;
    }
}
