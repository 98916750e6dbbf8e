//! The pull operations (claim, renew, complete, retry, dead, release) and the inbox insert:
//! binding and decoding around the statements of [`super::sql`].
//! `proto-docs/sql-contract.md` states the contract of each in words.

use std::collections::HashMap;
use std::time::{Duration, Instant};

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
        .bind(delay_ms(m))
        .bind(m.trace.as_ref().map(|t| t.traceparent.as_str()))
        .bind(m.trace.as_ref().and_then(|t| t.tracestate.as_deref()))
        .fetch_optional(store.db())
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
                .fetch_one(store.db())
                .await
                .map_err(|e| db_err("inbox duplicate lookup", e))?;
            Ok(InsertOutcome::Duplicate(existing))
        }
    }
}

/// Stores `msgs` with one [`sql::INSERT_MANY`], then reads the ids of the duplicates with one
/// [`sql::LOOKUP_IDS`]. An `Err` means the insert failed and nothing was stored; after it
/// every row has its own outcome (only a failed duplicate lookup fails a row). The first
/// occurrence of a key repeated within `msgs` is inserted, the later ones are its duplicates.
pub(super) async fn insert_inbox_many(
    store: &PgStore,
    msgs: &[&NewInboxMessage],
) -> Result<Vec<Result<InsertOutcome>>> {
    let text = |f: fn(&NewInboxMessage) -> Option<&str>| -> Vec<Option<&str>> {
        msgs.iter().map(|m| f(m)).collect()
    };
    let inserted: Vec<(Uuid, String, String)> = sqlx::query_as(store.sql(sql::INSERT_MANY))
        .bind(text(|m| Some(&m.source)))
        .bind(text(|m| Some(&m.idempotency_key)))
        .bind(text(|m| m.aggregate_id.as_deref()))
        .bind(text(|m| m.event_type.as_deref()))
        .bind(msgs.iter().map(|m| &m.payload).collect::<Vec<_>>())
        .bind(
            msgs.iter()
                .map(|m| Value::Object(m.headers.clone()))
                .collect::<Vec<_>>(),
        )
        .bind(text(|m| m.correlation_id.as_deref()))
        .bind(text(|m| Some(m.consumption.as_str())))
        .bind(text(|m| m.dead_reason.as_deref()))
        .bind(msgs.iter().map(|m| delay_ms(m)).collect::<Vec<_>>())
        .bind(text(|m| m.trace.as_ref().map(|t| t.traceparent.as_str())))
        .bind(text(|m| {
            m.trace.as_ref().and_then(|t| t.tracestate.as_deref())
        }))
        .fetch_all(store.db())
        .await
        .map_err(|e| db_err("inbox insert", e))?;
    // The stored id of each key and whether this statement inserted it: the rows inserted,
    // then the duplicates' read below. Of a key inserted here, its first row in `msgs` is the
    // new one; every other row of the key is a duplicate.
    fn key(m: &NewInboxMessage) -> (&str, &str) {
        (m.source.as_str(), m.idempotency_key.as_str())
    }
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        first.entry(key(m)).or_insert(i);
    }
    let mut stored: HashMap<(&str, &str), (Uuid, bool)> = HashMap::new();
    for (id, source, k) in &inserted {
        if let Some(&i) = first.get(&(source.as_str(), k.as_str())) {
            stored.insert(key(msgs[i]), (*id, true));
        }
    }
    let unknown: Vec<(&str, &str)> = first
        .keys()
        .filter(|k| !stored.contains_key(*k))
        .copied()
        .collect();
    let mut lookup_failed = None;
    if !unknown.is_empty() {
        let found: std::result::Result<Vec<(Uuid, String, String)>, _> =
            sqlx::query_as(store.sql(sql::LOOKUP_IDS))
                .bind(unknown.iter().map(|k| k.0).collect::<Vec<_>>())
                .bind(unknown.iter().map(|k| k.1).collect::<Vec<_>>())
                .fetch_all(store.db())
                .await;
        match found {
            Ok(rows) => {
                for (id, source, k) in &rows {
                    if let Some(&i) = first.get(&(source.as_str(), k.as_str())) {
                        stored.insert(key(msgs[i]), (*id, false));
                    }
                }
            }
            Err(e) => lookup_failed = Some(db_err("inbox duplicate lookup", e).to_string()),
        }
    }
    Ok(msgs
        .iter()
        .enumerate()
        .map(|(i, m)| match stored.get(&key(m)) {
            Some(&(id, true)) if first[&key(m)] == i => Ok(InsertOutcome::Inserted(id)),
            Some(&(id, _)) => Ok(InsertOutcome::Duplicate(id)),
            None => Err(crate::error::Error::Database {
                operation: "inbox duplicate lookup",
                // A duplicate's stored row deleted between the two statements (retention).
                message: lookup_failed
                    .clone()
                    .unwrap_or_else(|| "the stored row of a duplicate was not found".into()),
                code: None,
            }),
        })
        .collect())
}

fn delay_ms(m: &NewInboxMessage) -> f64 {
    if m.dead_reason.is_some() {
        0.0
    } else {
        m.delay.map(|d| d.as_millis() as f64).unwrap_or(0.0)
    }
}

/// Claims from the head of the queue ([`sql::CLAIM`]) or, while the source drains, from where
/// the last full claim stopped ([`sql::CLAIM_FROM`]; `claim_start` says when).
pub(super) async fn claim(
    store: &PgStore,
    source: &str,
    batch: u32,
    lease: Duration,
    owner: Option<i64>,
) -> Result<Vec<ClaimedRow>> {
    let from = store.claim_starts.next(source);
    let statement = match from {
        Some(_) => sql::CLAIM_FROM,
        None => sql::CLAIM,
    };
    let mut query = sqlx::query(store.sql(statement))
        .bind(source)
        .bind(batch as i64)
        .bind(lease.as_millis() as f64)
        .bind(candidate_limit(batch))
        .bind(owner);
    if let Some((priority, at, sequence)) = from {
        query = query.bind(at).bind(sequence).bind(priority);
    }
    let started = Instant::now();
    let rows = query
        .fetch_all(store.claim_db())
        .await
        .map_err(|e| db_err("pull claim", e))?;
    // Every row carries the same first candidate not taken (NULL when it took them all). The
    // next claim starts there only after a full claim, and not when that candidate is an
    // expired lease (only a claim from the head reads those).
    let next = match rows.first() {
        Some(r) if rows.len() >= batch as usize => {
            let priority: Option<i16> = r.get("next_priority");
            let at: Option<DateTime<Utc>> = r.get("next_at");
            let sequence: Option<i64> = r.get("next_sequence");
            let pending: Option<bool> = r.get("next_pending");
            match (priority, at, sequence, pending) {
                (Some(p), Some(a), Some(s), Some(true)) => Some((p, a, s)),
                _ => None,
            }
        }
        _ => None,
    };
    store
        .claim_starts
        .record(source, from.is_none(), started.elapsed(), next);
    let mut keyed = Vec::with_capacity(rows.len());
    for row in &rows {
        let order: (std::cmp::Reverse<i16>, DateTime<Utc>, i64) = (
            std::cmp::Reverse(row.get("priority")),
            row.get("scheduled_at"),
            row.get("sequence"),
        );
        keyed.push((order, decode_claimed(row)));
    }
    // RETURNING has no order; hand rows out in claim order (highest priority first).
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
        max_attempts: row
            .get::<Option<i32>, _>("max_attempts")
            .and_then(|n| u32::try_from(n).ok()),
    }
}

pub(super) async fn renew(
    store: &PgStore,
    claims: &[ClaimRef],
    lease: Duration,
) -> Result<Vec<Uuid>> {
    super::renew_leases(
        store.db(),
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
        .execute(store.db())
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
        .fetch_all(store.db())
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
        .execute(store.db())
        .await
        .map_err(|e| db_err("pull retry", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn dead(store: &PgStore, c: &ClaimRef, error: &str) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::DEAD))
        .bind(c.id)
        .bind(c.token)
        .bind(error)
        .execute(store.db())
        .await
        .map_err(|e| db_err("pull dead", e))?;
    Ok(r.rows_affected() == 1)
}

pub(super) async fn release(store: &PgStore, c: &ClaimRef) -> Result<bool> {
    let r = sqlx::query(store.sql(sql::RELEASE))
        .bind(c.id)
        .bind(c.token)
        .execute(store.db())
        .await
        .map_err(|e| db_err("pull release", e))?;
    Ok(r.rows_affected() == 1)
}
