//! The pull statements (claim, renew, complete, retry, dead, release) and the inbox insert.
//! `proto-docs/sql-contract.md` states the contract of each in words.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::db_err;
use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage, InsertOutcome, NewInboxMessage};
use crate::store::candidate_limit;

const INSERT: &str = "
INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
                   correlation_id, consumption, state, last_error, scheduled_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
        CASE WHEN $9::text IS NULL THEN 'pending' ELSE 'dead' END, $9,
        clock_timestamp() + make_interval(secs => $10::float8 / 1000))
ON CONFLICT ON CONSTRAINT uq_inbox_source_idempotency DO NOTHING
RETURNING id";

pub(super) async fn insert_inbox(pool: &PgPool, m: &NewInboxMessage) -> Result<InsertOutcome> {
    let delay_ms = if m.dead_reason.is_some() { 0.0 } else { m.delay.map(|d| d.as_millis() as f64).unwrap_or(0.0) };
    let id: Option<Uuid> = sqlx::query_scalar(INSERT)
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
        .fetch_optional(pool)
        .await
        .map_err(|e| db_err("inbox insert", e))?;
    match id {
        Some(id) => Ok(InsertOutcome::Inserted(id)),
        None => {
            let existing: Uuid = sqlx::query_scalar("SELECT id FROM inbox WHERE source = $1 AND idempotency_key = $2")
                .bind(&m.source)
                .bind(&m.idempotency_key)
                .fetch_one(pool)
                .await
                .map_err(|e| db_err("inbox duplicate lookup", e))?;
            Ok(InsertOutcome::Duplicate(existing))
        }
    }
}

// Candidates: due pending rows and expired processing rows of one source, each scan bounded.
// A row is claimable only if it heads its aggregate (reference §3.3): no earlier row of the
// same source and aggregate that is itself claimable now (due pending, or processing with an
// expired lease), and no live lease on another row of it. A row waiting in retry backoff (or
// held by an initial delay) is not claimable, so it blocks nothing: "a pull retry lets later
// messages pass" (§7). The lock step re-checks the row predicate under FOR UPDATE SKIP
// LOCKED, so two concurrent claims can never both take one row.
const CLAIM: &str = "
WITH cand AS (
    (SELECT id, aggregate_id, sequence, scheduled_at FROM inbox
      WHERE consumption = 'pull' AND source = $1 AND state = 'pending' AND scheduled_at <= clock_timestamp()
      ORDER BY scheduled_at, sequence LIMIT $4)
    UNION ALL
    (SELECT id, aggregate_id, sequence, scheduled_at FROM inbox
      WHERE consumption = 'pull' AND source = $1 AND state = 'processing' AND lease_expires_at <= clock_timestamp()
      ORDER BY lease_expires_at LIMIT $4)
), pick AS (
    SELECT c.id FROM cand c
     WHERE c.aggregate_id IS NULL OR (
           -- an earlier claimable row of the aggregate (index range scan, stops at the first);
           -- a pending row that is not due yet (retry backoff) does not count
           NOT EXISTS (SELECT 1 FROM inbox b
                        WHERE b.consumption = 'pull' AND b.source = $1 AND b.aggregate_id = c.aggregate_id
                          AND b.state IN ('pending', 'processing') AND b.sequence < c.sequence
                          AND (b.state = 'processing' OR b.scheduled_at <= clock_timestamp()))
           -- any other row of the aggregate holding a live lease
       AND NOT EXISTS (SELECT 1 FROM inbox b
                        WHERE b.consumption = 'pull' AND b.source = $1 AND b.aggregate_id = c.aggregate_id
                          AND b.state = 'processing' AND b.id <> c.id AND b.lease_expires_at > clock_timestamp()))
     ORDER BY c.scheduled_at, c.sequence
     LIMIT $2
), locked AS (
    SELECT i.id FROM inbox i JOIN pick p ON p.id = i.id
     WHERE i.consumption = 'pull' AND i.source = $1
       AND ((i.state = 'pending' AND i.scheduled_at <= clock_timestamp())
         OR (i.state = 'processing' AND i.lease_expires_at <= clock_timestamp()))
     FOR UPDATE OF i SKIP LOCKED
)
UPDATE inbox u
   SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = clock_timestamp(),
       lease_expires_at = clock_timestamp() + make_interval(secs => $3::float8 / 1000)
  FROM locked l
 WHERE u.id = l.id
RETURNING u.id, u.source, u.idempotency_key, u.aggregate_id, u.event_type, u.payload, u.headers,
          u.attempt, u.correlation_id, u.created_at, u.claim_token, u.scheduled_at, u.sequence";

pub(super) async fn claim(pool: &PgPool, source: &str, batch: u32, lease: Duration) -> Result<Vec<ClaimedRow>> {
    let rows = sqlx::query(CLAIM)
        .bind(source)
        .bind(batch as i64)
        .bind(lease.as_millis() as f64)
        .bind(candidate_limit(batch))
        .fetch_all(pool)
        .await
        .map_err(|e| db_err("pull claim", e))?;
    let mut keyed = Vec::with_capacity(rows.len());
    for row in &rows {
        let order: (DateTime<Utc>, i64) = (row.get("scheduled_at"), row.get("sequence"));
        keyed.push((order, decode_claimed(row)));
    }
    // RETURNING has no order; hand rows out in claim order.
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
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
        },
        claim: ClaimRef { id, token: row.get("claim_token") },
    }
}

/// The fence shared by every write on a claimed pull row.
pub(super) const FENCE: &str =
    "id = $1 AND consumption = 'pull' AND state = 'processing' AND claim_token = $2 AND lease_expires_at > clock_timestamp()";

// Driven from the claims (UPDATE … FROM unnest) so each row is found by primary key; the
// `(id, token) IN (SELECT unnest …)` form made PostgreSQL scan every processing row instead.
const RENEW: &str = "
UPDATE inbox i SET lease_expires_at = clock_timestamp() + make_interval(secs => $3::float8 / 1000)
  FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
 WHERE i.id = c.id AND i.claim_token = c.token
   AND i.consumption = 'pull' AND i.state = 'processing' AND i.lease_expires_at > clock_timestamp()
RETURNING i.id";

pub(super) async fn renew(pool: &PgPool, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
    super::renew_leases(pool, RENEW, "pull renew", claims, lease).await
}

pub(super) fn complete_sql() -> String {
    format!(
        "UPDATE inbox SET state = 'processed', processed_at = clock_timestamp(), claim_token = NULL, lease_expires_at = NULL WHERE {FENCE}"
    )
}

pub(super) async fn complete(pool: &PgPool, c: &ClaimRef) -> Result<bool> {
    let r = sqlx::query(&complete_sql()).bind(c.id).bind(c.token).execute(pool).await.map_err(|e| db_err("pull complete", e))?;
    Ok(r.rows_affected() == 1)
}

const COMPLETE_MANY: &str = "
UPDATE inbox i SET state = 'processed', processed_at = clock_timestamp(), claim_token = NULL, lease_expires_at = NULL
  FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
 WHERE i.id = c.id AND i.claim_token = c.token
   AND i.consumption = 'pull' AND i.state = 'processing' AND i.lease_expires_at > clock_timestamp()
RETURNING i.id";

pub(super) async fn complete_many(pool: &PgPool, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
    let ids: Vec<Uuid> = claims.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = claims.iter().map(|c| c.token).collect();
    sqlx::query_scalar(COMPLETE_MANY).bind(ids).bind(tokens).fetch_all(pool).await.map_err(|e| db_err("pull complete", e))
}

pub(super) async fn retry(pool: &PgPool, c: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
    let sql = format!(
        "UPDATE inbox SET state = 'pending', attempt = attempt + 1, last_error = $3, claim_token = NULL, lease_expires_at = NULL,
                scheduled_at = clock_timestamp() + make_interval(secs => $4::float8 / 1000) WHERE {FENCE}"
    );
    let r = sqlx::query(&sql)
        .bind(c.id)
        .bind(c.token)
        .bind(error)
        .bind(delay.as_millis() as f64)
        .execute(pool)
        .await
        .map_err(|e| db_err("pull retry", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn dead(pool: &PgPool, c: &ClaimRef, error: &str) -> Result<bool> {
    let sql = format!("UPDATE inbox SET state = 'dead', last_error = $3, claim_token = NULL, lease_expires_at = NULL WHERE {FENCE}");
    let r = sqlx::query(&sql).bind(c.id).bind(c.token).bind(error).execute(pool).await.map_err(|e| db_err("pull dead", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn release(pool: &PgPool, c: &ClaimRef) -> Result<bool> {
    let sql = format!("UPDATE inbox SET state = 'pending', claim_token = NULL, lease_expires_at = NULL, claimed_at = NULL WHERE {FENCE}");
    let r = sqlx::query(&sql).bind(c.id).bind(c.token).execute(pool).await.map_err(|e| db_err("pull release", e))?;
    Ok(r.rows_affected() == 1)
}
