//! The pull operations and the inbox insert on SQL Server; the statements are in [`super::sql`].

use std::time::Duration;

use chrono::NaiveDateTime;
use serde_json::{Map, Value};
use tiberius::{Row, ToSql};
use uuid::Uuid;

use super::value::{json_text, utc};
use super::{db_err, sql, Pool};
use crate::error::{Error, Result};
use crate::message::{ClaimRef, ClaimedRow, InboxMessage, InsertOutcome, NewInboxMessage};
use crate::store::candidate_limit;
use crate::trace::TraceContext;
use std::sync::Arc;

/// Milliseconds as the `BIGINT` the statements add to `SYSUTCDATETIME()`.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Runs a statement on a pooled connection and collects every row of every result set;
/// the connection returns to the pool only if the whole batch finished without error.
pub(super) async fn rows(
    pool: &Arc<Pool>,
    operation: &'static str,
    text: &str,
    params: &[&dyn ToSql],
) -> Result<Vec<Row>> {
    let mut conn = pool.get().await?;
    let stream = conn
        .client()
        .query(text, params)
        .await
        .map_err(|e| db_err(operation, e))?;
    let sets = stream
        .into_results()
        .await
        .map_err(|e| db_err(operation, e))?;
    conn.release();
    Ok(sets.into_iter().flatten().collect())
}

pub(super) fn missing(operation: &'static str, column: &str) -> Error {
    Error::Database {
        operation,
        message: format!("the result has no column `{column}`"),
        code: Some("client".into()),
    }
}

pub(super) async fn insert_inbox(pool: &Arc<Pool>, m: &NewInboxMessage) -> Result<InsertOutcome> {
    let delay_ms: i64 = if m.dead_reason.is_some() {
        0
    } else {
        m.delay.map(millis).unwrap_or(0)
    };
    let payload = m.payload.to_string();
    let headers = Value::Object(m.headers.clone()).to_string();
    let params: [&dyn ToSql; 12] = [
        &m.source.as_str(),
        &m.idempotency_key.as_str(),
        &m.aggregate_id.as_deref(),
        &m.event_type.as_deref(),
        &payload.as_str(),
        &headers.as_str(),
        &m.correlation_id.as_deref(),
        &m.consumption.as_str(),
        &m.dead_reason.as_deref(),
        &delay_ms,
        &m.trace.as_ref().map(|t| t.traceparent.as_str()),
        &m.trace.as_ref().and_then(|t| t.tracestate.as_deref()),
    ];
    match rows(pool, "inbox insert", sql::INSERT, &params).await {
        Ok(rows) => {
            let row = rows.first().ok_or_else(|| missing("inbox insert", "id"))?;
            let id: Uuid = row
                .try_get("id")
                .map_err(|e| db_err("inbox insert", e))?
                .ok_or_else(|| missing("inbox insert", "id"))?;
            let inserted: bool = row
                .try_get("is_new")
                .map_err(|e| db_err("inbox insert", e))?
                .unwrap_or(false);
            Ok(if inserted {
                InsertOutcome::Inserted(id)
            } else {
                InsertOutcome::Duplicate(id)
            })
        }
        // A unique violation (Msg 2627 constraint, 2601 index) despite the range lock: the row
        // exists, so this is a duplicate.
        Err(Error::Database { code: Some(c), .. }) if c == "2627" || c == "2601" => {
            let params: [&dyn ToSql; 2] = [&m.source.as_str(), &m.idempotency_key.as_str()];
            let rows = rows(pool, "inbox duplicate lookup", sql::LOOKUP_ID, &params).await?;
            let id: Option<Uuid> = rows.first().and_then(|r| r.get("id"));
            Ok(InsertOutcome::Duplicate(
                id.ok_or_else(|| missing("inbox duplicate lookup", "id"))?,
            ))
        }
        Err(e) => Err(e),
    }
}

pub(super) async fn claim(
    pool: &Arc<Pool>,
    source: &str,
    batch: u32,
    lease: Duration,
) -> Result<Vec<ClaimedRow>> {
    if batch == 0 {
        return Ok(Vec::new());
    }
    let batch_i = batch as i64;
    let lease_ms = millis(lease);
    let cand = candidate_limit(batch);
    let params: [&dyn ToSql; 4] = [&source, &batch_i, &lease_ms, &cand];
    let rows = rows(pool, "pull claim", sql::CLAIM, &params).await?;
    let mut keyed = Vec::with_capacity(rows.len());
    for row in &rows {
        // Migration 10's column; a row without one (a schema of one's own) counts as 0.
        let priority: i16 = row.try_get("priority").ok().flatten().unwrap_or(0);
        let (order, claimed) = decode_claimed("pull claim", row)?;
        keyed.push(((std::cmp::Reverse(priority), order), claimed));
    }
    // OUTPUT has no order; hand rows out in claim order (highest priority first).
    keyed.sort_by_key(|a| a.0);
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

/// One `OUTPUT inserted.*` row of `inbox`: the claim order key and the claimed row.
pub(super) fn decode_claimed(
    op: &'static str,
    row: &Row,
) -> Result<((NaiveDateTime, i64), ClaimedRow)> {
    let err = |e| db_err(op, e);
    let id: Uuid = row
        .try_get("id")
        .map_err(err)?
        .ok_or_else(|| missing(op, "id"))?;
    let token: Uuid = row
        .try_get("claim_token")
        .map_err(err)?
        .ok_or_else(|| missing(op, "claim_token"))?;
    Ok((
        order_key(op, row)?,
        ClaimedRow {
            message: decode_inbox(op, row)?,
            claim: ClaimRef { id, token },
            // Migration 10's column (`OUTPUT inserted.*`); NULL or absent: the policy's.
            max_attempts: row
                .try_get::<i32, _>("max_attempts")
                .ok()
                .flatten()
                .and_then(|n| u32::try_from(n).ok()),
        },
    ))
}

/// The claim order `(scheduled_at, sequence)` of a claimed inbox or outbox row.
pub(super) fn order_key(op: &'static str, row: &Row) -> Result<(NaiveDateTime, i64)> {
    let err = |e| db_err(op, e);
    let scheduled: NaiveDateTime = row
        .try_get("scheduled_at")
        .map_err(err)?
        .ok_or_else(|| missing(op, "scheduled_at"))?;
    let sequence: i64 = row
        .try_get("sequence")
        .map_err(err)?
        .ok_or_else(|| missing(op, "sequence"))?;
    Ok((scheduled, sequence))
}

/// A text column (NULL allowed).
pub(super) fn text(op: &'static str, row: &Row, column: &str) -> Result<Option<String>> {
    Ok(row
        .try_get::<&str, _>(column)
        .map_err(|e| db_err(op, e))?
        .map(str::to_string))
}

/// A JSON column that must hold an object (anything else reads as `{}`).
pub(super) fn json_object(op: &'static str, row: &Row, column: &str) -> Result<Map<String, Value>> {
    Ok(
        match json_text(row.try_get::<&str, _>(column).map_err(|e| db_err(op, e))?) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
    )
}

/// The message columns of an inbox row.
pub(super) fn decode_inbox(op: &'static str, row: &Row) -> Result<InboxMessage> {
    let err = |e| db_err(op, e);
    let created: NaiveDateTime = row
        .try_get("created_at")
        .map_err(err)?
        .ok_or_else(|| missing(op, "created_at"))?;
    Ok(InboxMessage {
        id: row
            .try_get("id")
            .map_err(err)?
            .ok_or_else(|| missing(op, "id"))?,
        source: text(op, row, "source")?.ok_or_else(|| missing(op, "source"))?,
        idempotency_key: text(op, row, "idempotency_key")?
            .ok_or_else(|| missing(op, "idempotency_key"))?,
        aggregate_id: text(op, row, "aggregate_id")?,
        event_type: text(op, row, "event_type")?,
        payload: json_text(row.try_get::<&str, _>("payload").map_err(err)?),
        headers: json_object(op, row, "headers")?,
        attempt: row.try_get("attempt").map_err(err)?.unwrap_or(0),
        correlation_id: text(op, row, "correlation_id")?,
        created_at: utc(created),
        trace: match text(op, row, "traceparent")? {
            Some(traceparent) => Some(TraceContext {
                traceparent,
                tracestate: text(op, row, "tracestate")?,
            }),
            None => None,
        },
    })
}

pub(super) async fn renew(
    pool: &Arc<Pool>,
    claims: &[ClaimRef],
    lease: Duration,
) -> Result<Vec<Uuid>> {
    renew_many(pool, "pull renew", sql::RENEW, claims, lease).await
}

/// Runs a many-claims lease renewal (`@P1` the JSON pairs, `@P2` the lease); the ids renewed.
pub(super) async fn renew_many(
    pool: &Arc<Pool>,
    op: &'static str,
    text: &str,
    claims: &[ClaimRef],
    lease: Duration,
) -> Result<Vec<Uuid>> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let pairs = renew_json(claims);
    let lease_ms = millis(lease);
    let params: [&dyn ToSql; 2] = [&pairs.as_str(), &lease_ms];
    let rows = rows(pool, op, text, &params).await?;
    Ok(rows.iter().filter_map(|r| r.get::<Uuid, _>("id")).collect())
}

pub(super) async fn complete_many(pool: &Arc<Pool>, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let pairs = renew_json(claims);
    let params: [&dyn ToSql; 1] = [&pairs.as_str()];
    let rows = rows(pool, "pull complete", sql::COMPLETE_MANY, &params).await?;
    Ok(rows.iter().filter_map(|r| r.get::<Uuid, _>("id")).collect())
}

/// The `OPENJSON` input of [`sql::RENEW`] and [`sql::COMPLETE_MANY`]: `[{"id": "…", "token": "…"}, …]`.
pub(super) fn renew_json(claims: &[ClaimRef]) -> String {
    Value::Array(
        claims
            .iter()
            .map(|c| serde_json::json!({"id": c.id.to_string(), "token": c.token.to_string()}))
            .collect(),
    )
    .to_string()
}

/// The extra parameters of a fenced write after `@P1` id and `@P2` token.
pub(super) enum Extra<'a> {
    None,
    Error(&'a str),
    ErrorAndDelay(&'a str, Duration),
}

/// Runs a fenced write (`@P1` id, `@P2` token, then `extra`) on `client`; true if it
/// matched the row.
pub(super) async fn fenced_on(
    client: &mut super::Client,
    operation: &'static str,
    text: &str,
    c: &ClaimRef,
    extra: Extra<'_>,
) -> Result<bool> {
    let delay_ms;
    let mut params: Vec<&dyn ToSql> = vec![&c.id, &c.token];
    match &extra {
        Extra::None => {}
        Extra::Error(e) => params.push(e),
        Extra::ErrorAndDelay(e, d) => {
            delay_ms = millis(*d);
            params.push(e);
            params.push(&delay_ms);
        }
    }
    let r = client
        .execute(text, &params)
        .await
        .map_err(|e| db_err(operation, e))?;
    Ok(r.total() == 1)
}

pub(super) async fn fenced(
    pool: &Arc<Pool>,
    operation: &'static str,
    text: &str,
    c: &ClaimRef,
    extra: Extra<'_>,
) -> Result<bool> {
    let mut conn = pool.get().await?;
    let done = fenced_on(conn.client(), operation, text, c, extra).await?;
    conn.release();
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renew_pairs_are_the_json_openjson_reads() {
        let a = ClaimRef {
            id: Uuid::from_u128(1),
            token: Uuid::from_u128(2),
        };
        let v: Value = serde_json::from_str(&renew_json(&[a])).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{"id": "00000000-0000-0000-0000-000000000001", "token": "00000000-0000-0000-0000-000000000002"}])
        );
    }

    #[test]
    fn millis_never_overflow_the_bigint() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert!(millis(Duration::MAX) > 0);
    }
}
