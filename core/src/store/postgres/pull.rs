//! The pull operations (claim, renew, complete, retry, dead, release) and the inbox insert:
//! binding and decoding around the statements of [`super::sql`].
//! `proto-docs/sql-contract.md` states the contract of each in words.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::Row;
use uuid::Uuid;

use super::{db_err, sql, PgStore};
use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage, InsertOutcome, NewInboxMessage};
use crate::store::candidate_limit;

pub(super) async fn insert_inbox(store: &PgStore, m: &NewInboxMessage) -> Result<InsertOutcome> {
    let delay_ms = if m.dead_reason.is_some() {
        0.0
    } else {
        m.delay.map(|d| d.as_millis() as f64).unwrap_or(0.0)
    };
    let row: Option<(Uuid, bool)> = sqlx::query_as(store.sql(sql::INSERT))
        .bind(&m.source)
        .bind(&m.idempotency_key)
        .bind(&m.aggregate_id)
        .bind(&m.event_type)
        .bind(&m.payload)
        .bind(Value::Object(m.headers.clone()))
        .bind(&m.correlation_id)
        .bind(m.consumption.as_str())
        .bind(&m.dead_reason)
        .bind(delay_ms)
        .bind(m.trace.as_ref().map(|t| t.traceparent.as_str()))
        .bind(m.trace.as_ref().and_then(|t| t.tracestate.as_deref()))
        .fetch_optional(store.pool())
        .await
        .map_err(|e| db_err("inbox insert", e))?;
    match row {
        Some((id, true)) => Ok(InsertOutcome::Inserted(id)),
        Some((id, false)) => Ok(InsertOutcome::Duplicate(id)),
        // A duplicate of a row committed after the INSERT's snapshot (see sql::INSERT).
        None => {
            let existing: Uuid = sqlx::query_scalar(store.sql(sql::LOOKUP_ID))
                .bind(&m.source)
                .bind(&m.idempotency_key)
                .fetch_one(store.pool())
                .await
                .map_err(|e| db_err("inbox duplicate lookup", e))?;
            Ok(InsertOutcome::Duplicate(existing))
        }
    }
}

pub(super) async fn claim(
    store: &PgStore,
    source: &str,
    batch: u32,
    lease: Duration,
    owner: Option<i64>,
) -> Result<Vec<ClaimedRow>> {
    let rows = sqlx::query(store.sql(sql::CLAIM))
        .bind(source)
        .bind(batch as i64)
        .bind(lease.as_millis() as f64)
        .bind(candidate_limit(batch))
        .bind(owner)
        .fetch_all(store.pool())
        .await
        .map_err(|e| db_err("pull claim", e))?;
    let mut keyed = Vec::with_capacity(rows.len());
    for row in &rows {
        let order: (DateTime<Utc>, i64) = (row.get("scheduled_at"), row.get("sequence"));
        keyed.push((order, decode_claimed(row)));
    }
    // RETURNING has no order; hand rows out in claim order.
    keyed.sort_by_key(|k| k.0);
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

fn decode_claimed(row: &PgRow) -> ClaimedRow {
    let headers = match row.get::<Value, _>("headers") {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let id: Uuid = row.get("id");
    ClaimedRow {
        message: InboxMessage {
            id,
            source: row.get("source"),
            idempotency_key: row.get("idempotency_key"),
            aggregate_id: row.get("aggregate_id"),
            event_type: row.get("event_type"),
            payload: row.get("payload"),
            headers,
            attempt: row.get("attempt"),
            correlation_id: row.get("correlation_id"),
            created_at: row.get("created_at"),
            trace: super::decode_trace(row),
        },
        claim: ClaimRef {
            id,
            token: row.get("claim_token"),
        },
    }
}

pub(super) async fn renew(
    store: &PgStore,
    claims: &[ClaimRef],
    lease: Duration,
) -> Result<Vec<Uuid>> {
    super::renew_leases(
        store.pool(),
        store.sql(sql::RENEW),
        "pull renew",
        claims,
        lease,
    )
    .await
}

pub(super) async fn complete(store: &PgStore, c: &ClaimRef) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::COMPLETE))
        .bind(c.id)
        .bind(c.token)
        .execute(store.pool())
        .await
        .map_err(|e| db_err("pull complete", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn complete_many(store: &PgStore, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
    let ids: Vec<Uuid> = claims.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = claims.iter().map(|c| c.token).collect();
    sqlx::query_scalar(store.sql(sql::COMPLETE_MANY))
        .bind(ids)
        .bind(tokens)
        .fetch_all(store.pool())
        .await
        .map_err(|e| db_err("pull complete", e))
}

pub(super) async fn retry(
    store: &PgStore,
    c: &ClaimRef,
    delay: Duration,
    error: &str,
) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::RETRY))
        .bind(c.id)
        .bind(c.token)
        .bind(error)
        .bind(delay.as_millis() as f64)
        .execute(store.pool())
        .await
        .map_err(|e| db_err("pull retry", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn dead(store: &PgStore, c: &ClaimRef, error: &str) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::DEAD))
        .bind(c.id)
        .bind(c.token)
        .bind(error)
        .execute(store.pool())
        .await
        .map_err(|e| db_err("pull dead", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn release(store: &PgStore, c: &ClaimRef) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::RELEASE))
        .bind(c.id)
        .bind(c.token)
        .execute(store.pool())
        .await
        .map_err(|e| db_err("pull release", e))?;
    Ok(r.rows_affected() == 1)
}
