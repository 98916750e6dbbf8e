//! [`RelayStore`] on PostgreSQL: binding and decoding around the statements of
//! [`super::sql`]. Every lease comparison uses `clock_timestamp()`; every terminal write is
//! fenced on `state = 'processing'`, the claim token and a live lease.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::Row;
use uuid::Uuid;

use super::{db_err, sql, PgStore, OUTBOX_CHANNEL};
use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage};
use crate::store::relay::{
    CancelTarget, Cancelled, ClaimedOutbox, DeadFilter, DeadRow, DeadTable, Forwarded,
    InboxBacklog, Journey, JourneyRow, JourneyTarget, NewOutboxRow, OutboxBacklog, OutboxRow,
    PauseKind, Paused, RelayOwnersExpired, RelayStore, ReplayFilter, StateCounts,
};
use crate::store::Wakeup;

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
        trace: super::decode_trace(row),
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
        .map(|r| {
            (
                (
                    r.get::<chrono::DateTime<chrono::Utc>, _>("scheduled_at"),
                    r.get::<i64, _>("sequence"),
                ),
                f(r),
            )
        })
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, v)| v).collect()
}

/// Where the next walk over keys starts: the last key this walk took, in walk order (the
/// keys after `cursor` ascending, then the wrapped-around keys up to it).
fn next_cursor(cursor: &str, walked: &[String]) -> Option<String> {
    let wrapped = walked.iter().filter(|k| k.as_str() <= cursor).max();
    wrapped.or_else(|| walked.iter().max()).cloned()
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

impl PgStore {
    async fn fenced(
        &self,
        sql: &str,
        op: &'static str,
        c: &ClaimRef,
        error: Option<&str>,
        delay: Option<Duration>,
    ) -> Result<bool> {
        let mut q = sqlx::query(sql).bind(c.id).bind(c.token);
        if let Some(e) = error {
            q = q.bind(e);
        }
        if let Some(d) = delay {
            q = q.bind(ms(d));
        }
        let r = q.execute(self.db()).await.map_err(|e| db_err(op, e))?;
        Ok(r.rows_affected() == 1)
    }
}

/// A database older than migration 15 has no paused set: say to migrate, not "relation does
/// not exist".
fn paused_err(op: &'static str, e: sqlx::Error) -> crate::Error {
    let undefined_table = e
        .as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "42P01");
    if undefined_table {
        return crate::Error::InvalidInput(format!(
            "{op}: the table queuebox_paused does not exist; run `queuebox migrate` (migration 15) first"
        ));
    }
    db_err(op, e)
}

#[async_trait]
impl RelayStore for PgStore {
    async fn reclaim_push(&self) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::RECLAIM_PUSH))
            .execute(self.db())
            .await
            .map_err(|e| db_err("push reclaim", e))?;
        Ok(r.rows_affected())
    }

    async fn claim_push_owned(
        &self,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedRow>> {
        let rows = sqlx::query(self.sql(sql::CLAIM_PUSH))
            .bind(batch as i64)
            .bind(ms(lease))
            .bind(owner)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("push claim", e))?;
        Ok(in_claim_order(&rows, |r| ClaimedRow {
            message: decode_inbox(r),
            claim: ClaimRef {
                id: r.get("id"),
                token: r.get("claim_token"),
            },
            // Push rows are enqueued by sources only; the relay's retry policy decides.
            max_attempts: None,
        }))
    }

    async fn forward_push(&self, claim: &ClaimRef, row: &NewOutboxRow) -> Result<Forwarded> {
        let mut tx = self
            .db()
            .begin()
            .await
            .map_err(|e| db_err("push forward", e))?;
        // The fenced mark first: it locks the inbox row, so the insert below can only
        // commit together with a live claim.
        let marked = sqlx::query(self.sql(sql::FORWARD_PUSH))
            .bind(claim.id)
            .bind(claim.token)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("push forward", e))?;
        if marked.rows_affected() != 1 {
            tx.rollback().await.map_err(|e| db_err("push forward", e))?;
            return Ok(Forwarded::ClaimLost);
        }
        let id: Uuid = bind_outbox(sqlx::query_scalar(self.sql(sql::INSERT_OUTBOX)), row)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db_err("push forward", e))?;
        tx.commit().await.map_err(|e| db_err("push forward", e))?;
        Ok(Forwarded::Done { outbox_id: id })
    }

    async fn forward_push_many(&self, rows: &[(ClaimRef, NewOutboxRow)]) -> Result<Vec<Forwarded>> {
        let err = |e| db_err("push forward", e);
        let mut tx = self.db().begin().await.map_err(err)?;
        // The fenced marks first: they lock the inbox rows, so the inserts below can only
        // commit together with live claims.
        let marked: HashSet<Uuid> = sqlx::query_scalar(self.sql(sql::FORWARD_PUSH_MANY))
            .bind(rows.iter().map(|(c, _)| c.id).collect::<Vec<_>>())
            .bind(rows.iter().map(|(c, _)| c.token).collect::<Vec<_>>())
            .fetch_all(&mut *tx)
            .await
            .map_err(err)?
            .into_iter()
            .collect();
        let out: Vec<Forwarded> = rows
            .iter()
            .map(|(c, _)| match marked.contains(&c.id) {
                true => Forwarded::Done {
                    // Time-ordered like the column default (migration 0008).
                    outbox_id: Uuid::now_v7(),
                },
                false => Forwarded::ClaimLost,
            })
            .collect();
        let live: Vec<(Uuid, &NewOutboxRow)> = rows
            .iter()
            .zip(&out)
            .filter_map(|((_, r), f)| match f {
                Forwarded::Done { outbox_id } => Some((*outbox_id, r)),
                Forwarded::ClaimLost => None,
            })
            .collect();
        if !live.is_empty() {
            sqlx::query(self.sql(sql::INSERT_OUTBOX_MANY))
                .bind(live.iter().map(|(id, _)| *id).collect::<Vec<_>>())
                .bind(
                    live.iter()
                        .map(|(_, r)| r.topic.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    live.iter()
                        .map(|(_, r)| r.key.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind(live.iter().map(|(_, r)| &r.payload).collect::<Vec<_>>())
                .bind(
                    live.iter()
                        .map(|(_, r)| Value::Object(r.headers.clone()))
                        .collect::<Vec<_>>(),
                )
                .bind(
                    live.iter()
                        .map(|(_, r)| r.max_attempts as i32)
                        .collect::<Vec<_>>(),
                )
                .execute(&mut *tx)
                .await
                .map_err(err)?;
        }
        tx.commit().await.map_err(err)?;
        Ok(out)
    }

    async fn renew_push(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        super::renew_leases(
            self.db(),
            self.sql(sql::RENEW_PUSH),
            "push renew",
            claims,
            lease,
        )
        .await
    }

    async fn dead_push(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        self.fenced(
            self.sql(sql::DEAD_PUSH),
            "push dead",
            claim,
            Some(error),
            None,
        )
        .await
    }

    async fn expire_dead_relay_owners(&self) -> Result<RelayOwnersExpired> {
        let mut expired = RelayOwnersExpired::default();
        for (statement, count) in [
            (sql::EXPIRE_DEAD_RELAY_OUTBOX, &mut expired.outbox),
            (sql::EXPIRE_DEAD_RELAY_PUSH, &mut expired.push),
        ] {
            *count = sqlx::query(self.sql(statement))
                .execute(self.db())
                .await
                .map_err(|e| db_err("expire dead relay owners", e))?
                .rows_affected();
        }
        Ok(expired)
    }

    async fn reclaim_outbox(&self) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::RECLAIM_OUTBOX))
            .execute(self.db())
            .await
            .map_err(|e| db_err("outbox reclaim", e))?;
        Ok(r.rows_affected())
    }

    async fn claim_outbox_owned(
        &self,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedOutbox>> {
        let cursor = self.outbox_walk.lock().unwrap().clone();
        let paused = self.outbox_paused.lock().unwrap().clone();
        let rows = sqlx::query(self.sql(sql::CLAIM_OUTBOX))
            .bind(batch as i64)
            .bind(ms(lease))
            .bind(&cursor)
            .bind(owner)
            .bind(paused)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("outbox claim", e))?;
        let walked: Vec<String> = rows
            .iter()
            .filter(|r| r.get::<bool, _>("walked"))
            .filter_map(|r| r.get::<Option<String>, _>("key"))
            .collect();
        if let Some(next) = next_cursor(&cursor, &walked) {
            *self.outbox_walk.lock().unwrap() = next;
        }
        Ok(in_claim_order(&rows, |r| ClaimedOutbox {
            row: decode_outbox(r),
            claim: ClaimRef {
                id: r.get("id"),
                token: r.get("claim_token"),
            },
        }))
    }

    async fn renew_outbox(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        super::renew_leases(
            self.db(),
            self.sql(sql::RENEW_OUTBOX),
            "outbox renew",
            claims,
            lease,
        )
        .await
    }

    async fn mark_sent(&self, claim: &ClaimRef) -> Result<bool> {
        self.fenced(self.sql(sql::MARK_SENT), "outbox sent", claim, None, None)
            .await
    }

    async fn mark_sent_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens): (Vec<Uuid>, Vec<Uuid>) = claims.iter().map(|c| (c.id, c.token)).unzip();
        sqlx::query_scalar(self.sql(sql::MARK_SENT_MANY))
            .bind(ids)
            .bind(tokens)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("outbox sent", e))
    }

    async fn listen_outbox(&self) -> Result<Option<Box<dyn Wakeup>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(self.pool())
            .await
            .map_err(|e| db_err("listen", self.db().explain(e)))?;
        listener
            .listen(OUTBOX_CHANNEL)
            .await
            .map_err(|e| db_err("listen", e))?;
        Ok(Some(Box::new(OutboxWakeup(listener))))
    }

    async fn retry_outbox(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
        self.fenced(
            self.sql(sql::RETRY_OUTBOX),
            "outbox retry",
            claim,
            Some(error),
            Some(delay),
        )
        .await
    }

    async fn dead_outbox(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        self.fenced(
            self.sql(sql::DEAD_OUTBOX),
            "outbox dead",
            claim,
            Some(error),
            None,
        )
        .await
    }

    async fn outbox_backlog(&self) -> Result<OutboxBacklog> {
        let row = sqlx::query(self.sql(sql::OUTBOX_BACKLOG))
            .fetch_one(self.db())
            .await
            .map_err(|e| db_err("outbox backlog", e))?;
        Ok(OutboxBacklog {
            pending: row.get("pending"),
            oldest_pending_age: row.get("age"),
        })
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog> {
        let row = sqlx::query(self.sql(sql::INBOX_BACKLOG))
            .fetch_one(self.db())
            .await
            .map_err(|e| db_err("inbox backlog", e))?;
        Ok(InboxBacklog {
            push_oldest_pending_age: row.get("push_age"),
            pull_oldest_pending_age: row.get("pull_age"),
        })
    }

    async fn delete_old_outbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::DELETE_OLD_OUTBOX))
            .bind(ms(max_age))
            .bind(batch as i64)
            .execute(self.db())
            .await
            .map_err(|e| db_err("outbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_excess_outbox(&self, keep: u64, batch: u32) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::DELETE_EXCESS_OUTBOX))
            .bind(keep as i64)
            .bind(batch as i64)
            .execute(self.db())
            .await
            .map_err(|e| db_err("outbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_old_inbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::DELETE_OLD_INBOX))
            .bind(ms(max_age))
            .bind(batch as i64)
            .execute(self.db())
            .await
            .map_err(|e| db_err("inbox retention", e))?;
        Ok(r.rows_affected())
    }

    async fn list_dead_outbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let rows = sqlx::query(self.sql(sql::LIST_DEAD_OUTBOX))
            .bind(limit as i64)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("list dead outbox", e))?;
        Ok(rows.iter().map(decode_dead).collect())
    }

    async fn list_dead_inbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let rows = sqlx::query(self.sql(sql::LIST_DEAD_INBOX))
            .bind(limit as i64)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("list dead inbox", e))?;
        Ok(rows.iter().map(decode_dead).collect())
    }

    async fn inbox_row(&self, id: Uuid) -> Result<Option<InboxMessage>> {
        let row = sqlx::query(self.sql(sql::INBOX_ROW))
            .bind(id)
            .fetch_optional(self.db())
            .await
            .map_err(|e| db_err("inbox row", e))?;
        Ok(row.as_ref().map(decode_inbox))
    }

    async fn insert_outbox(&self, row: &NewOutboxRow) -> Result<Uuid> {
        bind_outbox(sqlx::query_scalar(self.sql(sql::INSERT_OUTBOX)), row)
            .fetch_one(self.db())
            .await
            .map_err(|e| db_err("outbox insert", e))
    }

    async fn replay_outbox(&self, f: &ReplayFilter) -> Result<u64> {
        let states: &[&str] = if f.dead_only {
            &["dead"]
        } else {
            &["sent", "dead"]
        };
        let r = sqlx::query(self.sql(sql::REPLAY_OUTBOX))
            .bind(states)
            .bind(&f.ids)
            .bind(&f.topic)
            .bind(&f.source)
            .bind(f.created_after)
            .bind(f.created_before)
            .execute(self.db())
            .await
            .map_err(|e| db_err("outbox replay", e))?;
        Ok(r.rows_affected())
    }

    async fn delete_outbox(&self, ids: &[Uuid]) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::DELETE_OUTBOX))
            .bind(ids)
            .execute(self.db())
            .await
            .map_err(|e| db_err("outbox delete", e))?;
        Ok(r.rows_affected())
    }

    async fn find_dead(&self, f: &DeadFilter) -> Result<Vec<DeadRow>> {
        let q = match f.table {
            DeadTable::Outbox => sqlx::query(self.sql(sql::FIND_DEAD_OUTBOX))
                .bind(&f.ids)
                .bind(&f.topic)
                .bind(&f.source),
            DeadTable::Inbox => {
                if f.topic.is_some() {
                    return Err(crate::Error::InvalidInput(
                        "--topic filters outbox rows; an inbox row has a source, not a topic"
                            .into(),
                    ));
                }
                sqlx::query(self.sql(sql::FIND_DEAD_INBOX))
                    .bind(&f.ids)
                    .bind(&f.source)
            }
        };
        let rows = q
            .bind(f.older_than.map(|d| d.as_millis() as f64))
            .bind(f.limit as i64)
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("find dead rows", e))?;
        Ok(rows.iter().map(decode_dead).collect())
    }

    async fn delete_dead(&self, table: DeadTable, ids: &[Uuid]) -> Result<u64> {
        let statement = match table {
            DeadTable::Outbox => self.sql(sql::DELETE_DEAD_OUTBOX),
            DeadTable::Inbox => self.sql(sql::DELETE_DEAD_INBOX),
        };
        let r = sqlx::query(statement)
            .bind(ids)
            .execute(self.db())
            .await
            .map_err(|e| db_err("dead row delete", e))?;
        Ok(r.rows_affected())
    }

    async fn requeue_dead_inbox(&self, ids: &[Uuid]) -> Result<u64> {
        let r = sqlx::query(self.sql(sql::REQUEUE_DEAD_INBOX))
            .bind(ids)
            .execute(self.db())
            .await
            .map_err(|e| db_err("dead inbox requeue", e))?;
        Ok(r.rows_affected())
    }

    async fn journey(&self, target: &JourneyTarget) -> Result<Journey> {
        let (id, source, key) = match target {
            JourneyTarget::Id(id) => (Some(*id), None, None),
            JourneyTarget::SourceKey { source, key } => (None, Some(source), Some(key)),
        };
        let inbox = sqlx::query(self.sql(sql::JOURNEY_INBOX))
            .bind(id)
            .bind(source)
            .bind(key)
            .fetch_optional(self.db())
            .await
            .map_err(|e| db_err("journey inbox", e))?
            .as_ref()
            .map(decode_journey);
        let outbox = sqlx::query(self.sql(sql::JOURNEY_OUTBOX))
            .bind(id)
            .bind(inbox.as_ref().map(|r| r.id.to_string()))
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("journey outbox", e))?;
        Ok(Journey {
            inbox,
            outbox: outbox.iter().map(decode_journey).collect(),
        })
    }

    async fn cancel(&self, target: &CancelTarget) -> Result<Cancelled> {
        let q = match target {
            CancelTarget::Inbox {
                source,
                id,
                key,
                aggregate,
            } => sqlx::query(self.sql(sql::CANCEL_INBOX))
                .bind(id)
                .bind(source)
                .bind(key)
                .bind(aggregate),
            CancelTarget::Outbox { topic, id, key } => sqlx::query(self.sql(sql::CANCEL_OUTBOX))
                .bind(id)
                .bind(topic)
                .bind(key),
        };
        let r = q
            .fetch_one(self.db())
            .await
            .map_err(|e| db_err("cancel", e))?;
        let n = |c: &str| r.get::<i64, _>(c) as u64;
        Ok(Cancelled {
            cancelled: n("cancelled"),
            in_flight: n("in_flight"),
            finished: n("finished"),
            push: n("push"),
        })
    }

    async fn pause(&self, kind: PauseKind, name: &str) -> Result<bool> {
        let r = sqlx::query(self.sql(sql::PAUSE))
            .bind(kind.as_str())
            .bind(name)
            .fetch_optional(self.db())
            .await
            .map_err(|e| paused_err("pause", e))?;
        Ok(r.is_some())
    }

    async fn resume(&self, kind: PauseKind, name: &str) -> Result<bool> {
        let r = sqlx::query(self.sql(sql::RESUME))
            .bind(kind.as_str())
            .bind(name)
            .fetch_optional(self.db())
            .await
            .map_err(|e| paused_err("resume", e))?;
        Ok(r.is_some())
    }

    async fn list_paused(&self) -> Result<Vec<Paused>> {
        let rows = sqlx::query(self.sql(sql::LIST_PAUSED))
            .fetch_all(self.db())
            .await
            .map_err(|e| paused_err("list paused", e))?;
        rows.iter()
            .map(|r| {
                Ok(Paused {
                    kind: PauseKind::parse(r.get("kind"))?,
                    name: r.get("name"),
                    paused_at: r.get("paused_at"),
                })
            })
            .collect()
    }

    async fn source_seen(&self, source: &str) -> Result<bool> {
        sqlx::query_scalar(self.sql(sql::SOURCE_SEEN))
            .bind(source)
            .fetch_one(self.db())
            .await
            .map_err(|e| db_err("source lookup", e))
    }

    fn exclude_outbox_topics(&self, pattern: Option<String>) {
        *self.outbox_paused.lock().unwrap() = pattern;
    }

    async fn state_counts(&self) -> Result<Vec<StateCounts>> {
        let rows = sqlx::query(self.sql(sql::STATE_COUNTS))
            .fetch_all(self.db())
            .await
            .map_err(|e| db_err("state counts", e))?;
        Ok(rows
            .iter()
            .map(|r| StateCounts {
                table: r.get("tbl"),
                topic_or_source: r.get("name"),
                consumption: r.get("consumption"),
                pending: r.get("pending"),
                retrying: r.get("retrying"),
                processing: r.get("processing"),
                lease_expired: r.get("lease_expired"),
                next_lease_expiry: r.get("next_lease_expiry"),
                dead: r.get("dead"),
                oldest_pending_age: r.get("age"),
                done_last_5_min: r.get("done_recently"),
            })
            .collect())
    }
}

fn decode_journey(r: &PgRow) -> JourneyRow {
    JourneyRow {
        id: r.get("id"),
        topic_or_source: r.get("name"),
        key: r.get("key"),
        state: r.get("state"),
        attempt: r.get("attempt"),
        last_error: r.get("last_error"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        payload: r.get("payload"),
        headers: r.get("headers"),
    }
}

fn bind_outbox<'q, O>(
    q: sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    row: &'q NewOutboxRow,
) -> sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    q.bind(&row.topic)
        .bind(&row.key)
        .bind(&row.payload)
        .bind(Value::Object(row.headers.clone()))
        .bind(row.max_attempts as i32)
}

/// Any notification on [`OUTBOX_CHANNEL`] may mean claimable rows. A lost connection wakes
/// too (notifications sent meanwhile are gone), and the next wait reconnects and listens again.
struct OutboxWakeup(sqlx::postgres::PgListener);

#[async_trait]
impl Wakeup for OutboxWakeup {
    async fn wait(&mut self) -> Result<()> {
        self.0.try_recv().await.map_err(|e| db_err("listen", e))?;
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::next_cursor;

    #[test]
    fn the_key_walk_resumes_after_the_last_key_it_took_in_walk_order() {
        let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(next_cursor("", &k(&["b", "a", "c"])).as_deref(), Some("c"));
        // Wrapped around: "a" came after "x" in the walk.
        assert_eq!(next_cursor("m", &k(&["x", "a"])).as_deref(), Some("a"));
        assert_eq!(next_cursor("m", &k(&[])), None);
    }
}
