//! A handler's PostgreSQL transaction: parameterised statements, rows as JSON, and the
//! fenced completion that commits with the business writes.

use std::any::Any;

use async_trait::async_trait;
use sqlx::{Postgres, Transaction};

use super::db_err;
use super::value::{bind_all, keyed, row_to_json};
use crate::error::Result;
use crate::message::ClaimRef;
use crate::store::{JsonRow, SqlValue, StoreTx};

/// Wraps `sqlx::Transaction<'static, Postgres>`; reach it with [`PgStoreTx::inner`].
pub struct PgStoreTx {
    tx: Transaction<'static, Postgres>,
    /// The fenced completion rendered for the store's names.
    complete: String,
}

impl PgStoreTx {
    pub(super) fn new(tx: Transaction<'static, Postgres>, complete: &str) -> Self {
        PgStoreTx {
            tx,
            complete: complete.to_string(),
        }
    }

    /// The sqlx transaction, for business writes with the full sqlx API.
    pub fn inner(&mut self) -> &mut Transaction<'static, Postgres> {
        &mut self.tx
    }
}

#[async_trait]
impl StoreTx for PgStoreTx {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64> {
        let sql = keyed(sql, params);
        let r = bind_all(sqlx::query(&sql), params)?
            .execute(&mut *self.tx)
            .await
            .map_err(|e| db_err("handler statement", e))?;
        Ok(r.rows_affected())
    }

    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<JsonRow>> {
        let sql = keyed(sql, params);
        let rows = bind_all(sqlx::query(&sql), params)?
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| db_err("handler query", e))?;
        rows.iter().map(row_to_json).collect()
    }

    async fn complete_pull(&mut self, claim: &ClaimRef) -> Result<bool> {
        let r = sqlx::query(&self.complete)
            .bind(claim.id)
            .bind(claim.token)
            .execute(&mut *self.tx)
            .await
            .map_err(|e| db_err("pull complete", e))?;
        Ok(r.rows_affected() == 1)
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn rollback(self: Box<Self>) -> Result<()> {
        self.tx.rollback().await.map_err(|e| db_err("rollback", e))
    }

    fn as_any_mut(&mut self) -> &mut (dyn Any + Send) {
        self
    }
}
