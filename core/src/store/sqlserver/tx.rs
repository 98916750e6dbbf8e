//! A handler's SQL Server transaction: `@P1`… statements, rows as JSON, and the fenced
//! completion that commits with the business writes.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use tiberius::ToSql;

use super::pull::{fenced_on, Extra};
use super::value::{params, row_to_json};
use super::{db_err, sql, Client, Pool, PooledConn};
use crate::error::{Error, Result};
use crate::message::ClaimRef;
use crate::store::{JsonRow, SqlValue, StoreTx};

/// A transaction on one pooled connection; reach the tiberius client with
/// [`SqlServerStoreTx::client`]. Dropped without commit or rollback, its connection is closed
/// (never reused), so the server rolls the transaction back.
///
/// After any failed statement the transaction is over (XACT_ABORT has rolled it back on the
/// server); every later statement, completion or commit then fails with code 25P02, as on
/// PostgreSQL, instead of running in autocommit where a completion would commit without the
/// business writes. Only rollback succeeds.
pub struct SqlServerStoreTx {
    conn: PooledConn,
    failed: bool,
}

impl SqlServerStoreTx {
    pub(super) async fn begin(pool: &Arc<Pool>) -> Result<Self> {
        let mut conn = pool.get().await?;
        conn.client()
            .simple_query(sql::BEGIN)
            .await
            .map_err(|e| db_err("begin", e))?
            .into_results()
            .await
            .map_err(|e| db_err("begin", e))?;
        Ok(SqlServerStoreTx {
            conn,
            failed: false,
        })
    }

    /// The connection, unless an earlier statement failed.
    fn live(&mut self, operation: &'static str) -> Result<&mut Client> {
        if self.failed {
            return Err(Error::Database {
                operation,
                message:
                    "the transaction was rolled back by an earlier error; only rollback is possible"
                        .into(),
                code: Some("25P02".into()),
            });
        }
        Ok(self.conn.client())
    }

    /// Records a failure: the transaction is over.
    fn check<T>(&mut self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// The tiberius client inside the transaction, for business writes with its full API.
    pub fn client(&mut self) -> &mut Client {
        self.conn.client()
    }

    async fn finish(
        mut self: Box<Self>,
        text: &'static str,
        operation: &'static str,
    ) -> Result<()> {
        if operation == "commit" {
            self.live(operation)?;
        }
        self.conn
            .client()
            .simple_query(text)
            .await
            .map_err(|e| db_err(operation, e))?
            .into_results()
            .await
            .map_err(|e| db_err(operation, e))?;
        self.conn.release();
        Ok(())
    }
}

#[async_trait]
impl StoreTx for SqlServerStoreTx {
    async fn execute(&mut self, text: &str, values: &[SqlValue]) -> Result<u64> {
        let ps = params(values);
        let refs: Vec<&dyn ToSql> = ps.iter().map(|p| p as &dyn ToSql).collect();
        let client = self.live("handler statement")?;
        let r = client
            .execute(text, &refs)
            .await
            .map(|r| r.total())
            .map_err(|e| db_err("handler statement", e));
        self.check(r)
    }

    async fn query(&mut self, text: &str, values: &[SqlValue]) -> Result<Vec<JsonRow>> {
        let ps = params(values);
        let refs: Vec<&dyn ToSql> = ps.iter().map(|p| p as &dyn ToSql).collect();
        let client = self.live("handler query")?;
        let r = async {
            let stream = client
                .query(text, &refs)
                .await
                .map_err(|e| db_err("handler query", e))?;
            // The first result set, as a reader would see it; later ones are drained.
            let sets = stream
                .into_results()
                .await
                .map_err(|e| db_err("handler query", e))?;
            sets.into_iter()
                .next()
                .unwrap_or_default()
                .iter()
                .map(row_to_json)
                .collect::<Result<Vec<_>>>()
        }
        .await;
        self.check(r)
    }

    async fn complete_pull(&mut self, claim: &ClaimRef) -> Result<bool> {
        let client = self.live("pull complete")?;
        let r = fenced_on(client, "pull complete", sql::COMPLETE, claim, Extra::None).await;
        self.check(r)
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.finish(sql::COMMIT, "commit").await
    }

    async fn rollback(self: Box<Self>) -> Result<()> {
        self.finish(sql::ROLLBACK, "rollback").await
    }

    fn as_any_mut(&mut self) -> &mut (dyn Any + Send) {
        self
    }
}
