//! [`RelayStore`] on SQL Server: the push and outbox claims (each one transaction serialised
//! by `sp_getapplock`), the fenced outcomes, reclaim, retention,
//! gauges and the admin operations. The statements are in [`super::sql`]; this file binds
//! parameters and decodes rows. Every time comes from `SYSUTCDATETIME()`, and every fenced
//! write is the PostgreSQL fence (`state = 'processing'`, the claim token, a live lease).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDateTime;
use serde_json::Value;
use tiberius::{Row, ToSql};
use uuid::Uuid;

use super::pull::{
    decode_claimed, decode_inbox, fenced, json_object, millis, missing, order_key, renew_json,
    renew_many, rows, text, Extra,
};
use super::value::{json_text, utc};
use super::{db_err, sql, Pool, SqlServerStore};
use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage};
use crate::store::relay::{
    ClaimedOutbox, DeadRow, Forwarded, InboxBacklog, NewOutboxRow, OutboxBacklog, OutboxRow,
    RelayStore, ReplayFilter,
};

/// A retention age in milliseconds, bounded so its seconds fit `DATEADD`'s INT (68 years).
fn age_ms(d: Duration) -> i64 {
    millis(d).min(i32::MAX as i64 * 1000)
}

/// Runs a statement that returns no rows; the rows it affected.
async fn affected(
    pool: &Arc<Pool>,
    op: &'static str,
    text: &str,
    params: &[&dyn ToSql],
) -> Result<u64> {
    let mut conn = pool.get().await?;
    let r = conn
        .client()
        .execute(text, params)
        .await
        .map_err(|e| db_err(op, e))?;
    conn.release();
    Ok(r.total())
}

/// The first `id` of a result (the `SELECT id FROM @qbIds` of an insert).
fn first_id(op: &'static str, rows: &[Row]) -> Result<Option<Uuid>> {
    match rows.first() {
        None => Ok(None),
        Some(r) => Ok(Some(
            r.try_get("id")
                .map_err(|e| db_err(op, e))?
                .ok_or_else(|| missing(op, "id"))?,
        )),
    }
}

/// One `OUTPUT inserted.*` row of `outbox`: the claim order key and the claimed row.
pub(super) fn decode_outbox_claimed(row: &Row) -> Result<((NaiveDateTime, i64), ClaimedOutbox)> {
    const OP: &str = "outbox claim";
    let err = |e| db_err(OP, e);
    let id: Uuid = row
        .try_get("id")
        .map_err(err)?
        .ok_or_else(|| missing(OP, "id"))?;
    let token: Uuid = row
        .try_get("claim_token")
        .map_err(err)?
        .ok_or_else(|| missing(OP, "claim_token"))?;
    let created: NaiveDateTime = row
        .try_get("created_at")
        .map_err(err)?
        .ok_or_else(|| missing(OP, "created_at"))?;
    let out = OutboxRow {
        id,
        topic: text(OP, row, "topic")?.ok_or_else(|| missing(OP, "topic"))?,
        key: text(OP, row, "key")?,
        aggregate_type: text(OP, row, "aggregate_type")?,
        payload: json_text(row.try_get::<&str, _>("payload").map_err(err)?),
        headers: json_object(OP, row, "headers")?,
        attempt: row.try_get("attempt").map_err(err)?.unwrap_or(0),
        max_attempts: row
            .try_get("max_attempts")
            .map_err(err)?
            .ok_or_else(|| missing(OP, "max_attempts"))?,
        created_at: utc(created),
    };
    Ok((
        order_key(OP, row)?,
        ClaimedOutbox {
            row: out,
            claim: ClaimRef { id, token },
        },
    ))
}

/// One row of [`sql::LIST_DEAD_OUTBOX`] / [`sql::LIST_DEAD_INBOX`].
pub(super) fn decode_dead(op: &'static str, row: &Row) -> Result<DeadRow> {
    let err = |e| db_err(op, e);
    let updated: NaiveDateTime = row
        .try_get("updated_at")
        .map_err(err)?
        .ok_or_else(|| missing(op, "updated_at"))?;
    Ok(DeadRow {
        id: row
            .try_get("id")
            .map_err(err)?
            .ok_or_else(|| missing(op, "id"))?,
        topic_or_source: text(op, row, "name")?.ok_or_else(|| missing(op, "name"))?,
        key: text(op, row, "key")?,
        attempt: row.try_get("attempt").map_err(err)?.unwrap_or(0),
        last_error: text(op, row, "last_error")?,
        updated_at: utc(updated),
    })
}

/// OUTPUT has no order: sort by `(scheduled_at, sequence)`, the claim order.
fn in_claim_order<T>(mut keyed: Vec<((NaiveDateTime, i64), T)>) -> Vec<T> {
    keyed.sort_by_key(|a| a.0);
    keyed.into_iter().map(|(_, v)| v).collect()
}

/// A JSON array of ids, the `OPENJSON(…) WITH (id UNIQUEIDENTIFIER '$')` input.
pub(super) fn ids_json(ids: &[Uuid]) -> String {
    Value::Array(ids.iter().map(|i| Value::String(i.to_string())).collect()).to_string()
}

/// The outbox row's text parameters: payload and headers as JSON text.
fn outbox_json(row: &NewOutboxRow) -> (String, String) {
    (
        row.payload.to_string(),
        Value::Object(row.headers.clone()).to_string(),
    )
}

#[async_trait]
impl RelayStore for SqlServerStore {
    async fn reclaim_push(&self) -> Result<u64> {
        affected(self.pool(), "push reclaim", sql::RECLAIM_PUSH, &[]).await
    }

    // No owner sessions on SQL Server: `_owner` is not recorded, rows wait for their lease.
    async fn claim_push_owned(
        &self,
        batch: u32,
        lease: Duration,
        _owner: Option<i64>,
    ) -> Result<Vec<ClaimedRow>> {
        if batch == 0 {
            return Ok(Vec::new());
        }
        let (batch, lease_ms) = (batch as i64, millis(lease));
        let params: [&dyn ToSql; 2] = [&batch, &lease_ms];
        let rows = rows(self.pool(), "push claim", sql::CLAIM_PUSH, &params).await?;
        let keyed = rows
            .iter()
            .map(|r| decode_claimed("push claim", r))
            .collect::<Result<Vec<_>>>()?;
        Ok(in_claim_order(keyed))
    }

    async fn forward_push(&self, claim: &ClaimRef, row: &NewOutboxRow) -> Result<Forwarded> {
        const OP: &str = "push forward";
        let (payload, headers) = outbox_json(row);
        let max_attempts = row.max_attempts.min(i32::MAX as u32) as i32;
        let params: [&dyn ToSql; 7] = [
            &claim.id,
            &claim.token,
            &row.topic.as_str(),
            &row.key.as_deref(),
            &payload.as_str(),
            &headers.as_str(),
            &max_attempts,
        ];
        let rows = rows(self.pool(), OP, sql::FORWARD_PUSH, &params).await?;
        Ok(match first_id(OP, &rows)? {
            Some(outbox_id) => Forwarded::Done { outbox_id },
            None => Forwarded::ClaimLost,
        })
    }

    async fn renew_push(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        renew_many(self.pool(), "push renew", sql::RENEW_PUSH, claims, lease).await
    }

    async fn dead_push(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        fenced(
            self.pool(),
            "push dead",
            sql::DEAD_PUSH,
            claim,
            Extra::Error(error),
        )
        .await
    }

    async fn reclaim_outbox(&self) -> Result<u64> {
        affected(self.pool(), "outbox reclaim", sql::RECLAIM_OUTBOX, &[]).await
    }

    async fn claim_outbox_owned(
        &self,
        batch: u32,
        lease: Duration,
        _owner: Option<i64>,
    ) -> Result<Vec<ClaimedOutbox>> {
        if batch == 0 {
            return Ok(Vec::new());
        }
        let (batch, lease_ms) = (batch as i64, millis(lease));
        let params: [&dyn ToSql; 2] = [&batch, &lease_ms];
        let rows = rows(self.pool(), "outbox claim", sql::CLAIM_OUTBOX, &params).await?;
        let keyed = rows
            .iter()
            .map(decode_outbox_claimed)
            .collect::<Result<Vec<_>>>()?;
        Ok(in_claim_order(keyed))
    }

    async fn renew_outbox(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        renew_many(
            self.pool(),
            "outbox renew",
            sql::RENEW_OUTBOX,
            claims,
            lease,
        )
        .await
    }

    async fn mark_sent(&self, claim: &ClaimRef) -> Result<bool> {
        fenced(
            self.pool(),
            "outbox sent",
            sql::MARK_SENT,
            claim,
            Extra::None,
        )
        .await
    }

    async fn mark_sent_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let pairs = renew_json(claims);
        let params: [&dyn ToSql; 1] = [&pairs.as_str()];
        let marked = rows(self.pool(), "outbox sent", sql::MARK_SENT_MANY, &params).await?;
        Ok(marked
            .iter()
            .filter_map(|r| r.get::<Uuid, _>("id"))
            .collect())
    }

    async fn retry_outbox(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
        fenced(
            self.pool(),
            "outbox retry",
            sql::RETRY_OUTBOX,
            claim,
            Extra::ErrorAndDelay(error, delay),
        )
        .await
    }

    async fn dead_outbox(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        fenced(
            self.pool(),
            "outbox dead",
            sql::DEAD_OUTBOX,
            claim,
            Extra::Error(error),
        )
        .await
    }

    async fn outbox_backlog(&self) -> Result<OutboxBacklog> {
        const OP: &str = "outbox backlog";
        let rows = rows(self.pool(), OP, sql::OUTBOX_BACKLOG, &[]).await?;
        let row = rows.first().ok_or_else(|| missing(OP, "pending"))?;
        let err = |e| db_err(OP, e);
        Ok(OutboxBacklog {
            pending: row.try_get("pending").map_err(err)?.unwrap_or(0),
            oldest_pending_age: row.try_get("age").map_err(err)?.unwrap_or(0.0),
        })
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog> {
        const OP: &str = "inbox backlog";
        let rows = rows(self.pool(), OP, sql::INBOX_BACKLOG, &[]).await?;
        let row = rows.first().ok_or_else(|| missing(OP, "push_age"))?;
        let err = |e| db_err(OP, e);
        Ok(InboxBacklog {
            push_oldest_pending_age: row.try_get("push_age").map_err(err)?.unwrap_or(0.0),
            pull_oldest_pending_age: row.try_get("pull_age").map_err(err)?.unwrap_or(0.0),
        })
    }

    async fn delete_old_outbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let (age, batch) = (age_ms(max_age), batch as i64);
        affected(
            self.pool(),
            "outbox retention",
            sql::DELETE_OLD_OUTBOX,
            &[&age, &batch],
        )
        .await
    }

    async fn delete_excess_outbox(&self, keep: u64, batch: u32) -> Result<u64> {
        let (keep, batch) = (i64::try_from(keep).unwrap_or(i64::MAX), batch as i64);
        affected(
            self.pool(),
            "outbox retention",
            sql::DELETE_EXCESS_OUTBOX,
            &[&keep, &batch],
        )
        .await
    }

    async fn delete_old_inbox(&self, max_age: Duration, batch: u32) -> Result<u64> {
        let (age, batch) = (age_ms(max_age), batch as i64);
        affected(
            self.pool(),
            "inbox retention",
            sql::DELETE_OLD_INBOX,
            &[&age, &batch],
        )
        .await
    }

    async fn list_dead_outbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let limit = limit as i64;
        let rows = rows(
            self.pool(),
            "list dead outbox",
            sql::LIST_DEAD_OUTBOX,
            &[&limit],
        )
        .await?;
        rows.iter()
            .map(|r| decode_dead("list dead outbox", r))
            .collect()
    }

    async fn list_dead_inbox(&self, limit: u32) -> Result<Vec<DeadRow>> {
        let limit = limit as i64;
        let rows = rows(
            self.pool(),
            "list dead inbox",
            sql::LIST_DEAD_INBOX,
            &[&limit],
        )
        .await?;
        rows.iter()
            .map(|r| decode_dead("list dead inbox", r))
            .collect()
    }

    async fn inbox_row(&self, id: Uuid) -> Result<Option<InboxMessage>> {
        let rows = rows(self.pool(), "inbox row", sql::INBOX_ROW, &[&id]).await?;
        rows.first()
            .map(|r| decode_inbox("inbox row", r))
            .transpose()
    }

    async fn insert_outbox(&self, row: &NewOutboxRow) -> Result<Uuid> {
        const OP: &str = "outbox insert";
        let (payload, headers) = outbox_json(row);
        let max_attempts = row.max_attempts.min(i32::MAX as u32) as i32;
        let params: [&dyn ToSql; 5] = [
            &row.topic.as_str(),
            &row.key.as_deref(),
            &payload.as_str(),
            &headers.as_str(),
            &max_attempts,
        ];
        let rows = rows(self.pool(), OP, sql::INSERT_OUTBOX, &params).await?;
        first_id(OP, &rows)?.ok_or_else(|| missing(OP, "id"))
    }

    async fn replay_outbox(&self, f: &ReplayFilter) -> Result<u64> {
        let ids = f.ids.as_deref().map(ids_json);
        let after = f.created_after.map(|t| t.naive_utc());
        let before = f.created_before.map(|t| t.naive_utc());
        let params: [&dyn ToSql; 6] = [
            &f.dead_only,
            &ids.as_deref(),
            &f.topic.as_deref(),
            &f.source.as_deref(),
            &after,
            &before,
        ];
        affected(self.pool(), "outbox replay", sql::REPLAY_OUTBOX, &params).await
    }

    async fn delete_outbox(&self, ids: &[Uuid]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let ids = ids_json(ids);
        affected(
            self.pool(),
            "outbox delete",
            sql::DELETE_OUTBOX,
            &[&ids.as_str()],
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use tiberius::{ColumnData, ColumnType, IntoSql};

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2026, 12, 2)
            .unwrap()
            .and_hms_milli_opt(h, m, s, 250)
            .unwrap()
    }

    /// An `OUTPUT inserted.*` row of `outbox`, as the server sends it (columns in table order).
    fn outbox_row(
        id: u128,
        key: Option<&'static str>,
        scheduled: NaiveDateTime,
        sequence: i64,
        headers: &'static str,
    ) -> Row {
        let s = |v: Option<&'static str>| ColumnData::String(v.map(Into::into));
        Row::builder()
            .column(
                "id",
                ColumnType::Guid,
                ColumnData::Guid(Some(Uuid::from_u128(id))),
            )
            .column("topic", ColumnType::NVarchar, s(Some("orders.created")))
            .column("key", ColumnType::NVarchar, s(key))
            .column("aggregate_type", ColumnType::NVarchar, s(None))
            .column(
                "payload",
                ColumnType::NVarchar,
                s(Some(r#"{"total":12.5,"items":[1,2]}"#)),
            )
            .column("headers", ColumnType::NVarchar, s(Some(headers)))
            .column("state", ColumnType::NVarchar, s(Some("processing")))
            .column("attempt", ColumnType::Int4, ColumnData::I32(Some(2)))
            .column("max_attempts", ColumnType::Int4, ColumnData::I32(Some(5)))
            .column("scheduled_at", ColumnType::Datetime2, scheduled.into_sql())
            .column("created_at", ColumnType::Datetime2, at(9, 0, 0).into_sql())
            .column("updated_at", ColumnType::Datetime2, at(10, 0, 0).into_sql())
            .column("claimed_at", ColumnType::Datetime2, at(10, 0, 0).into_sql())
            .column(
                "claim_token",
                ColumnType::Guid,
                ColumnData::Guid(Some(Uuid::from_u128(id + 1000))),
            )
            .column(
                "lease_expires_at",
                ColumnType::Datetime2,
                at(10, 5, 0).into_sql(),
            )
            .column("last_error", ColumnType::NVarchar, s(Some("timeout")))
            .column(
                "sequence",
                ColumnType::Int8,
                ColumnData::I64(Some(sequence)),
            )
            .build()
    }

    #[test]
    fn claimed_outbox_rows_decode_with_their_fence_and_utc_times() {
        let row = outbox_row(
            7,
            Some("order-1"),
            at(9, 30, 0),
            42,
            r#"{"x-source":"http","X-Correlation-Id":"c-1"}"#,
        );
        let ((scheduled, sequence), c) = decode_outbox_claimed(&row).unwrap();
        assert_eq!((scheduled, sequence), (at(9, 30, 0), 42));
        assert_eq!(
            c.claim,
            ClaimRef {
                id: Uuid::from_u128(7),
                token: Uuid::from_u128(1007)
            }
        );
        assert_eq!(c.row.id, Uuid::from_u128(7));
        assert_eq!(c.row.topic, "orders.created");
        assert_eq!(c.row.key.as_deref(), Some("order-1"));
        assert_eq!(c.row.aggregate_type, None);
        assert_eq!(
            c.row.payload,
            serde_json::json!({"total": 12.5, "items": [1, 2]})
        );
        assert_eq!(c.row.headers["x-source"], "http");
        assert_eq!((c.row.attempt, c.row.max_attempts), (2, 5));
        assert_eq!(
            c.row.created_at.to_rfc3339(),
            "2026-12-02T09:00:00.250+00:00"
        );
    }

    #[test]
    fn outbox_rows_with_non_object_headers_or_missing_token_are_handled() {
        // Headers another writer stored as a non-object read as {}; the claim must not fail.
        let (_, c) = decode_outbox_claimed(&outbox_row(1, None, at(9, 0, 0), 1, "[1,2]")).unwrap();
        assert!(c.row.headers.is_empty());
        assert_eq!(c.row.key, None);
        // A row without a claim token is not a claim: decoding fails instead of inventing one.
        let no_token = Row::builder()
            .column(
                "id",
                ColumnType::Guid,
                ColumnData::Guid(Some(Uuid::from_u128(1))),
            )
            .column("claim_token", ColumnType::Guid, ColumnData::Guid(None));
        let e = decode_outbox_claimed(&no_token.build()).unwrap_err();
        assert!(e.to_string().contains("claim_token"), "{e}");
    }

    #[test]
    fn claimed_rows_come_back_in_scheduled_then_sequence_order() {
        let rows = [
            outbox_row(3, Some("b"), at(9, 0, 1), 1, "{}"),
            outbox_row(1, Some("a"), at(9, 0, 0), 9, "{}"),
            outbox_row(2, None, at(9, 0, 0), 10, "{}"),
        ];
        let keyed = rows
            .iter()
            .map(decode_outbox_claimed)
            .collect::<Result<Vec<_>>>()
            .unwrap();
        let ids: Vec<u128> = in_claim_order(keyed)
            .iter()
            .map(|c| c.row.id.as_u128())
            .collect();
        assert_eq!(ids, vec![1, 2, 3]);
    }

    #[test]
    fn dead_rows_decode_name_key_and_time() {
        let row = Row::builder()
            .column(
                "id",
                ColumnType::Guid,
                ColumnData::Guid(Some(Uuid::from_u128(5))),
            )
            .column(
                "name",
                ColumnType::NVarchar,
                ColumnData::String(Some("webhooks".into())),
            )
            .column("key", ColumnType::NVarchar, ColumnData::String(None))
            .column("attempt", ColumnType::Int4, ColumnData::I32(Some(5)))
            .column(
                "last_error",
                ColumnType::NVarchar,
                ColumnData::String(Some("HTTP 500".into())),
            )
            .column("updated_at", ColumnType::Datetime2, at(11, 0, 0).into_sql())
            .build();
        let d = decode_dead("list dead outbox", &row).unwrap();
        assert_eq!(d.topic_or_source, "webhooks");
        assert_eq!(
            (d.key, d.attempt, d.last_error.as_deref()),
            (None, 5, Some("HTTP 500"))
        );
        assert_eq!(d.updated_at.to_rfc3339(), "2026-12-02T11:00:00.250+00:00");
    }

    #[test]
    fn id_lists_are_the_json_arrays_openjson_reads() {
        let v: Value =
            serde_json::from_str(&ids_json(&[Uuid::from_u128(1), Uuid::from_u128(2)])).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                "00000000-0000-0000-0000-000000000001",
                "00000000-0000-0000-0000-000000000002"
            ])
        );
        assert_eq!(ids_json(&[]), "[]");
    }

    #[test]
    fn retention_ages_fit_dateadd_seconds() {
        assert_eq!(age_ms(Duration::from_millis(86_400_000)), 86_400_000);
        assert_eq!(age_ms(Duration::MAX) / 1000, i32::MAX as i64);
    }

    #[test]
    fn relay_claims_take_the_reference_applocks_and_fences() {
        for (name, text, lock) in [
            ("CLAIM_PUSH", sql::CLAIM_PUSH, sql::INBOX_CLAIM_LOCK),
            ("CLAIM_OUTBOX", sql::CLAIM_OUTBOX, sql::OUTBOX_CLAIM_LOCK),
        ] {
            let applock = format!(
                "EXEC @qbLock = sp_getapplock @Resource = N'{lock}', @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;"
            );
            let (lock_at, begin_at) = (
                text.find(&applock)
                    .unwrap_or_else(|| panic!("{name}: {applock}")),
                text.find("BEGIN TRANSACTION;").unwrap(),
            );
            assert!(
                begin_at < lock_at,
                "{name}: the applock is owned by the transaction"
            );
            assert!(text.contains("THROW 51000,"), "{name}");
            assert!(
                text.find("ROLLBACK TRANSACTION").unwrap() < text.find("THROW 51000").unwrap(),
                "{name}"
            );
            assert!(
                lock_at
                    < text
                        .find(" FROM inbox")
                        .or(text.find(" FROM outbox"))
                        .unwrap(),
                "{name}: the lock comes before any read"
            );
            assert!(text.contains("WITH (UPDLOCK, READPAST, ROWLOCK)"), "{name}");
            assert!(
                text.trim_end().ends_with("COMMIT TRANSACTION;"),
                "{name}: the lock is held until the commit"
            );
            let body = &text[text.find("BEGIN TRANSACTION").unwrap()..];
            assert!(
                !body.contains("@P"),
                "{name}: the body uses only the @qb variables"
            );
        }
        // The busy aggregates are read in their own statement, before the claim.
        let push = sql::CLAIM_PUSH;
        assert!(push.find("INSERT INTO @qbBusy").unwrap() < push.find("WITH pick").unwrap());
        let busy =
            &push[push.find("INSERT INTO @qbBusy").unwrap()..push.find("WITH pick").unwrap()];
        assert!(
            !busy.contains("READPAST"),
            "the busy read must see rows others hold"
        );
        // The key subquery reads without READPAST.
        let key_rule = &sql::CLAIM_OUTBOX[sql::CLAIM_OUTBOX.find("NOT EXISTS").unwrap()
            ..sql::CLAIM_OUTBOX.find("ORDER BY").unwrap()];
        assert!(
            !key_rule.contains("READPAST")
                && key_rule
                    .contains("b.state IN ('pending', 'processing') AND b.sequence < c.sequence")
        );
        let push_fence = "id = @P1 AND consumption = 'push' AND state = 'processing' AND claim_token = @P2 AND lease_expires_at > SYSUTCDATETIME()";
        let outbox_fence = "id = @P1 AND state = 'processing' AND claim_token = @P2 AND lease_expires_at > SYSUTCDATETIME()";
        assert!(sql::DEAD_PUSH.ends_with(push_fence));
        assert!(sql::FORWARD_PUSH.contains(push_fence));
        for (name, s) in [
            ("MARK_SENT", sql::MARK_SENT),
            ("RETRY_OUTBOX", sql::RETRY_OUTBOX),
            ("DEAD_OUTBOX", sql::DEAD_OUTBOX),
        ] {
            assert!(s.ends_with(outbox_fence), "{name} ends with the fence");
        }
        // The renewal applies the same fence per pair, on outbox rows only.
        let renew = sql::RENEW_OUTBOX;
        assert!(
            renew.contains("FROM outbox AS t WITH (ROWLOCK)")
                && renew.contains("ON c.id = t.id AND c.token = t.claim_token")
        );
        assert!(
            renew.ends_with(
                "WHERE t.state = 'processing' AND t.lease_expires_at > SYSUTCDATETIME();"
            ),
            "{renew}"
        );
        assert!(
            sql::RENEW.contains("FROM inbox AS t")
                && sql::RENEW.contains("t.consumption = 'pull' AND t.state = 'processing'")
        );
        // The forward inserts only after the fenced mark matched, inside one transaction.
        let f = sql::FORWARD_PUSH;
        let (begin, mark, check, insert, commit) = (
            f.find("BEGIN TRANSACTION").unwrap(),
            f.find("UPDATE inbox SET state = 'processed'").unwrap(),
            f.find("IF @qbMarked = 1").unwrap(),
            f.find("INSERT INTO outbox").unwrap(),
            f.find("COMMIT TRANSACTION").unwrap(),
        );
        assert!(begin < mark && mark < check && check < insert && insert < commit);
    }
}
