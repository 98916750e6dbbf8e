//! Every T-SQL statement the SQL Server backend sends, as constants, so the syntax-check test
//! (`core/tests/sqlserver_syntax.rs`) can enumerate them with [`statements`].
//!
//! Rules shared by all of them (proto-docs/sql-contract.md):
//! - every time comes from `SYSUTCDATETIME()` (columns are `DATETIME2` in UTC), never from the
//!   application; a lease comparison is against the database clock at the statement;
//! - parameters are positional (`@P1`…), as tiberius binds them through `sp_executesql`;
//!   local variables are prefixed `@qb` so they can never clash with a bound name (Msg 134);
//! - millisecond offsets are added as seconds plus the remainder, because `DATEADD` takes an
//!   `INT` and a plain millisecond count overflows after 24.8 days.

/// `DATEADD` of `$ms` (a `BIGINT` expression in milliseconds) to the database clock; with
/// `"-"` first, `$ms` before it (the caller bounds `$ms` so its seconds fit the INT).
macro_rules! now_plus_ms {
    ($ms:literal) => {
        now_plus_ms!("", $ms)
    };
    ($sign:literal, $ms:literal) => {
        concat!(
            "DATEADD(millisecond, ",
            $sign,
            "(",
            $ms,
            " % 1000), DATEADD(second, ",
            $sign,
            "(",
            $ms,
            " / 1000), SYSUTCDATETIME()))"
        )
    };
}

/// The fence shared by every write on a claimed inbox row (the same predicate as PostgreSQL):
/// `@P1` = id, `@P2` = claim token; `pull` rows unless another consumption is named.
macro_rules! fence {
    () => {
        fence!("pull")
    };
    ($consumption:literal) => {
        concat!(
            "id = @P1 AND consumption = '",
            $consumption,
            "' AND state = 'processing' AND claim_token = @P2 AND lease_expires_at > SYSUTCDATETIME()"
        )
    };
}

/// The update of an inbox claim after its `pick` CTE: each picked row locked with `UPDLOCK,
/// READPAST, ROWLOCK`, a new token and lease (`@qbLeaseMs`), the rows returned by `OUTPUT`; the
/// caller appends the re-checked row predicate.
macro_rules! claim_inbox_update {
    () => {
        concat!(
            "
UPDATE i
   SET state = 'processing', claim_token = NEWID(), claimed_at = SYSUTCDATETIME(),
       lease_expires_at = ",
            now_plus_ms!("@qbLeaseMs"),
            "
OUTPUT inserted.*
  FROM inbox AS i WITH (UPDLOCK, READPAST, ROWLOCK)
  JOIN pick AS k ON k.id = i.id
 WHERE "
        )
    };
}

/// The fence of many claims at once: `@P1` is a JSON array of `{"id": …, "token": …}`. A
/// pull row of `inbox` unless `@on` names the table and the extra row predicate.
macro_rules! fenced_many {
    (@on $table:literal, $only:literal; $($set:tt)+) => {
        concat!(
            "UPDATE t SET ",
            $($set)+,
            "
OUTPUT inserted.id
  FROM ",
            $table,
            " AS t WITH (ROWLOCK)
  JOIN OPENJSON(@P1) WITH (id UNIQUEIDENTIFIER '$.id', token UNIQUEIDENTIFIER '$.token') AS c
    ON c.id = t.id AND c.token = t.claim_token
 WHERE ",
            $only,
            "t.state = 'processing' AND t.lease_expires_at > SYSUTCDATETIME();"
        )
    };
    ($($set:tt)+) => {
        fenced_many!(@on "inbox", "t.consumption = 'pull' AND "; $($set)+)
    };
}

/// Sent once on every new connection. The ODBC login flag tiberius sets already turns the
/// ANSI options on; they are repeated here because a write to a table with a filtered index
/// fails (Msg 1934) without them, and the claim requires READ COMMITTED (proto-docs/sql-contract.md). XACT_ABORT
/// makes any error roll the whole transaction back, as an error does on PostgreSQL.
pub const SESSION_SETUP: &str =
    "SET QUOTED_IDENTIFIER ON; SET ANSI_NULLS ON; SET ANSI_PADDING ON; SET ANSI_WARNINGS ON; \
SET ARITHABORT ON; SET CONCAT_NULL_YIELDS_NULL ON; SET NUMERIC_ROUNDABORT OFF; SET XACT_ABORT ON; \
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;";

/// Inbox insert with deduplication. `UPDLOCK, HOLDLOCK` on the existence check takes a key-range
/// lock on `(source, idempotency_key)`, so two concurrent inserts of one key serialise instead
/// of one failing on the unique constraint (which the store still maps to `Duplicate`).
/// Returns one row: the id and whether this call inserted it.
/// `@P1` source, `@P2` key, `@P3` aggregate, `@P4` event type, `@P5` payload JSON, `@P6`
/// headers JSON, `@P7` correlation id, `@P8` consumption, `@P9` dead reason or NULL,
/// `@P10` delay in milliseconds, `@P11` traceparent, `@P12` tracestate.
pub const INSERT: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbIds TABLE (id UNIQUEIDENTIFIER NOT NULL);
INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
                   correlation_id, consumption, state, last_error, scheduled_at,
                   traceparent, tracestate)
OUTPUT inserted.id INTO @qbIds (id)
SELECT @P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8,
       CASE WHEN @P9 IS NULL THEN 'pending' ELSE 'dead' END, @P9, ",
    now_plus_ms!("@P10"),
    ", @P11, @P12
 WHERE NOT EXISTS (SELECT 1 FROM inbox WITH (UPDLOCK, HOLDLOCK) WHERE source = @P1 AND idempotency_key = @P2);
SELECT id, CAST(1 AS BIT) AS is_new FROM @qbIds
UNION ALL
SELECT id, CAST(0 AS BIT) AS is_new FROM inbox
 WHERE source = @P1 AND idempotency_key = @P2 AND NOT EXISTS (SELECT 1 FROM @qbIds);"
);

/// The stored id of `(source, idempotency_key)` (after a unique violation).
pub const LOOKUP_ID: &str = "SELECT id FROM inbox WHERE source = @P1 AND idempotency_key = @P2";

/// The pull claim (proto-docs/sql-contract.md), one batch in its own transaction:
/// 1. READ COMMITTED, `BEGIN TRANSACTION`;
/// 2. `sp_getapplock` on the source (Exclusive, owner Transaction, 10 s): claims of one source
///    take turns, so the head rule below sees every committed claim; a negative result rolls
///    back and throws 51000, which the store reports as a transient error (the worker backs
///    off and retries the whole call, never failing a message);
/// 3. candidates: due pending rows (highest `priority` first, migration 10, from
///    `idx_inbox_pull_pending_priority`) and expired processing rows, each scan bounded by
///    `@qbCandLimit` and skipping rows other transactions hold (`READPAST`; with
///    `READCOMMITTEDLOCK`, because READPAST alone is refused when the database has
///    READ_COMMITTED_SNAPSHOT ON, the Azure SQL default);
/// 4. the aggregate head rule of the PostgreSQL claim (`postgres/pull.rs`), as the same two
///    index-bounded `NOT EXISTS`: a row is claimable only if no earlier row of its source and
///    aggregate is itself claimable now (due pending, or processing) (`idx_inbox_pull_aggregate`)
///    and no other row of it holds a live lease (`idx_inbox_pull_busy`). A row in retry
///    backoff is not due, so it blocks nothing ("a pull retry lets later messages pass",
///    proto-docs/states.md#ordering). These reads have no READPAST, so they wait for (rather than skip) a row
///    another transaction is changing;
/// 5. the update locks each picked row with `UPDLOCK, READPAST, ROWLOCK` and re-checks the row
///    predicate, so two claims can never both take one row; `OUTPUT inserted.*` returns them.
///
/// `@P1` source, `@P2` batch, `@P3` lease in milliseconds, `@P4` candidate limit.
pub const CLAIM: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbSource NVARCHAR(255) = @P1;
DECLARE @qbBatch INT = @P2;
DECLARE @qbLeaseMs BIGINT = @P3;
DECLARE @qbCandLimit INT = @P4;
DECLARE @qbLock INT;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
BEGIN TRANSACTION;
EXEC @qbLock = sp_getapplock @Resource = @qbSource, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;
IF @qbLock < 0
BEGIN
    ROLLBACK TRANSACTION;
    THROW 51000, 'inbox pull claim: sp_getapplock did not acquire the per-source claim lock', 1;
END;
WITH cand AS (
    SELECT p.id, p.aggregate_id, p.sequence, p.scheduled_at, p.priority FROM (
        SELECT TOP (@qbCandLimit) id, aggregate_id, sequence, scheduled_at, priority FROM inbox WITH (READCOMMITTEDLOCK, READPAST)
         WHERE consumption = 'pull' AND source = @qbSource AND state = 'pending' AND scheduled_at <= SYSUTCDATETIME()
         ORDER BY priority DESC, scheduled_at, sequence) AS p
    UNION ALL
    SELECT e.id, e.aggregate_id, e.sequence, e.scheduled_at, e.priority FROM (
        SELECT TOP (@qbCandLimit) id, aggregate_id, sequence, scheduled_at, priority FROM inbox WITH (READCOMMITTEDLOCK, READPAST)
         WHERE consumption = 'pull' AND source = @qbSource AND state = 'processing' AND lease_expires_at <= SYSUTCDATETIME()
         ORDER BY lease_expires_at) AS e
), pick AS (
    SELECT TOP (@qbBatch) c.id FROM cand AS c
     WHERE c.aggregate_id IS NULL OR (
           NOT EXISTS (SELECT 1 FROM inbox AS b
                        WHERE b.consumption = 'pull' AND b.source = @qbSource AND b.aggregate_id = c.aggregate_id
                          AND b.state IN ('pending', 'processing') AND b.sequence < c.sequence
                          AND (b.state = 'processing' OR b.scheduled_at <= SYSUTCDATETIME()))
       AND NOT EXISTS (SELECT 1 FROM inbox AS b
                        WHERE b.consumption = 'pull' AND b.source = @qbSource AND b.aggregate_id = c.aggregate_id
                          AND b.state = 'processing' AND b.id <> c.id AND b.lease_expires_at > SYSUTCDATETIME()))
     ORDER BY c.priority DESC, c.scheduled_at, c.sequence
)",
    claim_inbox_update!(),
    "i.consumption = 'pull' AND i.source = @qbSource
   AND ((i.state = 'pending' AND i.scheduled_at <= SYSUTCDATETIME())
     OR (i.state = 'processing' AND i.lease_expires_at <= SYSUTCDATETIME()));
COMMIT TRANSACTION;"
);

/// Renews many claims at once: `@P1` is a JSON array of `{"id": …, "token": …}`, `@P2` the
/// lease in milliseconds. Returns the ids it renewed (live claims only).
pub const RENEW: &str = fenced_many!("lease_expires_at = ", now_plus_ms!("@P2"));

/// Completes many claims in one statement (the worker batches plain completions); returns
/// the ids it completed, the same fence as [`COMPLETE`] per row.
pub const COMPLETE_MANY: &str =
    fenced_many!("state = 'processed', processed_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL");

/// Fenced completion (autocommit or inside a handler's transaction).
pub const COMPLETE: &str = concat!(
    "UPDATE inbox SET state = 'processed', processed_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL WHERE ",
    fence!()
);

/// Fenced retry: `@P3` error, `@P4` delay in milliseconds.
pub const RETRY: &str = concat!(
    "UPDATE inbox SET state = 'pending', attempt = attempt + 1, last_error = @P3, claim_token = NULL, lease_expires_at = NULL, scheduled_at = ",
    now_plus_ms!("@P4"),
    " WHERE ",
    fence!()
);

/// Fenced dead-letter: `@P3` error.
pub const DEAD: &str =
    concat!("UPDATE inbox SET state = 'dead', last_error = @P3, claim_token = NULL, lease_expires_at = NULL WHERE ", fence!());

/// Fenced release: back to pending at once, no attempt spent.
pub const RELEASE: &str = concat!(
    "UPDATE inbox SET state = 'pending', claim_token = NULL, lease_expires_at = NULL, claimed_at = NULL WHERE ",
    fence!()
);

/// A handler's transaction. Transaction control is always sent as a plain batch
/// (`simple_query`), never through `sp_executesql`, where a BEGIN without its COMMIT in the
/// same call fails with Msg 266.
pub const BEGIN: &str = "BEGIN TRANSACTION;";
pub const COMMIT: &str = "COMMIT TRANSACTION;";
/// After an error XACT_ABORT has already rolled back; rolling back twice is not an error.
pub const ROLLBACK: &str = "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;";

/// Which QueueBox tables exist (1/0 each).
pub const SCHEMA_CHECK: &str =
    "SELECT CASE WHEN OBJECT_ID(N'inbox', N'U') IS NULL THEN 0 ELSE 1 END AS has_inbox, \
CASE WHEN OBJECT_ID(N'outbox', N'U') IS NULL THEN 0 ELSE 1 END AS has_outbox, \
CASE WHEN OBJECT_ID(N'queuebox_schema_history', N'U') IS NULL THEN 0 ELSE 1 END AS has_history";

/// Concurrent `migrate` runs take turns on this session-owned application lock (60 s).
pub const MIGRATE_LOCK: &str = "SET NOCOUNT ON;
DECLARE @qbLock INT;
EXEC @qbLock = sp_getapplock @Resource = N'queuebox_migrate', @LockMode = 'Exclusive', @LockOwner = 'Session', @LockTimeout = 60000;
SELECT @qbLock AS result;";
pub const MIGRATE_UNLOCK: &str =
    "EXEC sp_releaseapplock @Resource = N'queuebox_migrate', @LockOwner = 'Session';";

pub const HISTORY_CREATE: &str = "IF OBJECT_ID(N'queuebox_schema_history', N'U') IS NULL
CREATE TABLE queuebox_schema_history (
    version    INT           NOT NULL CONSTRAINT pk_queuebox_schema_history PRIMARY KEY,
    name       NVARCHAR(255) NOT NULL,
    checksum   VARCHAR(64)   NOT NULL,
    applied_at DATETIME2     NOT NULL CONSTRAINT df_queuebox_schema_history_applied_at DEFAULT SYSUTCDATETIME()
);";
pub const HISTORY_SELECT: &str =
    "SELECT version, name, checksum FROM queuebox_schema_history ORDER BY version";
pub const HISTORY_INSERT: &str =
    "INSERT INTO queuebox_schema_history (version, name, checksum) VALUES (@P1, @P2, @P3)";
pub const HISTORY_MAX: &str = "SELECT MAX(version) AS version FROM queuebox_schema_history";
/// The migration transaction; XACT_ABORT makes a failing DDL statement roll it all back.
pub const MIGRATE_BEGIN: &str = "SET XACT_ABORT ON; BEGIN TRANSACTION;";

// ---- The relay role (`store::relay::RelayStore`, proto-docs/states.md) ----

/// The fence of every write on a claimed outbox row (the PostgreSQL `OUTBOX_FENCE`).
macro_rules! outbox_fence {
    () => {
        "id = @P1 AND state = 'processing' AND claim_token = @P2 AND lease_expires_at > SYSUTCDATETIME()"
    };
}

/// The outbox insert of a forward and of [`INSERT_OUTBOX`]: the new id goes into `@qbIds`
/// (`OUTPUT … INTO`, which a trigger on `outbox` cannot break). `$p` are the five parameter
/// names: topic, key, payload JSON, headers JSON, max attempts.
macro_rules! outbox_insert {
    ($t:literal, $k:literal, $p:literal, $h:literal, $m:literal) => {
        concat!(
            "INSERT INTO outbox (topic, [key], payload, headers, max_attempts) OUTPUT inserted.id INTO @qbIds (id) VALUES (",
            $t, ", ", $k, ", ", $p, ", ", $h, ", ", $m, ");"
        )
    };
}

/// The applock resources of the relay claims, named after the tables.
pub const OUTBOX_CLAIM_LOCK: &str = "queuebox_outbox_claim_outbox";
pub const INBOX_CLAIM_LOCK: &str = "queuebox_inbox_claim_inbox";

/// Push rows whose lease ran out (or has none) go back to pending.
pub const RECLAIM_PUSH: &str = "UPDATE inbox SET state = 'pending', claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE consumption = 'push' AND state = 'processing'
   AND (lease_expires_at IS NULL OR lease_expires_at <= SYSUTCDATETIME())";

/// The push claim, one batch in its own transaction:
/// 1. `sp_getapplock` on `queuebox_inbox_claim_inbox` (Exclusive, owner Transaction, 10 s,
///    held until the commit); a negative result rolls back and throws 51000 (transient);
/// 2. the busy aggregates (a push row in processing, any source) are read in a separate
///    statement into `@qbBusy`, without READPAST, so a row another transaction holds is
///    waited for rather than missed;
/// 3. the claim takes due pending push rows in `(scheduled_at, sequence)` order, the head of
///    each aggregate only: not busy, and no earlier pending push row of the aggregate (the
///    PostgreSQL rule of `postgres/relay.rs`; the key subquery reads without READPAST). The
///    scan skips rows others hold (`READCOMMITTEDLOCK, READPAST`); the update locks each row
///    with `UPDLOCK, READPAST, ROWLOCK` and re-checks it.
///
/// `@P1` batch, `@P2` lease in milliseconds.
pub const CLAIM_PUSH: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbBatch INT = @P1;
DECLARE @qbLeaseMs BIGINT = @P2;
DECLARE @qbLock INT;
DECLARE @qbBusy TABLE (aggregate_id NVARCHAR(255) NOT NULL PRIMARY KEY);
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
BEGIN TRANSACTION;
EXEC @qbLock = sp_getapplock @Resource = N'queuebox_inbox_claim_inbox', @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;
IF @qbLock < 0
BEGIN
    ROLLBACK TRANSACTION;
    THROW 51000, 'inbox relay claim: Could not take the claim lock ''queuebox_inbox_claim_inbox''. sp_getapplock returned a negative result', 1;
END;
INSERT INTO @qbBusy (aggregate_id)
SELECT DISTINCT aggregate_id FROM inbox
 WHERE consumption = 'push' AND state = 'processing' AND aggregate_id IS NOT NULL;
WITH pick AS (
    SELECT TOP (@qbBatch) c.id FROM inbox AS c WITH (READCOMMITTEDLOCK, READPAST)
     WHERE c.consumption = 'push' AND c.state = 'pending' AND c.scheduled_at <= SYSUTCDATETIME()
       AND (c.aggregate_id IS NULL OR (
            NOT EXISTS (SELECT 1 FROM @qbBusy AS y WHERE y.aggregate_id = c.aggregate_id)
        AND NOT EXISTS (SELECT 1 FROM inbox AS b
                         WHERE b.consumption = 'push' AND b.aggregate_id = c.aggregate_id AND b.id <> c.id
                           AND b.state IN ('pending', 'processing') AND b.sequence < c.sequence)))
     ORDER BY c.scheduled_at, c.sequence
)",
    claim_inbox_update!(),
    "i.consumption = 'push' AND i.state = 'pending' AND i.scheduled_at <= SYSUTCDATETIME();
COMMIT TRANSACTION;"
);

/// Forward a claimed push row, one transaction: the fenced mark first (it
/// locks the inbox row), then the outbox insert only if the mark matched. No id back means the
/// claim was lost and nothing was inserted. `@P1` id, `@P2` token, `@P3`..`@P7` the outbox row.
pub const FORWARD_PUSH: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbIds TABLE (id UNIQUEIDENTIFIER NOT NULL);
DECLARE @qbMarked INT;
BEGIN TRANSACTION;
UPDATE inbox SET state = 'processed', processed_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL WHERE ",
    fence!("push"),
    ";
SET @qbMarked = @@ROWCOUNT;
IF @qbMarked = 1
BEGIN
    ",
    outbox_insert!("@P3", "@P4", "@P5", "@P6", "@P7"),
    "
END;
COMMIT TRANSACTION;
SELECT id FROM @qbIds;"
);

/// Renews many push claims: `@P1` the claims as JSON (`[{"id", "token"}, …]`), `@P2` the lease
/// in milliseconds; outputs the ids renewed.
pub const RENEW_PUSH: &str = fenced_many!(@on "inbox", "t.consumption = 'push' AND ";
    "lease_expires_at = ", now_plus_ms!("@P2"));

/// Fenced dead-letter of a push row: `@P3` error.
pub const DEAD_PUSH: &str =
    concat!("UPDATE inbox SET state = 'dead', last_error = @P3, claim_token = NULL, lease_expires_at = NULL WHERE ", fence!("push"));

/// Processing outbox rows whose lease ran out go back to pending; no attempt is spent.
pub const RECLAIM_OUTBOX: &str = "UPDATE outbox SET state = 'pending', claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL, updated_at = SYSUTCDATETIME()
 WHERE state = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= SYSUTCDATETIME())";

/// The outbox claim, one batch in its own transaction: `sp_getapplock` on
/// `queuebox_outbox_claim_outbox` (Exclusive, owner Transaction, 10 s, held until the commit;
/// 51000 on failure), then due pending rows in `(scheduled_at, sequence)` order under the key
/// head rule: a row with a non-empty key only when no row of that key with a lower sequence is
/// pending or processing, whatever its schedule or lease. The key subquery reads without
/// READPAST, so it sees rows others hold; the scan and the update skip them.
///
/// `@P1` batch, `@P2` lease in milliseconds.
pub const CLAIM_OUTBOX: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbBatch INT = @P1;
DECLARE @qbLeaseMs BIGINT = @P2;
DECLARE @qbLock INT;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
BEGIN TRANSACTION;
EXEC @qbLock = sp_getapplock @Resource = N'queuebox_outbox_claim_outbox', @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;
IF @qbLock < 0
BEGIN
    ROLLBACK TRANSACTION;
    THROW 51000, 'outbox claim: Could not take the claim lock ''queuebox_outbox_claim_outbox''. sp_getapplock returned a negative result', 1;
END;
WITH pick AS (
    SELECT TOP (@qbBatch) c.id FROM outbox AS c WITH (READCOMMITTEDLOCK, READPAST)
     WHERE c.state = 'pending' AND c.scheduled_at <= SYSUTCDATETIME()
       AND (c.[key] IS NULL OR c.[key] = '' OR NOT EXISTS (
            SELECT 1 FROM outbox AS b
             WHERE b.[key] = c.[key] AND b.state IN ('pending', 'processing') AND b.sequence < c.sequence))
     ORDER BY c.scheduled_at, c.sequence
)
UPDATE o
   SET state = 'processing', claim_token = NEWID(), claimed_at = SYSUTCDATETIME(), updated_at = SYSUTCDATETIME(),
       lease_expires_at = ",
    now_plus_ms!("@qbLeaseMs"),
    "
OUTPUT inserted.*
  FROM outbox AS o WITH (UPDLOCK, READPAST, ROWLOCK)
  JOIN pick AS k ON k.id = o.id
 WHERE o.state = 'pending' AND o.scheduled_at <= SYSUTCDATETIME();
COMMIT TRANSACTION;"
);

/// Renews many outbox claims at once (`@P1` the JSON pairs, `@P2` the lease in
/// milliseconds); returns the ids it renewed, live claims only (the outbox fence per row).
pub const RENEW_OUTBOX: &str =
    fenced_many!(@on "outbox", ""; "lease_expires_at = ", now_plus_ms!("@P2"));

/// Many fenced delivery successes: `@P1` the claims as JSON (`[{"id", "token"}, …]`); outputs
/// the ids marked.
pub const MARK_SENT_MANY: &str = fenced_many!(@on "outbox", "";
    "state = 'sent', updated_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL");

/// Fenced delivery success.
pub const MARK_SENT: &str = concat!(
    "UPDATE outbox SET state = 'sent', updated_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL WHERE ",
    outbox_fence!()
);

/// Fenced retry: `@P3` error, `@P4` delay in milliseconds.
pub const RETRY_OUTBOX: &str = concat!(
    "UPDATE outbox SET state = 'pending', attempt = attempt + 1, last_error = @P3, claimed_at = NULL, claim_token = NULL,
       lease_expires_at = NULL, updated_at = SYSUTCDATETIME(), scheduled_at = ",
    now_plus_ms!("@P4"),
    " WHERE ",
    outbox_fence!()
);

/// Fenced dead-letter: `@P3` error.
pub const DEAD_OUTBOX: &str = concat!(
    "UPDATE outbox SET state = 'dead', last_error = @P3, claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL,
       updated_at = SYSUTCDATETIME() WHERE ",
    outbox_fence!()
);

/// The outbox gauges, by the database clock: pending rows and the age (seconds) of the
/// oldest one (0 when none).
pub const OUTBOX_BACKLOG: &str = "SELECT COUNT_BIG(*) AS pending,
       CAST(COALESCE(DATEDIFF_BIG(millisecond, MIN(created_at), SYSUTCDATETIME()), 0) AS FLOAT) / 1000.0 AS age
  FROM outbox WHERE state = 'pending'";

/// The inbox gauges: the age (seconds) of the oldest pending push row and of the oldest
/// pending pull row (0 when none).
pub const INBOX_BACKLOG: &str = "SELECT
       CAST(COALESCE(DATEDIFF_BIG(millisecond, MIN(CASE WHEN consumption = 'push' THEN created_at END), SYSUTCDATETIME()), 0) AS FLOAT) / 1000.0 AS push_age,
       CAST(COALESCE(DATEDIFF_BIG(millisecond, MIN(CASE WHEN consumption = 'pull' THEN created_at END), SYSUTCDATETIME()), 0) AS FLOAT) / 1000.0 AS pull_age
  FROM inbox WHERE state = 'pending'";

/// Retention by age: at most `@P2` terminal outbox rows last updated more than `@P1` ms ago.
pub const DELETE_OLD_OUTBOX: &str = concat!(
    "DELETE FROM outbox WHERE state IN ('sent', 'dead', 'cancelled') AND id IN (
    SELECT TOP (@P2) id FROM outbox WHERE state IN ('sent', 'dead', 'cancelled') AND updated_at < ",
    now_plus_ms!("-", "@P1"),
    ")"
);

/// Retention by count: at most `@P2` terminal outbox rows beyond the newest `@P1` of each state.
pub const DELETE_EXCESS_OUTBOX: &str =
    "DELETE FROM outbox WHERE state IN ('sent', 'dead', 'cancelled') AND id IN (
    SELECT TOP (@P2) r.id FROM (
        SELECT id, ROW_NUMBER() OVER (PARTITION BY state ORDER BY updated_at DESC, id DESC) AS rn
          FROM outbox WHERE state IN ('sent', 'dead', 'cancelled')) AS r
     WHERE r.rn > @P1)";

/// Retention of the inbox: at most `@P2` terminal rows created more than `@P1` ms ago.
pub const DELETE_OLD_INBOX: &str = concat!(
    "DELETE FROM inbox WHERE state IN ('processed', 'dead', 'cancelled') AND id IN (
    SELECT TOP (@P2) id FROM inbox WHERE state IN ('processed', 'dead', 'cancelled') AND created_at < ",
    now_plus_ms!("-", "@P1"),
    ")"
);

/// The newest `@P1` dead outbox rows.
pub const LIST_DEAD_OUTBOX: &str =
    "SELECT TOP (@P1) id, topic AS name, [key] AS [key], attempt, last_error, updated_at
  FROM outbox WHERE state = 'dead' ORDER BY updated_at DESC";

/// The newest `@P1` dead inbox rows.
pub const LIST_DEAD_INBOX: &str =
    "SELECT TOP (@P1) id, source AS name, idempotency_key AS [key], attempt, last_error,
       COALESCE(processed_at, created_at) AS updated_at
  FROM inbox WHERE state = 'dead' ORDER BY created_at DESC";

/// One inbox row by id (`@P1`), any state.
pub const INBOX_ROW: &str = "SELECT id, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt, correlation_id, created_at,
       traceparent, tracestate
  FROM inbox WHERE id = @P1";

/// A new outbox row (`@P1` topic, `@P2` key, `@P3` payload JSON, `@P4` headers JSON, `@P5`
/// max attempts); returns its id.
pub const INSERT_OUTBOX: &str = concat!(
    "SET NOCOUNT ON;
DECLARE @qbIds TABLE (id UNIQUEIDENTIFIER NOT NULL);
",
    outbox_insert!("@P1", "@P2", "@P3", "@P4", "@P5"),
    "
SELECT id FROM @qbIds;"
);

/// Admin replay: matching `sent`/`dead` rows back to pending with `attempt = 0`.
/// `@P1` dead only (BIT), `@P2` ids as a JSON array or NULL, `@P3` topic, `@P4` the
/// `x-source` header, `@P5` created after, `@P6` created before (each NULL = any).
pub const REPLAY_OUTBOX: &str = "UPDATE outbox SET state = 'pending', attempt = 0, last_error = NULL, scheduled_at = SYSUTCDATETIME(),
       claimed_at = NULL, claim_token = NULL, lease_expires_at = NULL, updated_at = SYSUTCDATETIME()
 WHERE (state = 'dead' OR (state = 'sent' AND @P1 = 0))
   AND (@P2 IS NULL OR id IN (SELECT j.id FROM OPENJSON(@P2) WITH (id UNIQUEIDENTIFIER '$') AS j))
   AND (@P3 IS NULL OR topic = @P3)
   AND (@P4 IS NULL OR JSON_VALUE(headers, '$.\"x-source\"') = @P4)
   AND (@P5 IS NULL OR created_at > @P5)
   AND (@P6 IS NULL OR created_at < @P6)";

/// Deletes the outbox rows of `@P1` (a JSON array of ids) unless they are being delivered.
pub const DELETE_OUTBOX: &str = "DELETE FROM outbox WHERE state <> 'processing'
   AND id IN (SELECT j.id FROM OPENJSON(@P1) WITH (id UNIQUEIDENTIFIER '$') AS j)";

// ---- the application's transaction (`crate::app_tx`) ----
// Run by the application's own driver inside its own transaction (the core renders the
// `@P` markers in the driver's style). Every parameter is bound as text (or NULL), so the
// casts are in the SQL. The driver's session must count rows (no `SET NOCOUNT ON`).

/// The fenced completion on the application's connection: the fence of [`COMPLETE`], with
/// `@P1` id and `@P2` claim token as text. One row affected, or the claim was lost.
pub const APP_COMPLETE: &str = "UPDATE inbox SET state = 'processed', processed_at = SYSUTCDATETIME(), claim_token = NULL, lease_expires_at = NULL
 WHERE id = CAST(@P1 AS UNIQUEIDENTIFIER) AND consumption = 'pull' AND state = 'processing'
   AND claim_token = CAST(@P2 AS UNIQUEIDENTIFIER) AND lease_expires_at > SYSUTCDATETIME()";

/// Outbox rows from `@P1`, the JSON array `app_tx::publish_statement` writes (payload and
/// headers as JSON text, `scheduled_at` as UTC); rows in the array's order (`n`).
pub const PUBLISH: &str = concat!(
    "INSERT INTO outbox (id, topic, [key], aggregate_type, payload, headers, max_attempts, scheduled_at)
SELECT m.id, m.topic, m.[key], m.aggregate_type, m.payload, m.headers, m.max_attempts,
       COALESCE(m.scheduled_at, ",
    now_plus_ms!("m.delay_ms"),
    ")
  FROM OPENJSON(@P1) WITH (n INT '$.n', id UNIQUEIDENTIFIER '$.id', topic NVARCHAR(255) '$.topic',
       [key] NVARCHAR(255) '$.key', aggregate_type NVARCHAR(255) '$.aggregate_type',
       payload NVARCHAR(MAX) '$.payload', headers NVARCHAR(MAX) '$.headers',
       max_attempts INT '$.max_attempts', delay_ms BIGINT '$.delay_ms',
       scheduled_at DATETIME2 '$.scheduled_at') AS m
 ORDER BY m.n"
);

/// Pull rows from `@P1`, the JSON array `app_tx::enqueue_statement` writes, through the
/// procedure migration 11 installs (the PostgreSQL `ENQUEUE`); one result row per message in
/// order: `n`, `id`, `duplicate`.
pub const ENQUEUE: &str = "EXEC queuebox_enqueue_many @messages = @P1";

/// Every statement above by name, for the syntax-check test.
pub fn statements() -> Vec<(&'static str, String)> {
    [
        ("SESSION_SETUP", SESSION_SETUP),
        ("INSERT", INSERT),
        ("LOOKUP_ID", LOOKUP_ID),
        ("CLAIM", CLAIM),
        ("RENEW", RENEW),
        ("COMPLETE_MANY", COMPLETE_MANY),
        ("COMPLETE", COMPLETE),
        ("RETRY", RETRY),
        ("DEAD", DEAD),
        ("RELEASE", RELEASE),
        ("BEGIN", BEGIN),
        ("COMMIT", COMMIT),
        ("ROLLBACK", ROLLBACK),
        ("SCHEMA_CHECK", SCHEMA_CHECK),
        ("MIGRATE_LOCK", MIGRATE_LOCK),
        ("MIGRATE_UNLOCK", MIGRATE_UNLOCK),
        ("HISTORY_CREATE", HISTORY_CREATE),
        ("HISTORY_SELECT", HISTORY_SELECT),
        ("HISTORY_INSERT", HISTORY_INSERT),
        ("HISTORY_MAX", HISTORY_MAX),
        ("MIGRATE_BEGIN", MIGRATE_BEGIN),
        ("RECLAIM_PUSH", RECLAIM_PUSH),
        ("CLAIM_PUSH", CLAIM_PUSH),
        ("FORWARD_PUSH", FORWARD_PUSH),
        ("RENEW_PUSH", RENEW_PUSH),
        ("DEAD_PUSH", DEAD_PUSH),
        ("RECLAIM_OUTBOX", RECLAIM_OUTBOX),
        ("CLAIM_OUTBOX", CLAIM_OUTBOX),
        ("RENEW_OUTBOX", RENEW_OUTBOX),
        ("MARK_SENT", MARK_SENT),
        ("MARK_SENT_MANY", MARK_SENT_MANY),
        ("RETRY_OUTBOX", RETRY_OUTBOX),
        ("DEAD_OUTBOX", DEAD_OUTBOX),
        ("OUTBOX_BACKLOG", OUTBOX_BACKLOG),
        ("INBOX_BACKLOG", INBOX_BACKLOG),
        ("DELETE_OLD_OUTBOX", DELETE_OLD_OUTBOX),
        ("DELETE_EXCESS_OUTBOX", DELETE_EXCESS_OUTBOX),
        ("DELETE_OLD_INBOX", DELETE_OLD_INBOX),
        ("LIST_DEAD_OUTBOX", LIST_DEAD_OUTBOX),
        ("LIST_DEAD_INBOX", LIST_DEAD_INBOX),
        ("INBOX_ROW", INBOX_ROW),
        ("INSERT_OUTBOX", INSERT_OUTBOX),
        ("REPLAY_OUTBOX", REPLAY_OUTBOX),
        ("DELETE_OUTBOX", DELETE_OUTBOX),
        ("APP_COMPLETE", APP_COMPLETE),
        ("PUBLISH", PUBLISH),
        ("ENQUEUE", ENQUEUE),
    ]
    .into_iter()
    .map(|(n, s)| (n, s.to_string()))
    .collect()
}
