//! A handler's PostgreSQL transaction: parameterised statements, rows as JSON, and the
//! fenced completion that commits with the business writes.

use std::any::Any;

use async_trait::async_trait;
use serde_json::{Map, Number, Value};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Column, Postgres, Row, Transaction, TypeInfo, ValueRef};

use super::db_err;
use crate::error::{Error, Result};
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

fn bind_all<'q>(
    mut q: sqlx::query::Query<'q, Postgres, PgArguments>,
    params: &'q [SqlValue],
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    for p in params {
        q = match p {
            SqlValue::Null => q.bind(Option::<String>::None),
            SqlValue::Bool(b) => q.bind(*b),
            SqlValue::Int(i) => q.bind(*i),
            SqlValue::Float(f) => q.bind(*f),
            SqlValue::Text(s) => q.bind(s.as_str()),
            SqlValue::Json(v) => q.bind(v),
        };
    }
    q
}

#[async_trait]
impl StoreTx for PgStoreTx {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64> {
        let r = bind_all(sqlx::query(sql), params)
            .execute(&mut *self.tx)
            .await
            .map_err(|e| db_err("handler statement", e))?;
        Ok(r.rows_affected())
    }

    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<JsonRow>> {
        let rows = bind_all(sqlx::query(sql), params)
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

/// Decodes one row by column type. Types outside the common set must be cast in SQL
/// (`col::text`); the error says which column.
fn row_to_json(row: &PgRow) -> Result<JsonRow> {
    let mut out = Map::new();
    for (i, col) in row.columns().iter().enumerate() {
        let raw = row.try_get_raw(i).map_err(|e| db_err("decode", e))?;
        if raw.is_null() {
            out.insert(col.name().to_string(), Value::Null);
            continue;
        }
        let ty = col.type_info().name().to_ascii_uppercase();
        let dec = |e: sqlx::Error| {
            Error::InvalidInput(format!("column `{}` of type {ty}: {e}", col.name()))
        };
        let v = match ty.as_str() {
            "BOOL" => Value::Bool(row.try_get::<bool, _>(i).map_err(dec)?),
            "INT2" => Value::from(row.try_get::<i16, _>(i).map_err(dec)?),
            "INT4" => Value::from(row.try_get::<i32, _>(i).map_err(dec)?),
            "INT8" => Value::from(row.try_get::<i64, _>(i).map_err(dec)?),
            "FLOAT4" => Number::from_f64(row.try_get::<f32, _>(i).map_err(dec)? as f64).map(Value::Number).unwrap_or(Value::Null),
            "FLOAT8" => Number::from_f64(row.try_get::<f64, _>(i).map_err(dec)?).map(Value::Number).unwrap_or(Value::Null),
            "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CHAR" => Value::String(row.try_get::<String, _>(i).map_err(dec)?),
            "UUID" => Value::String(row.try_get::<uuid::Uuid, _>(i).map_err(dec)?.to_string()),
            "JSON" | "JSONB" => row.try_get::<Value, _>(i).map_err(dec)?,
            "TIMESTAMPTZ" => Value::String(row.try_get::<chrono::DateTime<chrono::Utc>, _>(i).map_err(dec)?.to_rfc3339()),
            "TIMESTAMP" => Value::String(row.try_get::<chrono::NaiveDateTime, _>(i).map_err(dec)?.to_string()),
            "DATE" => Value::String(row.try_get::<chrono::NaiveDate, _>(i).map_err(dec)?.to_string()),
            other => {
                return Err(Error::InvalidInput(format!(
                    "column `{}` has type {other}, which rows-as-JSON does not decode; cast it in SQL (e.g. `{}::text`)",
                    col.name(),
                    col.name()
                )))
            }
        };
        out.insert(col.name().to_string(), v);
    }
    Ok(out)
}
