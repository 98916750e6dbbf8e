//! [`RelayStore`] on PostgreSQL. Every lease comparison uses `clock_timestamp()`; every
//! terminal write is fenced on `state = 'processing'`, the claim token and a live lease.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::Row;
use uuid::Uuid;

use super::{db_err, PgStore};
use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage};
use crate::store::relay::{ClaimedOutbox, DeadRow, Forwarded, InboxBacklog, NewOutboxRow, OutboxBacklog, OutboxRow, RelayStore, ReplayFilter};

const LEASE: &str = "clock_timestamp() + make_interval(secs => $2::float8 / 1000)";

const RECLAIM_PUSH: &str = "
UPDATE inbox SET state = 'pending', claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE consumption = 'push' AND state = 'processing'
   AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp())";

// Scans due push rows in claim order and keeps a row only when it heads its aggregate:
// no earlier pending row and no processing row of that aggregate, in any source. The
// index scan stops at the batch size; SKIP LOCKED leaves rows another replica is claiming.
fn claim_push_sql() -> String {
    format!(
        "
WITH pick AS (
    SELECT i.id FROM inbox i
     WHERE i.consumption = 'push' AND i.state = 'pending' AND i.scheduled_at <= clock_timestamp()
       AND (i.aggregate_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM inbox b
             WHERE b.consumption = 'push' AND b.aggregate_id = i.aggregate_id AND b.id <> i.id
               AND b.state IN ('pending', 'processing')
               AND (b.sequence < i.sequence OR b.state = 'processing')))
     ORDER BY i.scheduled_at, i.sequence
     LIMIT $1
     FOR UPDATE OF i SKIP LOCKED
)
UPDATE inbox u
   SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = clock_timestamp(), lease_expires_at = {LEASE}
  FROM pick WHERE u.id = pick.id
RETURNING u.id, u.source, u.idempotency_key, u.aggregate_id, u.event_type, u.payload, u.headers,
          u.attempt, u.correlation_id, u.created_at, u.claim_token, u.scheduled_at, u.sequence"
    )
}

const PUSH_FENCE: &str =
    "id = $1 AND consumption = 'push' AND state = 'processing' AND claim_token = $2 AND lease_expires_at > clock_timestamp()";
const OUTBOX_FENCE: &str = "id = $1 AND state = 'processing' AND claim_token = $2 AND lease_expires_at > clock_timestamp()";

const INSERT_OUTBOX: &str = "
INSERT INTO outbox (topic, key, payload, headers, max_attempts) VALUES ($1, $2, $3, $4, $5) RETURNING id";

const RECLAIM_OUTBOX: &str = "
UPDATE outbox SET state = 'pending', claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
 WHERE state = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp())";

// Many claims in one statement; a pair missing from RETURNING has lost its claim.
const RENEW_OUTBOX: &str = "
UPDATE outbox SET lease_expires_at = clock_timestamp() + make_interval(secs => $3::float8 / 1000)
 WHERE (id, claim_token) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))
   AND state = 'processing' AND lease_expires_at > clock_timestamp()
RETURNING id";

// The key head rule: a keyed row is claimable only when no row of its key with a lower
// sequence is pending or processing, whatever that row's schedule or lease.
fn claim_outbox_sql() -> String {
    format!(
        "
WITH pick AS (
    SELECT o.id FROM outbox o
     WHERE o.state = 'pending' AND o.scheduled_at <= clock_timestamp()
       AND (o.key IS NULL OR o.key = '' OR NOT EXISTS (
            SELECT 1 FROM outbox b
             WHERE b.key = o.key AND b.state IN ('pending', 'processing') AND b.sequence < o.sequence))
     ORDER BY o.scheduled_at, o.sequence
     LIMIT $1
     FOR UPDATE OF o SKIP LOCKED
)
UPDATE outbox u
   SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = clock_timestamp(),
       updated_at = clock_timestamp(), lease_expires_at = {LEASE}
  FROM pick WHERE u.id = pick.id
RETURNING u.id, u.topic, u.key, u.aggregate_type, u.payload, u.headers, u.attempt, u.max_attempts,
          u.created_at, u.claim_token, u.scheduled_at, u.sequence"
    )
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn decode_inbox(row: &PgRow) -> InboxMessage {
    InboxMessage {
        id: row.get("id"),
        source: row.get("source"),
        idempotency_key: row.get("idempotency_key"),
        aggregate_id: row.get("aggregate_id"),
        event_type: row.get("event_type"),
        payload: row.get("payload"),
        headers: object(row.get("headers")),
        attempt: row.get("attempt"),
        correlation_id: row.get("correlation_id"),
        created_at: row.get("created_at"),
    }
}

fn decode_outbox(row: &PgRow) -> OutboxRow {
    OutboxRow {
        id: row.get("id"),
        topic: row.get("topic"),
        key: row.get("key"),
        aggregate_type: row.get("aggregate_type"),
        payload: row.get("payload"),
        headers: object(row.get("headers")),
        attempt: row.get("attempt"),
        max_attempts: row.get("max_attempts"),
        created_at: row.get("created_at"),
    }
}

/// RETURNING has no order: sort by (scheduled_at, sequence), the claim order.
fn in_claim_order<T>(rows: &[PgRow], f: impl Fn(&PgRow) -> T) -> Vec<T> {
    let mut keyed: Vec<_> = rows
        .iter()
        .map(|r| ((r.get::<chrono::DateTime<chrono::Utc>, _>("scheduled_at"), r.get::<i64, _>("sequence")), f(r)))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, v)| v).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

impl PgStore {
    async fn fenced(&self, sql: &str, op: &'static str, c: &ClaimRef, error: Option<&str>, delay: Option<Duration>) -> Result<bool> {
        let mut q = sqlx::query(sql).bind(c.id).bind(c.token);
        if let Some(e) = error {
            q = q.bind(e);
        }
        if let Some(d) = delay {
            q = q.bind(ms(d));
        }
        let r = q.execute(self.pool()).await.map_err(|e| db_err(op, e))?;
        Ok(r.rows_affected() == 1)
    }
}

#[async_trait]
impl RelayStore for PgStore {
    async fn reclaim_push(&self) -> Result<u64> {
        let r = sqlx::query(RECLAIM_PUSH).execute(self.pool()).await.map_err(|e| db_err("push reclaim", e))?;
        Ok(r.rows_affected())
    }

    async fn claim_push(&self, batch: u32, lease: Duration) -> Result<Vec<ClaimedRow>> {
        let rows = sqlx::query(&claim_push_sql())
            .bind(batch as i64)
            .bind(ms(lease))
            .fetch_all(self.pool())
            .await
            .map_err(|e| db_err("push claim", e))?;
        Ok(in_claim_order(&rows, |r| ClaimedRow { message: decode_inbox(r), claim: ClaimRef { id: r.get("id"), token: r.get("claim_token") } }))
    }

    async fn forward_push(&self, claim: &ClaimRef, row: &NewOutboxRow) -> Result<Forwarded> {
        let mut tx = self.pool().begin().await.map_err(|e| db_err("push forward", e))?;
        // The fenced mark first: it locks the inbox row, so the insert below can only
        // commit together with a live claim.
        let marked = sqlx::query(&format!(
            "UPDATE inbox SET state = 'processed', processed_at = clock_timestamp(), claim_token = NULL, lease_expires_at = NULL WHERE {PUSH_FENCE}"
        ))
        .bind(claim.id)
        .bind(claim.token)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("push forward", e))?;
        if marked.rows_affected() != 1 {
            tx.rollback().await.map_err(|e| db_err("push forward", e))?;
            return Ok(Forwarded::ClaimLost);
        }
        let id: Uuid = bind_outbox(sqlx::query_scalar(INSERT_OUTBOX), row).fetch_one(&mut *tx).await.map_err(|e| db_err("push forward", e))?;
        tx.commit().await.map_err(|e| db_err("push forward", e))?;
        Ok(Forwarded::Done { outbox_id: id })
    }

    async fn dead_push(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        let sql = format!("UPDATE inbox SET state = 'dead', last_error = $3, claim_token = NULL, lease_expires_at = NULL WHERE {PUSH_FENCE}");
        self.fenced(&sql, "push dead", claim, Some(error), None).await
    }

    async fn reclaim_outbox(&self) -> Result<u64> {
        let r = sqlx::query(RECLAIM_OUTBOX).execute(self.pool()).await.map_err(|e| db_err("outbox reclaim", e))?;
        Ok(r.rows_affected())
    }

    async fn claim_outbox(&self, batch: u32, lease: Duration) -> Result<Vec<ClaimedOutbox>> {
        let rows = sqlx::query(&claim_outbox_sql())
            .bind(batch as i64)
            .bind(ms(lease))
            .fetch_all(self.pool())
            .await
            .map_err(|e| db_err("outbox claim", e))?;
        Ok(in_claim_order(&rows, |r| ClaimedOutbox { row: decode_outbox(r), claim: ClaimRef { id: r.get("id"), token: r.get("claim_token") } }))
    }

    async fn renew_outbox(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        super::renew_leases(self.pool(), RENEW_OUTBOX, "outbox renew", claims, lease).await
    }

    async fn mark_sent(&self, claim: &ClaimRef) -> Result<bool> {
        let sql = format!(
            "UPDATE outbox SET state = 'sent', updated_at = clock_timestamp(), claim_token = NULL, lease_expires_at = NULL WHERE {OUTBOX_FENCE}"
        );
        self.fenced(&sql, "outbox sent", claim, None, None).await
    }

    async fn retry_outbox(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
        let sql = format!(
            "UPDATE outbox SET state = 'pending', attempt = attempt + 1, last_error = $3, claimed_at = NULL, claim_token = NULL,
                    lease_expires_at = NULL, updated_at = clock_timestamp(),
                    scheduled_at = clock_timestamp() + make_interval(secs => $4::float8 / 1000)
              WHERE {OUTBOX_FENCE}"
        );
        self.fenced(&sql, "outbox retry", claim, Some(error), Some(delay)).await
    }

    async fn dead_outbox(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        let sql = format!(
            "UPDATE outbox SET state = 'dead', last_error = $3, claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL,
                    updated_at = clock_timestamp() WHERE {OUTBOX_FENCE}"
        );
        self.fenced(&sql, "outbox dead", claim, Some(error), None).await
    }

    async fn outbox_backlog(&self) -> Result<OutboxBacklog> {
        let row = sqlx::query(
            "SELECT count(*) AS pending,
                    COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8 AS age
               FROM outbox WHERE state = 'pending'",
        )
        .fetch_one(self.pool())
        .await
        .map_err(|e| db_err("outbox backlog", e))?;
        Ok(OutboxBacklog { pending: row.get("pending"), oldest_pending_age: row.get("age") })
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog> {
        let row = sqlx::query(
            "SELECT COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at) FILTER (WHERE consumption = 'push')), 0)::float8 AS push_age,
                    COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at) FILTER (WHERE consumption = 'pull')), 0)::float8 AS pull_age
               FROM inbox WHERE state = 'pending'",
        )
        .fetch_one(self.pool())
        .await
        .map_err(|e| db_err("inbox backlog", e))?;
        Ok(InboxBacklog { push_oldest_pending_age: row.get("push_age"), pull_oldest_pending_age: row.get("pull_age") })
    }

    async fn delete_old_outbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let r = sqlx::query(
            "DELETE FROM outbox WHERE state IN ('sent', 'dead') AND id IN (
                SELECT id FROM outbox WHERE state IN ('sent', 'dead')
                   AND updated_at < clock_timestamp() - make_interval(secs => $1::float8 / 1000) LIMIT $2)",
        )
        .bind(ms(max_age))
        .bind(batch as i64)
        .execute(self.pool())
        .await
        .map_err(|e| db_err("outbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_excess_outbox(&self, keep: u64, batch: u32) -> Result<u64> {
        let r = sqlx::query(
            "DELETE FROM outbox WHERE state IN ('sent', 'dead') AND id IN (
                SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY state ORDER BY updated_at DESC, id DESC) AS rn
                                  FROM outbox WHERE state IN ('sent', 'dead')) r
                 WHERE rn > $1 LIMIT $2)",
        )
        .bind(keep as i64)
        .bind(batch as i64)
        .execute(self.pool())
        .await
        .map_err(|e| db_err("outbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_old_inbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let r = sqlx::query(
            "DELETE FROM inbox WHERE state IN ('processed', 'dead') AND id IN (
                SELECT id FROM inbox WHERE state IN ('processed', 'dead')
                   AND created_at < clock_timestamp() - make_interval(secs => $1::float8 / 1000) LIMIT $2)",
        )
        .bind(ms(max_age))
        .bind(batch as i64)
        .execute(self.pool())
        .await
        .map_err(|e| db_err("inbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn list_dead_outbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let rows = sqlx::query(
            "SELECT id, topic AS name, key, attempt, last_error, updated_at FROM outbox WHERE state = 'dead' ORDER BY updated_at DESC LIMIT $1",
        )
        .bind(limit as i64)
        .fetch_all(self.pool())
        .await
        .map_err(|e| db_err("list dead outbox", e))?;
        Ok(rows.iter().map(decode_dead).collect())
    }

    async fn list_dead_inbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let rows = sqlx::query(
            "SELECT id, source AS name, idempotency_key AS key, attempt, last_error, COALESCE(processed_at, created_at) AS updated_at
               FROM inbox WHERE state = 'dead' ORDER BY created_at DESC LIMIT $1",
        )
        .bind(limit as i64)
        .fetch_all(self.pool())
        .await
        .map_err(|e| db_err("list dead inbox", e))?;
        Ok(rows.iter().map(decode_dead).collect())
    }

    async fn inbox_row(&self, id: Uuid) -> Result<Option<InboxMessage>> {
        let row = sqlx::query(
            "SELECT id, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt, correlation_id, created_at FROM inbox WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db_err("inbox row", e))?;
        Ok(row.as_ref().map(decode_inbox))
    }

    async fn insert_outbox(&self, row: &NewOutboxRow) -> Result<Uuid> {
        bind_outbox(sqlx::query_scalar(INSERT_OUTBOX), row).fetch_one(self.pool()).await.map_err(|e| db_err("outbox insert", e))
    }

    async fn replay_outbox(&self, f: &ReplayFilter) -> Result<u64> {
        let states: &[&str] = if f.dead_only { &["dead"] } else { &["sent", "dead"] };
        let r = sqlx::query(
            "UPDATE outbox SET state = 'pending', attempt = 0, last_error = NULL, scheduled_at = clock_timestamp(),
                    claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
              WHERE state = ANY($1)
                AND ($2::uuid[] IS NULL OR id = ANY($2))
                AND ($3::text IS NULL OR topic = $3)
                AND ($4::text IS NULL OR headers ->> 'x-source' = $4)
                AND ($5::timestamptz IS NULL OR created_at > $5)
                AND ($6::timestamptz IS NULL OR created_at < $6)",
        )
        .bind(states)
        .bind(&f.ids)
        .bind(&f.topic)
        .bind(&f.source)
        .bind(f.created_after)
        .bind(f.created_before)
        .execute(self.pool())
        .await
        .map_err(|e| db_err("outbox replay", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_outbox(&self, ids: &[Uuid]) -> Result<u64> {
        let r = sqlx::query("DELETE FROM outbox WHERE id = ANY($1) AND state <> 'processing'")
            .bind(ids)
            .execute(self.pool())
            .await
            .map_err(|e| db_err("outbox delete", e))?;
        Ok(r.rows_affected())
    }
}

fn bind_outbox<'q, O>(
    q: sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    row: &'q NewOutboxRow,
) -> sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    q.bind(&row.topic).bind(&row.key).bind(&row.payload).bind(Value::Object(row.headers.clone())).bind(row.max_attempts as i32)
}

fn decode_dead(r: &PgRow) -> DeadRow {
    DeadRow {
        id: r.get("id"),
        topic_or_source: r.get("name"),
        key: r.get("key"),
        attempt: r.get("attempt"),
        last_error: r.get("last_error"),
        updated_at: r.get("updated_at"),
    }
}
