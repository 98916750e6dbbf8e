//! Every SQL statement the PostgreSQL backend sends, as named constants, so a reader can put
//! this file next to `store::sqlserver::sql` and compare the two backends statement by
//! statement (the names are the same where the statement is the same). [`statements`] lists
//! them all.
//!
//! Rules shared by all of them (proto-docs/sql-contract.md):
//! - every lease comparison and every stamp uses `clock_timestamp()`, the database clock at the
//!   moment of the statement, never the application's clock and never the transaction start;
//! - parameters are positional (`$1`…); durations are bound as milliseconds (`float8`) and
//!   turned into intervals with `make_interval(secs => $n::float8 / 1000)`;
//! - the claims lock with `FOR UPDATE … SKIP LOCKED`, so concurrent claims never take one row.
//! - where a scan walks an index in the order of the column compared, the bound is written
//!   `(SELECT clock_timestamp())`: evaluated once, it becomes the index scan's bound, where the
//!   volatile call is only a filter and the scan reads every entry past it (the claim's
//!   expired-lease branch read every processing row's heap tuple to take none: 443 buffers
//!   against 2 for 10 live and 20,000 dead entries).
//!
//! The constants are templates: `{inbox}` / `{outbox}` name a table and `{inbox.source}` a
//! column, `{=inbox.source}` a column read back by that name (renamed columns get an `AS`),
//! and `{inbox.dedup}` the conflict target of the insert. [`crate::store::names::Names`]
//! renders them once per store; the default names render the plain SQL of 0.x exactly
//! (`core/tests/fixtures/postgres_default_statements.sql`).

/// `clock_timestamp()` plus `$n` milliseconds (a `float8` parameter).
macro_rules! now_plus_ms {
    ($p:literal) => {
        concat!(
            "clock_timestamp() + make_interval(secs => ",
            $p,
            "::float8 / 1000)"
        )
    };
}

// The fences find their rows by primary key. They compare `consumption` (the outbox's:
// `state`) to `(SELECT '…')`, a value computed once, not to a constant: with the constant,
// the conditions imply the predicate of the partial index of processing rows
// (`idx_inbox_pull_processing`, `idx_inbox_push_processing`), and where the statistics put
// few rows there (the last ANALYZE ran when nothing was claimed) the planner read that whole
// index instead, visiting the heap tuple of every entry, live or dead: 3,760 buffers per
// completion of a batch with a transaction held open, 74 per row (`benchmarks/history.md`).
/// The fence shared by every write on a claimed inbox row: `$1` = id, `$2` = claim token;
/// `pull` rows unless another consumption is named.
macro_rules! fence {
    () => {
        fence!("pull")
    };
    ($consumption:literal) => {
        concat!("{inbox.id} = $1 AND {inbox.consumption} = (SELECT '", $consumption, "') AND {inbox.state} = 'processing' AND {inbox.claim_token} = $2 AND {inbox.lease_expires_at} > clock_timestamp()")
    };
}

/// The fence of many claimed inbox rows of one consumption, `$1` ids and `$2` tokens, as the
/// `FROM … WHERE` of an `UPDATE {inbox} i`: driven from the claims so each row is found by
/// primary key.
///
/// `state` too is compared to `(SELECT 'processing')`, as the outbox's marks do. With the
/// constant, the planner took its selectivity from the statistics, and an ANALYZE run while
/// nothing was claimed puts ~0 rows in `processing`: for the custom plans PostgreSQL makes for
/// a prepared statement's first five executions on each connection, it then estimated one
/// inbox row and joined it to the claims as a nested loop whose join filter compares every
/// row with every claim: 52 ms for a completion of 500 rows on a 30,000-row table against 6.5
/// with the primary-key plan (EXPLAIN ANALYZE, 2026-12-05), so a worker with a large batch
/// on a freshly analysed table ran at a third of its speed until its connections switched to
/// the generic plan. With a value computed once the estimate is neutral and every plan is
/// linear in the claims: the primary-key nested loop, or on a small table a hash join.
macro_rules! fence_many {
    ($consumption:literal) => {
        concat!("
  FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
 WHERE i.{inbox.id} = c.id AND i.{inbox.claim_token} = c.token
   AND i.{inbox.consumption} = (SELECT '", $consumption, "') AND i.{inbox.state} = (SELECT 'processing') AND i.{inbox.lease_expires_at} > clock_timestamp()
RETURNING i.{=inbox.id}")
    };
}

/// The fence of a claimed outbox row: `$1` = id, `$2` = claim token. `(SELECT 'processing')`
/// for the reason above (`idx_outbox_processing_lease`, `idx_outbox_key_sequence`).
macro_rules! outbox_fence {
    () => {
        "{outbox.id} = $1 AND {outbox.state} = (SELECT 'processing') AND {outbox.claim_token} = $2 AND {outbox.lease_expires_at} > clock_timestamp()"
    };
}

// ---- pull rows and the inbox insert (`pull.rs`) ----

// One round trip for a new row and for a duplicate alike (as SQL Server's INSERT): the
// second branch reads the existing row's id in the statement's snapshot. A repeat whose first
// row committed after that snapshot was taken (two inserts of one key racing) returns no row;
// the caller then asks again with LOOKUP_ID, which takes a new snapshot.
/// One inbox row; `$9` (a dead reason) stores it dead at once; `$11`, `$12` the trace
/// context. Returns `(id, is_new)`: the new row's id and true, or for a repeat of
/// `(source, idempotency_key)` the stored row's id and false (or no row, see above).
pub const INSERT: &str = "
WITH qb_new AS (
INSERT INTO {inbox} ({inbox.source}, {inbox.idempotency_key}, {inbox.aggregate_id}, {inbox.event_type}, {inbox.payload}, {inbox.headers},
                   {inbox.correlation_id}, {inbox.consumption}, {inbox.state}, {inbox.last_error}, {inbox.scheduled_at},
                   {inbox.traceparent}, {inbox.tracestate})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
        CASE WHEN $9::text IS NULL THEN 'pending' ELSE 'dead' END, $9,
        clock_timestamp() + make_interval(secs => $10::float8 / 1000), $11, $12)
ON CONFLICT {inbox.dedup} DO NOTHING
RETURNING {=inbox.id})
SELECT id, true AS is_new FROM qb_new
UNION ALL
SELECT {=inbox.id}, false AS is_new FROM {inbox}
 WHERE {inbox.source} = $1 AND {inbox.idempotency_key} = $2 AND NOT EXISTS (SELECT 1 FROM qb_new)";

/// The stored id of a duplicate insert whose first row the INSERT's snapshot did not see.
pub const LOOKUP_ID: &str =
    "SELECT {=inbox.id} FROM {inbox} WHERE {inbox.source} = $1 AND {inbox.idempotency_key} = $2";

// Several inbox rows in one statement (the relay's ingest under load, `insert_inbox_many`):
// one round trip, one commit and one plan for the whole group instead of one of each per
// row. `ORDER BY s.n` keeps `sequence` in arrival order. A key repeated inside the group is
// inserted once: DO NOTHING skips a row that conflicts with one this statement inserted.
/// Inbox rows from parallel arrays (`$1` … `$12` as in [`INSERT`], one element per row).
/// Returns `(id, source, idempotency_key)` of each row inserted; the others are duplicates,
/// whose ids [`LOOKUP_IDS`] reads after the statement committed.
pub const INSERT_MANY: &str = "
INSERT INTO {inbox} ({inbox.source}, {inbox.idempotency_key}, {inbox.aggregate_id}, {inbox.event_type}, {inbox.payload}, {inbox.headers},
                   {inbox.correlation_id}, {inbox.consumption}, {inbox.state}, {inbox.last_error}, {inbox.scheduled_at},
                   {inbox.traceparent}, {inbox.tracestate})
SELECT s.source, s.idempotency_key, s.aggregate_id, s.event_type, s.payload, s.headers, s.correlation_id, s.consumption,
       CASE WHEN s.dead_reason IS NULL THEN 'pending' ELSE 'dead' END, s.dead_reason,
       clock_timestamp() + make_interval(secs => s.delay_ms / 1000), s.traceparent, s.tracestate
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], $7::text[], $8::text[],
              $9::text[], $10::float8[], $11::text[], $12::text[])
       WITH ORDINALITY AS s(source, idempotency_key, aggregate_id, event_type, payload, headers, correlation_id,
                            consumption, dead_reason, delay_ms, traceparent, tracestate, n)
 ORDER BY s.n
ON CONFLICT {inbox.dedup} DO NOTHING
RETURNING {=inbox.id}, {=inbox.source}, {=inbox.idempotency_key}";

/// The stored ids of `($1[i], $2[i])` (source, idempotency key) pairs: the duplicates of an
/// [`INSERT_MANY`], read in a new snapshot, after every conflicting insert committed.
pub const LOOKUP_IDS: &str = "
SELECT {=inbox.id}, {=inbox.source}, {=inbox.idempotency_key} FROM {inbox}
  JOIN unnest($1::text[], $2::text[]) AS k(k_source, k_key)
    ON {inbox.source} = k.k_source AND {inbox.idempotency_key} = k.k_key";

// Candidates: due pending rows and expired processing rows of one source, each scan bounded.
// Pending rows come highest priority first (migration 10), then in (scheduled_at, sequence)
// order, from idx_inbox_pull_pending_priority (keyed on -priority, migration 13). The head
// rule below compares `sequence` only: a row waits behind an earlier claimable row of its
// aggregate whatever either one's priority, so an aggregate keeps its order.
// A row is claimable only if it heads its aggregate (proto-docs/sql-contract.md, Claim): no earlier
// row of the same source and aggregate that is itself claimable now (due pending, or processing
// with an expired lease), and no live lease on another row of it. A row waiting in retry backoff
// (or held by an initial delay) is not claimable, so it blocks nothing: "a pull retry lets later
// messages pass" (proto-docs/sql-contract.md). The lock step re-checks the row predicate under FOR UPDATE SKIP LOCKED, so
// two concurrent claims can never both take one row. It takes the picked rows by primary key, as
// the outbox claim does: joined to the picks on `source`, a plan made on stale statistics (a burst
// of rows the table has not been analyzed since) scanned every row of the source for each claim,
// 434 ms against 9 ms, ~170 rows/s until autovacuum's ANALYZE. The source needs no re-check: the
// picks are this source's and a row's source never changes. Each returned row also carries
// `next_at`, `next_sequence`: the first candidate the claim did not take (blocked by its aggregate,
// locked by another claim, or past the batch), where the next claim may start its scan
// ([`CLAIM_FROM`], `claim_start.rs`); an expired lease comes first and `next_pending` is then
// false: the next claim runs from the head again to take it.
// A paused source (migration 15, `queuebox pause source`) claims nothing, neither due rows nor
// rows whose lease expired: the NOT EXISTS names only the parameter, so PostgreSQL runs it once
// per claim as a one-time filter over both scans (one primary-key probe), and a paused source's
// scans do not run at all.
/// The pull claim with the pending scan's extra condition `$from` and the expired-lease
/// branch `$expired` (or nothing for either).
macro_rules! pull_claim {
    ($from:literal, $expired:literal) => {
        concat!("
WITH cand AS (
    (SELECT {=inbox.id}, {=inbox.aggregate_id}, {=inbox.sequence}, {=inbox.scheduled_at}, {=inbox.priority}, true AS pending FROM {inbox}
      WHERE {inbox.consumption} = 'pull' AND {inbox.source} = $1 AND {inbox.state} = 'pending' AND {inbox.scheduled_at} <= (SELECT clock_timestamp())", $from, "
        AND NOT EXISTS (SELECT 1 FROM queuebox_paused p WHERE p.kind = 'source' AND p.name = $1)
      ORDER BY -{inbox.priority}, {inbox.scheduled_at}, {inbox.sequence} LIMIT $4)", $expired, "
), pick AS (
    SELECT c.id FROM cand c
     WHERE c.aggregate_id IS NULL OR (
           -- an earlier claimable row of the aggregate (index range scan, stops at the first);
           -- a pending row that is not due yet (retry backoff) does not count
           NOT EXISTS (SELECT 1 FROM {inbox} b
                        WHERE b.{inbox.consumption} = 'pull' AND b.{inbox.source} = $1 AND b.{inbox.aggregate_id} = c.aggregate_id
                          AND b.{inbox.state} IN ('pending', 'processing') AND b.{inbox.sequence} < c.sequence
                          AND (b.{inbox.state} = 'processing' OR b.{inbox.scheduled_at} <= clock_timestamp()))
           -- any other row of the aggregate holding a live lease
       AND NOT EXISTS (SELECT 1 FROM {inbox} b
                        WHERE b.{inbox.consumption} = 'pull' AND b.{inbox.source} = $1 AND b.{inbox.aggregate_id} = c.aggregate_id
                          AND b.{inbox.state} = 'processing' AND b.{inbox.id} <> c.id AND b.{inbox.lease_expires_at} > clock_timestamp()))
     ORDER BY -c.priority, c.scheduled_at, c.sequence
     LIMIT $2
), locked AS (
    SELECT i.{=inbox.id} FROM {inbox} i
     WHERE i.{inbox.id} = ANY (ARRAY(SELECT id FROM pick)) AND i.{inbox.consumption} = 'pull'
       AND ((i.{inbox.state} = 'pending' AND i.{inbox.scheduled_at} <= clock_timestamp())
         OR (i.{inbox.state} = 'processing' AND i.{inbox.lease_expires_at} <= clock_timestamp()))
     FOR UPDATE OF i SKIP LOCKED
), next AS (
    SELECT c.priority, c.scheduled_at, c.sequence, c.pending FROM cand c
     WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = c.id)
     ORDER BY c.pending, -c.priority, c.scheduled_at, c.sequence
     LIMIT 1
)
UPDATE {inbox} u
   SET {inbox.state} = 'processing', {inbox.claim_token} = gen_random_uuid(), {inbox.claimed_at} = clock_timestamp(),
       {inbox.lease_expires_at} = clock_timestamp() + make_interval(secs => $3::float8 / 1000),
       {inbox.claim_owner} = $5::int8
  FROM locked l LEFT JOIN next n ON true
 WHERE u.{inbox.id} = l.id
RETURNING u.{=inbox.id}, u.{=inbox.source}, u.{=inbox.idempotency_key}, u.{=inbox.aggregate_id}, u.{=inbox.event_type}, u.{=inbox.payload}, u.{=inbox.headers},
          u.{=inbox.attempt}, u.{=inbox.correlation_id}, u.{=inbox.created_at}, u.{=inbox.claim_token}, u.{=inbox.scheduled_at}, u.{=inbox.sequence},
          u.{=inbox.traceparent}, u.{=inbox.tracestate}, u.{=inbox.priority}, u.{=inbox.max_attempts},
          n.priority AS next_priority, n.scheduled_at AS next_at, n.sequence AS next_sequence, n.pending AS next_pending")
    };
}

/// The pull claim from the head of the queue: `$1` source, `$2` batch, `$3` lease (ms), `$4`
/// candidate limit, `$5` the claiming worker's owner key (its session advisory lock,
/// [`OWNER_LOCK`]; NULL without one).
pub const CLAIM: &str = pull_claim!(
    "",
    "
    UNION ALL
    (SELECT {=inbox.id}, {=inbox.aggregate_id}, {=inbox.sequence}, {=inbox.scheduled_at}, {=inbox.priority}, false FROM {inbox}
      WHERE {inbox.consumption} = 'pull' AND {inbox.source} = $1 AND {inbox.state} = 'processing' AND {inbox.lease_expires_at} <= (SELECT clock_timestamp())
        AND NOT EXISTS (SELECT 1 FROM queuebox_paused p WHERE p.kind = 'source' AND p.name = $1)
      ORDER BY {inbox.lease_expires_at} LIMIT $4)"
);

/// [`CLAIM`]'s pending scan started at `($8, $6, $7)` (`priority`, `scheduled_at`,
/// `sequence`, inclusive, in claim order), without the expired-lease branch: the claim that
/// follows a full one while a queue drains (`claim_start.rs` says when, and what the claims
/// from the head catch up on).
pub const CLAIM_FROM: &str = pull_claim!(
    " AND (-{inbox.priority}, {inbox.scheduled_at}, {inbox.sequence}) >= (-$8::int2, $6::timestamptz, $7::int8)",
    ""
);

// ---- dead-session recovery of pull claims (`owner.rs`) ----
//
// A worker holds a session-level advisory lock on a random key (its owner key) on a connection
// it keeps open, and its claims record the key in `claim_owner`. PostgreSQL releases the lock
// when that connection ends, which is what happens when the worker process dies. A shared
// transaction-level try-lock on the key succeeds exactly when no session holds it
// exclusively, so it tells a dead owner from a live one without reading pg_locks (which
// takes every lock-manager partition lock), and it is evaluated once per distinct owner, not
// per row. The lease stays for a worker that is alive but hung: its session still holds the
// lock, so its rows wait for their lease.

/// Takes the owner key `$1` for this session if no one holds it; false: draw another key.
pub const OWNER_LOCK: &str = "SELECT pg_try_advisory_lock($1::int8)";

/// The keep-alive of the owner session: an error means the connection, and with it the lock,
/// is gone.
pub const OWNER_PING: &str = "SELECT 1";

/// Expires at once the live leases of `$1`'s pull rows whose owner session is gone, so the
/// next claim takes them like any expired lease (same fencing: a new claim token). Returns
/// the ids expired. The owners are materialised first so the try-lock runs once per owner.
pub const EXPIRE_DEAD_OWNERS: &str = "
WITH owners AS MATERIALIZED (
    SELECT DISTINCT {inbox.claim_owner} AS owner FROM {inbox}
     WHERE {inbox.consumption} = 'pull' AND {inbox.source} = $1 AND {inbox.state} = 'processing'
       AND {inbox.lease_expires_at} > (SELECT clock_timestamp()) AND {inbox.claim_owner} IS NOT NULL
), dead AS MATERIALIZED (
    SELECT owner FROM owners WHERE pg_try_advisory_xact_lock_shared(owner)
)
UPDATE {inbox} i SET {inbox.lease_expires_at} = clock_timestamp()
  FROM dead d
 WHERE i.{inbox.claim_owner} = d.owner
   AND i.{inbox.consumption} = 'pull' AND i.{inbox.source} = $1 AND i.{inbox.state} = 'processing'
   AND i.{inbox.lease_expires_at} > clock_timestamp()
RETURNING i.{=inbox.id}";

// Driven from the claims (UPDATE … FROM unnest) so each row is found by primary key; the
// `(id, token) IN (SELECT unnest …)` form made PostgreSQL scan every processing row instead.
/// Lease renewal of many pull claims: `$1` ids, `$2` tokens, `$3` lease (ms); returns the ids
/// renewed.
pub const RENEW: &str = concat!(
    "
UPDATE {inbox} i SET {inbox.lease_expires_at} = clock_timestamp() + make_interval(secs => $3::float8 / 1000)",
    fence_many!("pull")
);

/// Many completions in one statement: `$1` ids, `$2` tokens; returns the ids completed.
pub const COMPLETE_MANY: &str = concat!(
    "
UPDATE {inbox} i SET {inbox.state} = 'processed', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL",
    fence_many!("pull")
);

/// The fenced completion (autocommit, or inside a handler's transaction).
pub const COMPLETE: &str =
    concat!("UPDATE {inbox} SET {inbox.state} = 'processed', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL WHERE ", fence!());

/// Back to pending after `$4` ms with `attempt + 1` and `last_error = $3`.
pub const RETRY: &str = concat!(
    "UPDATE {inbox} SET {inbox.state} = 'pending', {inbox.attempt} = {inbox.attempt} + 1, {inbox.last_error} = $3, {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL,
                {inbox.scheduled_at} = ",
    now_plus_ms!("$4"),
    " WHERE ",
    fence!()
);

/// To dead with `last_error = $3`.
pub const DEAD: &str = concat!("UPDATE {inbox} SET {inbox.state} = 'dead', {inbox.last_error} = $3, {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL WHERE ", fence!());

/// Back to pending at once, no attempt spent.
pub const RELEASE: &str =
    concat!("UPDATE {inbox} SET {inbox.state} = 'pending', {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL, {inbox.claimed_at} = NULL WHERE ", fence!());

// ---- the store itself (`mod.rs`) ----

/// `$1` a table name; NULL when it does not exist.
pub const SCHEMA_CHECK: &str = "SELECT to_regclass($1)::text";

/// The columns of table `$1` (a name as the statements write it, resolved like them through
/// the search path): the schema guards of a schema with custom names.
pub const TABLE_COLUMNS: &str = "SELECT a.attname::text FROM pg_attribute a
 WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped";

// ---- migrations (`super::migrate`) ----

/// An arbitrary constant key: concurrent `migrate` runs take turns on this advisory lock.
/// Polled, never waited in: see `migrate::take_lock`.
pub const MIGRATE_LOCK: &str = "SELECT pg_try_advisory_lock($1)";
/// Whether the index named `$1` (found on the search path) exists and is INVALID: what an
/// interrupted `CREATE INDEX CONCURRENTLY` leaves behind.
pub const INDEX_INVALID: &str =
    "SELECT EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid)";
pub const MIGRATE_UNLOCK: &str = "SELECT pg_advisory_unlock($1)";
pub const HAS_HISTORY: &str = "SELECT to_regclass('queuebox_schema_history') IS NOT NULL";
pub const HAS_TABLES: &str =
    "SELECT to_regclass('inbox') IS NOT NULL OR to_regclass('outbox') IS NOT NULL";
pub const HISTORY_CREATE: &str = "CREATE TABLE IF NOT EXISTS queuebox_schema_history (
        version    INTEGER PRIMARY KEY,
        name       VARCHAR(255) NOT NULL,
        checksum   VARCHAR(64)  NOT NULL,
        applied_at TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP)";
pub const HISTORY_SELECT: &str =
    "SELECT version, name, checksum FROM queuebox_schema_history ORDER BY version";
pub const HISTORY_INSERT: &str =
    "INSERT INTO queuebox_schema_history (version, name, checksum) VALUES ($1, $2, $3)";
pub const HISTORY_MAX: &str = "SELECT max(version) FROM queuebox_schema_history";

// ---- the relay role (`relay.rs`) ----

/// Push rows whose lease expired (or has none) back to pending.
pub const RECLAIM_PUSH: &str = "
UPDATE {inbox} SET {inbox.state} = 'pending', {inbox.claimed_at} = NULL, {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL
 WHERE {inbox.consumption} = 'push' AND {inbox.state} = 'processing'
   AND ({inbox.lease_expires_at} IS NULL OR {inbox.lease_expires_at} <= clock_timestamp())";

// Scans due push rows in claim order and keeps a row only when it heads its aggregate:
// no earlier pending row and no processing row of that aggregate, in any source. The
// index scan stops at the batch size; SKIP LOCKED leaves rows another replica is claiming.
// Rows of a paused source (migration 15) are stepped over and stay pending; a paused row
// still heads its aggregate, so a later row of that aggregate from another source waits.
/// The push claim: `$1` batch, `$2` lease (ms), `$3` the relay's owner key (NULL without one).
pub const CLAIM_PUSH: &str = concat!(
    "
WITH pick AS (
    SELECT i.{=inbox.id} FROM {inbox} i
     WHERE i.{inbox.consumption} = 'push' AND i.{inbox.state} = 'pending' AND i.{inbox.scheduled_at} <= clock_timestamp()
       AND NOT EXISTS (SELECT 1 FROM queuebox_paused p WHERE p.kind = 'source' AND p.name = i.{inbox.source})
       AND (i.{inbox.aggregate_id} IS NULL OR NOT EXISTS (
            SELECT 1 FROM {inbox} b
             WHERE b.{inbox.consumption} = 'push' AND b.{inbox.aggregate_id} = i.{inbox.aggregate_id} AND b.{inbox.id} <> i.{inbox.id}
               AND b.{inbox.state} IN ('pending', 'processing')
               AND (b.{inbox.sequence} < i.{inbox.sequence} OR b.{inbox.state} = 'processing')))
     ORDER BY i.{inbox.scheduled_at}, i.{inbox.sequence}
     LIMIT $1
     FOR UPDATE OF i SKIP LOCKED
)
UPDATE {inbox} u
   SET {inbox.state} = 'processing', {inbox.claim_token} = gen_random_uuid(), {inbox.claimed_at} = clock_timestamp(),
       {inbox.claim_owner} = $3::int8, {inbox.lease_expires_at} = ",
    now_plus_ms!("$2"),
    "
  FROM pick WHERE u.{inbox.id} = pick.id
RETURNING u.{=inbox.id}, u.{=inbox.source}, u.{=inbox.idempotency_key}, u.{=inbox.aggregate_id}, u.{=inbox.event_type}, u.{=inbox.payload}, u.{=inbox.headers},
          u.{=inbox.attempt}, u.{=inbox.correlation_id}, u.{=inbox.created_at}, u.{=inbox.claim_token}, u.{=inbox.scheduled_at}, u.{=inbox.sequence},
          u.{=inbox.traceparent}, u.{=inbox.tracestate}"
);

/// The fenced mark of a forwarded push row; runs first in the forward's transaction so it
/// locks the inbox row before [`INSERT_OUTBOX`].
pub const FORWARD_PUSH: &str = concat!(
    "UPDATE {inbox} SET {inbox.state} = 'processed', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL WHERE ",
    fence!("push")
);

// The inbox relay's batch in one transaction (`forward_push_many`): this fenced mark of every
// claim, then INSERT_OUTBOX_MANY for the rows it returned, instead of a transaction of two
// statements per row (~500 rows/s through the whole push path, `benchmarks/relay.md`).
/// [`FORWARD_PUSH`] for many claims: `$1` ids, `$2` tokens; returns the ids marked processed
/// (a claim missing from the result is lost).
pub const FORWARD_PUSH_MANY: &str = concat!(
    "
UPDATE {inbox} i SET {inbox.state} = 'processed', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL",
    fence_many!("push")
);

/// Outbox rows from parallel arrays, inserted in their order (`sequence` follows it): `$1` ids
/// (made by the caller), `$2` topics, `$3` keys, `$4` payloads, `$5` headers, `$6` max attempts.
pub const INSERT_OUTBOX_MANY: &str = "
INSERT INTO {outbox} ({outbox.id}, {outbox.topic}, {outbox.key}, {outbox.payload}, {outbox.headers}, {outbox.max_attempts})
SELECT r.id, r.topic, r.key, r.payload, r.headers, r.max_attempts
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::int4[])
       WITH ORDINALITY AS r(id, topic, key, payload, headers, max_attempts, n)
 ORDER BY r.n";

/// Lease renewal of many push claims: `$1` ids, `$2` tokens, `$3` lease (ms); returns the ids
/// renewed.
pub const RENEW_PUSH: &str = concat!(
    "
UPDATE {inbox} i SET {inbox.lease_expires_at} = clock_timestamp() + make_interval(secs => $3::float8 / 1000)",
    fence_many!("push")
);

/// A claimed push row to dead with `last_error = $3`.
pub const DEAD_PUSH: &str =
    concat!("UPDATE {inbox} SET {inbox.state} = 'dead', {inbox.last_error} = $3, {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL WHERE ", fence!("push"));

/// `$1` topic, `$2` key, `$3` payload, `$4` headers, `$5` max attempts; returns the id.
pub const INSERT_OUTBOX: &str = "
INSERT INTO {outbox} ({outbox.topic}, {outbox.key}, {outbox.payload}, {outbox.headers}, {outbox.max_attempts}) VALUES ($1, $2, $3, $4, $5) RETURNING {=outbox.id}";

/// Expired outbox leases back to pending, no attempt spent.
pub const RECLAIM_OUTBOX: &str = "
UPDATE {outbox} SET {outbox.state} = 'pending', {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL, {outbox.updated_at} = clock_timestamp()
 WHERE {outbox.state} = 'processing' AND ({outbox.lease_expires_at} IS NULL OR {outbox.lease_expires_at} <= clock_timestamp())";

// Many claims in one statement; a pair missing from RETURNING has lost its claim.
/// `$1` ids, `$2` tokens, `$3` lease (ms); returns the ids renewed.
pub const RENEW_OUTBOX: &str = "
UPDATE {outbox} SET {outbox.lease_expires_at} = clock_timestamp() + make_interval(secs => $3::float8 / 1000)
 WHERE ({outbox.id}, {outbox.claim_token}) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))
   AND {outbox.state} = (SELECT 'processing') AND {outbox.lease_expires_at} > clock_timestamp()
RETURNING {=outbox.id}";

// The key head rule: a keyed row is claimable only when no row of its key with a lower
// sequence is pending or processing, whatever that row's schedule or lease.
//
// The cost of a claim must not grow with the pending set. Scanning due rows in order and
// testing each for the head rule did: with fewer keys than the batch, every claim read every
// pending row looking for more heads (100 keys, 100,000 rows: 0.5 s a claim). So candidates
// come from three bounded sources, read in this order until the batch is full (a UNION ALL
// under a LIMIT stops reading its branches once it has enough):
// - `oldest`: the head-rule rows among the `$1` oldest due pending rows (time order);
// - `unkeyed`: due rows without a key (NULL), by sequence, at most half a batch, so a hot key
//   filling the oldest window cannot hold unkeyed rows back (`idx_outbox_unkeyed_pending`
//   since migration 9; on a schema of one's own, a key index that holds NULL keys);
// - `heads`: a walk over the distinct live keys of `idx_outbox_key_sequence` (one index
//   probe per key), taking each key's head when it is due and pending. The walk starts after
//   `$3`, the last key the previous walk took, and wraps around, so keys take turns.
// The cost is the batch plus the live keys walked, never the rows behind a key's head.
// The oldest window's head test reads the key index backwards from the row (ORDER BY … DESC
// LIMIT 1): a row behind its head finds the live row before it at once, where NOT EXISTS let
// the planner pick a sequential scan per row when keys are few (10 keys: 6.6 → 1.0 ms).
// The lock step takes the picked rows by primary key and re-checks them under
// FOR UPDATE SKIP LOCKED. `walked` says which rows came from the walk (the next cursor).
// Paused topics and destinations (migration 15) arrive as `$5`, one regular expression that
// matches exactly the topics the relay must not deliver now (the relay builds it from the
// paused set and its routes, whose globs the database cannot evaluate: `RelayStore::
// exclude_outbox_topics`); NULL when nothing is paused, the common case, costing nothing.
// Their rows stay pending, unattempted, and still head their keys.
/// The outbox claim: `$1` batch, `$2` lease (ms), `$3` the walk's cursor (a key, '' at first),
/// `$4` the relay's owner key (NULL without one), `$5` the paused topics' pattern (or NULL).
pub const CLAIM_OUTBOX: &str = concat!(
    "
WITH RECURSIVE window_rows AS (
    SELECT o.{=outbox.id}, o.{=outbox.key}, o.{=outbox.sequence} FROM {outbox} o
     WHERE o.{outbox.state} = 'pending' AND o.{outbox.scheduled_at} <= clock_timestamp()
       AND ($5::text IS NULL OR o.{outbox.topic} !~ $5)
     ORDER BY o.{outbox.scheduled_at}, o.{outbox.sequence} LIMIT $1
), oldest AS (
    SELECT w.id, false AS walked FROM window_rows w
     WHERE w.key IS NULL OR w.key = '' OR (
           SELECT b.{outbox.sequence} FROM {outbox} b
            WHERE b.{outbox.key} = w.key AND b.{outbox.state} IN ('pending', 'processing') AND b.{outbox.sequence} < w.sequence
            ORDER BY b.{outbox.key} DESC, b.{outbox.sequence} DESC LIMIT 1) IS NULL
), unkeyed AS (
    SELECT o.{=outbox.id}, false AS walked FROM {outbox} o
     WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} IS NULL
       AND o.{outbox.state} = 'pending' AND o.{outbox.scheduled_at} <= clock_timestamp()
       AND ($5::text IS NULL OR o.{outbox.topic} !~ $5)
       AND o.{outbox.id} NOT IN (SELECT id FROM oldest)
     ORDER BY o.{outbox.key}, o.{outbox.sequence}
     LIMIT greatest($1 / 2, 1)
), after_cursor(key) AS (
    (SELECT o.{outbox.key} FROM {outbox} o WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > $3 ORDER BY o.{outbox.key} LIMIT 1)
    UNION ALL
    SELECT (SELECT o.{outbox.key} FROM {outbox} o WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > k.key ORDER BY o.{outbox.key} LIMIT 1)
      FROM after_cursor k WHERE k.key IS NOT NULL
), up_to_cursor(key) AS (
    (SELECT o.{outbox.key} FROM {outbox} o WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > '' AND o.{outbox.key} <= $3 ORDER BY o.{outbox.key} LIMIT 1)
    UNION ALL
    SELECT (SELECT o.{outbox.key} FROM {outbox} o WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > k.key AND o.{outbox.key} <= $3 ORDER BY o.{outbox.key} LIMIT 1)
      FROM up_to_cursor k WHERE k.key IS NOT NULL
), heads AS (
    SELECT h.id, true AS walked
      FROM (SELECT key FROM after_cursor UNION ALL SELECT key FROM up_to_cursor) k
     CROSS JOIN LATERAL (
           SELECT o.{=outbox.id}, o.{=outbox.state}, o.{=outbox.scheduled_at}, o.{=outbox.topic} FROM {outbox} o
            WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} = k.key
            ORDER BY o.{outbox.key}, o.{outbox.sequence} LIMIT 1) h
     WHERE k.key IS NOT NULL AND h.state = 'pending' AND h.scheduled_at <= clock_timestamp()
       AND ($5::text IS NULL OR h.topic !~ $5)
       AND h.id NOT IN (SELECT id FROM oldest)
), pick AS (
    (SELECT id, walked FROM oldest) UNION ALL (SELECT id, walked FROM unkeyed) UNION ALL (SELECT id, walked FROM heads)
    LIMIT $1
), locked AS (
    SELECT o.{=outbox.id} FROM {outbox} o
     WHERE o.{outbox.id} = ANY (ARRAY(SELECT id FROM pick))
       AND o.{outbox.state} = 'pending' AND o.{outbox.scheduled_at} <= clock_timestamp()
       AND ($5::text IS NULL OR o.{outbox.topic} !~ $5)
     FOR UPDATE OF o SKIP LOCKED
), claimed AS (
    UPDATE {outbox} u
       SET {outbox.state} = 'processing', {outbox.claim_token} = gen_random_uuid(), {outbox.claimed_at} = clock_timestamp(),
           {outbox.updated_at} = clock_timestamp(), {outbox.claim_owner} = $4::int8, {outbox.lease_expires_at} = ",
    now_plus_ms!("$2"),
    "
     WHERE u.{outbox.id} = ANY (ARRAY(SELECT id FROM locked))
    RETURNING u.{=outbox.id}, u.{=outbox.topic}, u.{=outbox.key}, u.{=outbox.aggregate_type}, u.{=outbox.payload}, u.{=outbox.headers}, u.{=outbox.attempt}, u.{=outbox.max_attempts},
              u.{=outbox.created_at}, u.{=outbox.claim_token}, u.{=outbox.scheduled_at}, u.{=outbox.sequence}
)
SELECT c.*, p.walked FROM claimed c JOIN pick p ON p.id = c.id"
);

// A relay's owner session is the same advisory-lock session a pull worker holds
// ([`OWNER_LOCK`]); these two put the rows of relays whose session is gone straight back to
// pending (what [`RECLAIM_OUTBOX`] / [`RECLAIM_PUSH`] do once a lease expires), no attempt
// spent. A shared try-lock succeeds only when no session holds the key: the owner is gone.
// Both read the small `state = 'processing'` partial indexes.
/// Outbox rows claimed by a relay whose owner session is gone, back to pending; returns the ids.
pub const EXPIRE_DEAD_RELAY_OUTBOX: &str = "
WITH owners AS MATERIALIZED (
    SELECT DISTINCT {outbox.claim_owner} AS owner FROM {outbox}
     WHERE {outbox.state} = 'processing' AND {outbox.claim_owner} IS NOT NULL
), dead AS MATERIALIZED (
    SELECT owner FROM owners WHERE pg_try_advisory_xact_lock_shared(owner)
)
UPDATE {outbox} o SET {outbox.state} = 'pending', {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL,
       {outbox.lease_expires_at} = NULL, {outbox.claim_owner} = NULL, {outbox.updated_at} = clock_timestamp()
  FROM dead d
 WHERE o.{outbox.claim_owner} = d.owner AND o.{outbox.state} = 'processing'
RETURNING o.{=outbox.id}";

/// Push rows claimed by a relay whose owner session is gone, back to pending; returns the ids.
pub const EXPIRE_DEAD_RELAY_PUSH: &str = "
WITH owners AS MATERIALIZED (
    SELECT DISTINCT {inbox.claim_owner} AS owner FROM {inbox}
     WHERE {inbox.consumption} = 'push' AND {inbox.state} = 'processing' AND {inbox.claim_owner} IS NOT NULL
), dead AS MATERIALIZED (
    SELECT owner FROM owners WHERE pg_try_advisory_xact_lock_shared(owner)
)
UPDATE {inbox} i SET {inbox.state} = 'pending', {inbox.claimed_at} = NULL, {inbox.claim_token} = NULL,
       {inbox.lease_expires_at} = NULL, {inbox.claim_owner} = NULL
  FROM dead d
 WHERE i.{inbox.claim_owner} = d.owner AND i.{inbox.consumption} = 'push' AND i.{inbox.state} = 'processing'
RETURNING i.{=inbox.id}";

// Driven from the claims (UPDATE … FROM unnest) so each row is found by primary key.
/// Many fenced sent marks: `$1` ids, `$2` tokens; returns the ids marked.
pub const MARK_SENT_MANY: &str = "
UPDATE {outbox} o SET {outbox.state} = 'sent', {outbox.updated_at} = clock_timestamp(), {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL
  FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
 WHERE o.{outbox.id} = c.id AND o.{outbox.claim_token} = c.token
   AND o.{outbox.state} = (SELECT 'processing') AND o.{outbox.lease_expires_at} > clock_timestamp()
RETURNING o.{=outbox.id}";

pub const MARK_SENT: &str =
    concat!("UPDATE {outbox} SET {outbox.state} = 'sent', {outbox.updated_at} = clock_timestamp(), {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL WHERE ", outbox_fence!());

/// Back to pending after `$4` ms with `attempt + 1` and `last_error = $3`.
pub const RETRY_OUTBOX: &str = concat!(
    "UPDATE {outbox} SET {outbox.state} = 'pending', {outbox.attempt} = {outbox.attempt} + 1, {outbox.last_error} = $3, {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL,
                    {outbox.lease_expires_at} = NULL, {outbox.updated_at} = clock_timestamp(),
                    {outbox.scheduled_at} = ",
    now_plus_ms!("$4"),
    "
              WHERE ",
    outbox_fence!()
);

/// To dead with `last_error = $3`.
pub const DEAD_OUTBOX: &str = concat!(
    "UPDATE {outbox} SET {outbox.state} = 'dead', {outbox.last_error} = $3, {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL,
                    {outbox.updated_at} = clock_timestamp() WHERE ",
    outbox_fence!()
);

pub const OUTBOX_BACKLOG: &str = "SELECT count(*) AS pending,
                    COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min({outbox.created_at})), 0)::float8 AS age
               FROM {outbox} WHERE {outbox.state} = 'pending'";

pub const INBOX_BACKLOG: &str = "SELECT COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min({inbox.created_at}) FILTER (WHERE {inbox.consumption} = 'push')), 0)::float8 AS push_age,
                    COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min({inbox.created_at}) FILTER (WHERE {inbox.consumption} = 'pull')), 0)::float8 AS pull_age
               FROM {inbox} WHERE {inbox.state} = 'pending'";

/// `$1` max age (ms), `$2` batch.
pub const DELETE_OLD_OUTBOX: &str = "DELETE FROM {outbox} WHERE {outbox.state} IN ('sent', 'dead', 'cancelled') AND {outbox.id} IN (
                SELECT {outbox.id} FROM {outbox} WHERE {outbox.state} IN ('sent', 'dead', 'cancelled')
                   AND {outbox.updated_at} < clock_timestamp() - make_interval(secs => $1::float8 / 1000) LIMIT $2)";

/// `$1` rows to keep per terminal state, `$2` batch.
pub const DELETE_EXCESS_OUTBOX: &str = "DELETE FROM {outbox} WHERE {outbox.state} IN ('sent', 'dead', 'cancelled') AND {outbox.id} IN (
                SELECT id FROM (SELECT {=outbox.id}, row_number() OVER (PARTITION BY {outbox.state} ORDER BY {outbox.updated_at} DESC, {outbox.id} DESC) AS rn
                                  FROM {outbox} WHERE {outbox.state} IN ('sent', 'dead', 'cancelled')) r
                 WHERE rn > $1 LIMIT $2)";

/// `$1` max age (ms), `$2` batch.
pub const DELETE_OLD_INBOX: &str = "DELETE FROM {inbox} WHERE {inbox.state} IN ('processed', 'dead', 'cancelled') AND {inbox.id} IN (
                SELECT {inbox.id} FROM {inbox} WHERE {inbox.state} IN ('processed', 'dead', 'cancelled')
                   AND {inbox.created_at} < clock_timestamp() - make_interval(secs => $1::float8 / 1000) LIMIT $2)";

pub const LIST_DEAD_OUTBOX: &str =
    "SELECT {=outbox.id}, {outbox.topic} AS name, {=outbox.key}, {=outbox.attempt}, {=outbox.last_error}, {=outbox.updated_at} FROM {outbox} WHERE {outbox.state} = 'dead' ORDER BY {outbox.updated_at} DESC LIMIT $1";

pub const LIST_DEAD_INBOX: &str = "SELECT {=inbox.id}, {inbox.source} AS name, {inbox.idempotency_key} AS key, {=inbox.attempt}, {=inbox.last_error}, COALESCE({inbox.processed_at}, {inbox.created_at}) AS updated_at
               FROM {inbox} WHERE {inbox.state} = 'dead' ORDER BY {inbox.created_at} DESC LIMIT $1";

pub const INBOX_ROW: &str =
    "SELECT {=inbox.id}, {=inbox.source}, {=inbox.idempotency_key}, {=inbox.aggregate_id}, {=inbox.event_type}, {=inbox.payload}, {=inbox.headers}, {=inbox.attempt}, {=inbox.correlation_id}, {=inbox.created_at}, {=inbox.traceparent}, {=inbox.tracestate} FROM {inbox} WHERE {inbox.id} = $1";

/// `$1` states, then the optional filters `$2` ids … `$6` created before (NULL = any).
pub const REPLAY_OUTBOX: &str = "UPDATE {outbox} SET {outbox.state} = 'pending', {outbox.attempt} = 0, {outbox.last_error} = NULL, {outbox.scheduled_at} = clock_timestamp(),
                    {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL, {outbox.updated_at} = clock_timestamp()
              WHERE {outbox.state} = ANY($1)
                AND ($2::uuid[] IS NULL OR {outbox.id} = ANY($2))
                AND ($3::text IS NULL OR {outbox.topic} = $3)
                AND ($4::text IS NULL OR {outbox.headers} ->> 'x-source' = $4)
                AND ($5::timestamptz IS NULL OR {outbox.created_at} > $5)
                AND ($6::timestamptz IS NULL OR {outbox.created_at} < $6)";

pub const DELETE_OUTBOX: &str =
    "DELETE FROM {outbox} WHERE {outbox.id} = ANY($1) AND {outbox.state} <> 'processing'";

// ---- the operator commands (`queuebox dead`, `queuebox inspect`) ----
// The filtered forms of proto-docs/dead-letter.md's statements; every write is guarded by
// `state = 'dead'`, so a row replayed or delivered meanwhile is never touched.

/// `$1` ids, `$2` topic, `$3` x-source, `$4` minimum age (ms; NULL = any), `$5` limit.
pub const FIND_DEAD_OUTBOX: &str =
    "SELECT {=outbox.id}, {outbox.topic} AS name, {=outbox.key}, {=outbox.attempt}, {=outbox.last_error}, {=outbox.updated_at} FROM {outbox}
              WHERE {outbox.state} = 'dead'
                AND ($1::uuid[] IS NULL OR {outbox.id} = ANY($1))
                AND ($2::text IS NULL OR {outbox.topic} = $2)
                AND ($3::text IS NULL OR {outbox.headers} ->> 'x-source' = $3)
                AND ($4::float8 IS NULL OR {outbox.created_at} < clock_timestamp() - make_interval(secs => $4 / 1000))
              ORDER BY {outbox.updated_at} DESC LIMIT $5";

/// `$1` ids, `$2` source, `$3` minimum age (ms; NULL = any), `$4` limit.
pub const FIND_DEAD_INBOX: &str = "SELECT {=inbox.id}, {inbox.source} AS name, {inbox.idempotency_key} AS key, {=inbox.attempt}, {=inbox.last_error}, COALESCE({inbox.processed_at}, {inbox.created_at}) AS updated_at
               FROM {inbox}
              WHERE {inbox.state} = 'dead'
                AND ($1::uuid[] IS NULL OR {inbox.id} = ANY($1))
                AND ($2::text IS NULL OR {inbox.source} = $2)
                AND ($3::float8 IS NULL OR {inbox.created_at} < clock_timestamp() - make_interval(secs => $3 / 1000))
              ORDER BY {inbox.created_at} DESC LIMIT $4";

pub const DELETE_DEAD_OUTBOX: &str =
    "DELETE FROM {outbox} WHERE {outbox.id} = ANY($1) AND {outbox.state} = 'dead'";

pub const DELETE_DEAD_INBOX: &str =
    "DELETE FROM {inbox} WHERE {inbox.id} = ANY($1) AND {inbox.state} = 'dead'";

pub const REQUEUE_DEAD_INBOX: &str = "UPDATE {inbox}
                SET {inbox.state} = 'pending', {inbox.attempt} = 0, {inbox.scheduled_at} = clock_timestamp(), {inbox.claimed_at} = NULL, {inbox.claim_token} = NULL,
                    {inbox.lease_expires_at} = NULL, {inbox.processed_at} = NULL, {inbox.last_error} = NULL
              WHERE {inbox.id} = ANY($1) AND {inbox.state} = 'dead'";

// ---- cancel (`RelayStore::cancel`, `queuebox cancel`, the admin API) ----
// One statement each: the rows are chosen, the pending ones among them cancelled, and the
// others counted by why they were not, together. The UPDATE names `state = 'pending'` again:
// under READ COMMITTED a row claimed (or finished) by a concurrent statement after the
// snapshot is re-read under its row lock and left alone, so a row being handled is never
// cancelled, and a row is cancelled once (a second cancel finds it `cancelled`). A row the
// snapshot saw pending that the UPDATE left alone changed meanwhile: counted in flight.

/// `$1` id, `$2` source, `$3` idempotency key, `$4` aggregate id (each NULL = any; the core
/// refuses a cancel without one of id, key or aggregate). Only pull rows are cancelled; push
/// rows matched are counted apart (the inbox relay forwards them, never a worker).
pub const CANCEL_INBOX: &str = "
WITH target AS (
  SELECT {inbox.id} AS id, {inbox.state} AS state, {inbox.consumption}::text AS consumption FROM {inbox}
   WHERE ($1::uuid IS NULL OR {inbox.id} = $1)
     AND ($2::text IS NULL OR {inbox.source} = $2)
     AND ($3::text IS NULL OR {inbox.idempotency_key} = $3)
     AND ($4::text IS NULL OR {inbox.aggregate_id} = $4)
), done AS (
  UPDATE {inbox} SET {inbox.state} = 'cancelled', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL
   WHERE {inbox.id} IN (SELECT id FROM target WHERE consumption = 'pull' AND state = 'pending')
     AND {inbox.state} = 'pending'
  RETURNING {inbox.id} AS id
)
SELECT (SELECT count(*) FROM done) AS cancelled,
       count(*) FILTER (WHERE t.consumption = 'pull' AND t.state IN ('pending', 'processing') AND t.id NOT IN (SELECT id FROM done)) AS in_flight,
       count(*) FILTER (WHERE t.consumption = 'pull' AND t.state NOT IN ('pending', 'processing')) AS finished,
       count(*) FILTER (WHERE t.consumption <> 'pull') AS push
  FROM target t";

/// `$1` id, `$2` topic, `$3` key (each NULL = any; the core refuses a cancel without an id or
/// a key). `push` is always 0.
pub const CANCEL_OUTBOX: &str = "
WITH target AS (
  SELECT {outbox.id} AS id, {outbox.state} AS state FROM {outbox}
   WHERE ($1::uuid IS NULL OR {outbox.id} = $1)
     AND ($2::text IS NULL OR {outbox.topic} = $2)
     AND ($3::text IS NULL OR {outbox.key} = $3)
), done AS (
  UPDATE {outbox} SET {outbox.state} = 'cancelled', {outbox.updated_at} = clock_timestamp(), {outbox.claimed_at} = NULL, {outbox.claim_token} = NULL, {outbox.lease_expires_at} = NULL
   WHERE {outbox.id} IN (SELECT id FROM target WHERE state = 'pending')
     AND {outbox.state} = 'pending'
  RETURNING {outbox.id} AS id
)
SELECT (SELECT count(*) FROM done) AS cancelled,
       count(*) FILTER (WHERE t.state IN ('pending', 'processing') AND t.id NOT IN (SELECT id FROM done)) AS in_flight,
       count(*) FILTER (WHERE t.state NOT IN ('pending', 'processing')) AS finished,
       0::int8 AS push
  FROM target t";

/// `$1` an inbox or outbox id (NULL when looking up by `$2` source and `$3` key).
pub const JOURNEY_INBOX: &str = "SELECT {=inbox.id}, {inbox.source} AS name, {inbox.idempotency_key} AS key, {=inbox.state}, {=inbox.attempt}, {=inbox.last_error}, {=inbox.created_at}, {inbox.processed_at} AS updated_at, {=inbox.payload}, {=inbox.headers}
               FROM {inbox}
              WHERE {inbox.id} = $1
                 OR ({inbox.source} = $2 AND {inbox.idempotency_key} = $3)
                 OR {inbox.id}::text = (SELECT {outbox.headers} ->> 'x-inbox-id' FROM {outbox} WHERE {outbox.id} = $1)
              LIMIT 1";

/// `$1` an outbox id, `$2` the inbox id as text (the `x-inbox-id` header). The header has
/// no index: an operator's look-up scans the outbox once.
pub const JOURNEY_OUTBOX: &str =
    "SELECT {=outbox.id}, {outbox.topic} AS name, {=outbox.key}, {=outbox.state}, {=outbox.attempt}, {=outbox.last_error}, {=outbox.created_at}, {=outbox.updated_at}, {=outbox.payload}, {=outbox.headers}
               FROM {outbox}
              WHERE {outbox.id} = $1 OR {outbox.headers} ->> 'x-inbox-id' = $2
              ORDER BY {outbox.created_at}";

/// The console's overview, one line per outbox topic and per inbox source and consumption.
/// Delivered rows are not counted (retention's business), but no index holds only dead rows,
/// so this is one sequential scan of each table per call: the console calls it every 5 s
/// while its overview is open and visible, and retention keeps the tables small.
pub const STATE_COUNTS: &str = "
SELECT 'outbox' AS tbl, {outbox.topic} AS name, NULL::text AS consumption,
       count(*) FILTER (WHERE {outbox.state} = 'pending' AND {outbox.attempt} = 0) AS pending,
       count(*) FILTER (WHERE {outbox.state} = 'pending' AND {outbox.attempt} > 0) AS retrying,
       count(*) FILTER (WHERE {outbox.state} = 'processing') AS processing,
       count(*) FILTER (WHERE {outbox.state} = 'processing' AND {outbox.lease_expires_at} < clock_timestamp()) AS lease_expired,
       min({outbox.lease_expires_at}) FILTER (WHERE {outbox.state} = 'processing') AS next_lease_expiry,
       count(*) FILTER (WHERE {outbox.state} = 'dead') AS dead,
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min({outbox.created_at}) FILTER (WHERE {outbox.state} = 'pending')), 0)::float8 AS age,
       count(*) FILTER (WHERE {outbox.state} = 'sent' AND {outbox.updated_at} > clock_timestamp() - interval '5 minutes') AS done_recently
  FROM {outbox} WHERE {outbox.state} IN ('pending', 'processing', 'dead')
                   OR ({outbox.state} = 'sent' AND {outbox.updated_at} > clock_timestamp() - interval '5 minutes')
 GROUP BY {outbox.topic}
UNION ALL
SELECT 'inbox', {inbox.source}, {inbox.consumption}::text,
       count(*) FILTER (WHERE {inbox.state} = 'pending' AND {inbox.attempt} = 0),
       count(*) FILTER (WHERE {inbox.state} = 'pending' AND {inbox.attempt} > 0),
       count(*) FILTER (WHERE {inbox.state} = 'processing'),
       count(*) FILTER (WHERE {inbox.state} = 'processing' AND {inbox.lease_expires_at} < clock_timestamp()),
       min({inbox.lease_expires_at}) FILTER (WHERE {inbox.state} = 'processing'),
       count(*) FILTER (WHERE {inbox.state} = 'dead'),
       COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min({inbox.created_at}) FILTER (WHERE {inbox.state} = 'pending')), 0)::float8,
       count(*) FILTER (WHERE {inbox.state} = 'processed' AND {inbox.processed_at} > clock_timestamp() - interval '5 minutes')
  FROM {inbox} WHERE {inbox.state} IN ('pending', 'processing', 'dead')
                  OR ({inbox.state} = 'processed' AND {inbox.processed_at} > clock_timestamp() - interval '5 minutes')
 GROUP BY {inbox.source}, {inbox.consumption}
 ORDER BY 1 DESC, 2, 3";

// ---- the application's transaction (`crate::app_tx`) ----
// Run by the application's own driver inside its own transaction, after the core renders
// them in the driver's parameter style. Every parameter is bound as text (or NULL), so the
// casts are in the SQL; `CAST(… AS …)` rather than `::`, which SQLAlchemy's `:name` reads.

/// The fenced completion on the application's connection: the fence of [`COMPLETE`], with
/// `$1` id and `$2` claim token as text. One row affected, or the claim was lost.
pub const APP_COMPLETE: &str = "UPDATE {inbox} SET {inbox.state} = 'processed', {inbox.processed_at} = clock_timestamp(), {inbox.claim_token} = NULL, {inbox.lease_expires_at} = NULL
 WHERE {inbox.id} = CAST($1 AS uuid) AND {inbox.consumption} = (SELECT 'pull') AND {inbox.state} = 'processing'
   AND {inbox.claim_token} = CAST($2 AS uuid) AND {inbox.lease_expires_at} > clock_timestamp()";

// One statement for any number of rows (10,000 rows are one round trip). The core makes
// the ids and numbers the rows (`n`), so `sequence` (the key order) follows the caller's
// order; `delay_ms` counts from the database clock at the statement.
/// Outbox rows from `$1`, the JSON array `app_tx::publish_statement` writes.
pub const PUBLISH: &str = "
INSERT INTO {outbox} ({outbox.id}, {outbox.topic}, {outbox.key}, {outbox.aggregate_type}, {outbox.payload}, {outbox.headers}, {outbox.max_attempts}, {outbox.scheduled_at})
SELECT m.id, m.topic, m.key, m.aggregate_type, m.payload, m.headers, m.max_attempts,
       COALESCE(m.scheduled_at, clock_timestamp() + make_interval(secs => m.delay_ms / 1000))
  FROM jsonb_to_recordset(CAST($1 AS jsonb))
       AS m(n integer, id uuid, topic text, key text, aggregate_type text, payload jsonb,
            headers jsonb, max_attempts integer, delay_ms float8, scheduled_at timestamptz)
 ORDER BY m.n";

// The enqueue of pull rows runs the function migration 11 installs, which inserts and then
// reads every message's stored row in a statement of its own, so a repeat whose first row a
// concurrent transaction committed while this one waited is still found (its SQL says why).
// The function names the default `inbox` table: a schema of one's own creates it with its
// names (proto-docs/own-schema.md). `id` as text, so every driver reads it the same way.
/// Pull rows from `$1`, the JSON array `app_tx::enqueue_statement` writes; one result row
/// per message in order: `n`, `id`, `duplicate`.
pub const ENQUEUE: &str = "SELECT n, CAST(id AS text) AS id, duplicate FROM queuebox_enqueue_many(CAST($1 AS jsonb)) ORDER BY n";

// ---- pause and resume (migration 15; `RelayStore::pause`) ----
// The paused set is QueueBox's own table, named like `queuebox_schema_history` and the
// `queuebox_enqueue_many` function: a schema with custom table names creates it too
// (proto-docs/own-schema.md).

/// Pauses `$2` of kind `$1`; returns a row only when it was not paused already.
pub const PAUSE: &str =
    "INSERT INTO queuebox_paused (kind, name) VALUES ($1, $2) ON CONFLICT (kind, name) DO NOTHING RETURNING paused_at";
/// Resumes `$2` of kind `$1`; a row when it was paused. A resumed source wakes its idle pull
/// workers at once with the NOTIFY a new row sends (migration 3), rather than at their next
/// poll; the relay's loops poll often enough.
pub const RESUME: &str = "
WITH gone AS (DELETE FROM queuebox_paused WHERE kind = $1 AND name = $2 RETURNING kind, name)
SELECT g.name FROM gone g
  LEFT JOIN LATERAL (SELECT pg_notify('queuebox_inbox_pull', g.name) WHERE g.kind = 'source') n ON true";
/// Everything paused, in a stable order.
pub const LIST_PAUSED: &str =
    "SELECT kind, name, paused_at FROM queuebox_paused ORDER BY kind, name";
/// Whether any inbox row has source `$1` (the unique `(source, idempotency_key)` index).
pub const SOURCE_SEEN: &str = "SELECT EXISTS (SELECT 1 FROM {inbox} WHERE {inbox.source} = $1)";

/// Every statement by name, for tests that check them against a real server.
pub fn statements() -> Vec<(&'static str, &'static str)> {
    vec![
        ("INSERT", INSERT),
        ("LOOKUP_ID", LOOKUP_ID),
        ("INSERT_MANY", INSERT_MANY),
        ("LOOKUP_IDS", LOOKUP_IDS),
        ("CLAIM", CLAIM),
        ("CLAIM_FROM", CLAIM_FROM),
        ("OWNER_LOCK", OWNER_LOCK),
        ("OWNER_PING", OWNER_PING),
        ("EXPIRE_DEAD_OWNERS", EXPIRE_DEAD_OWNERS),
        ("RENEW", RENEW),
        ("COMPLETE_MANY", COMPLETE_MANY),
        ("COMPLETE", COMPLETE),
        ("RETRY", RETRY),
        ("DEAD", DEAD),
        ("RELEASE", RELEASE),
        ("SCHEMA_CHECK", SCHEMA_CHECK),
        ("TABLE_COLUMNS", TABLE_COLUMNS),
        ("MIGRATE_LOCK", MIGRATE_LOCK),
        ("MIGRATE_UNLOCK", MIGRATE_UNLOCK),
        ("INDEX_INVALID", INDEX_INVALID),
        ("HAS_HISTORY", HAS_HISTORY),
        ("HAS_TABLES", HAS_TABLES),
        ("HISTORY_CREATE", HISTORY_CREATE),
        ("HISTORY_SELECT", HISTORY_SELECT),
        ("HISTORY_INSERT", HISTORY_INSERT),
        ("HISTORY_MAX", HISTORY_MAX),
        ("RECLAIM_PUSH", RECLAIM_PUSH),
        ("CLAIM_PUSH", CLAIM_PUSH),
        ("EXPIRE_DEAD_RELAY_OUTBOX", EXPIRE_DEAD_RELAY_OUTBOX),
        ("EXPIRE_DEAD_RELAY_PUSH", EXPIRE_DEAD_RELAY_PUSH),
        ("FORWARD_PUSH", FORWARD_PUSH),
        ("FORWARD_PUSH_MANY", FORWARD_PUSH_MANY),
        ("INSERT_OUTBOX_MANY", INSERT_OUTBOX_MANY),
        ("RENEW_PUSH", RENEW_PUSH),
        ("DEAD_PUSH", DEAD_PUSH),
        ("INSERT_OUTBOX", INSERT_OUTBOX),
        ("RECLAIM_OUTBOX", RECLAIM_OUTBOX),
        ("RENEW_OUTBOX", RENEW_OUTBOX),
        ("CLAIM_OUTBOX", CLAIM_OUTBOX),
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
        ("REPLAY_OUTBOX", REPLAY_OUTBOX),
        ("DELETE_OUTBOX", DELETE_OUTBOX),
        ("FIND_DEAD_OUTBOX", FIND_DEAD_OUTBOX),
        ("FIND_DEAD_INBOX", FIND_DEAD_INBOX),
        ("DELETE_DEAD_OUTBOX", DELETE_DEAD_OUTBOX),
        ("DELETE_DEAD_INBOX", DELETE_DEAD_INBOX),
        ("REQUEUE_DEAD_INBOX", REQUEUE_DEAD_INBOX),
        ("JOURNEY_INBOX", JOURNEY_INBOX),
        ("JOURNEY_OUTBOX", JOURNEY_OUTBOX),
        ("STATE_COUNTS", STATE_COUNTS),
        ("CANCEL_INBOX", CANCEL_INBOX),
        ("CANCEL_OUTBOX", CANCEL_OUTBOX),
        ("APP_COMPLETE", APP_COMPLETE),
        ("PUBLISH", PUBLISH),
        ("ENQUEUE", ENQUEUE),
        ("PAUSE", PAUSE),
        ("RESUME", RESUME),
        ("LIST_PAUSED", LIST_PAUSED),
        ("SOURCE_SEEN", SOURCE_SEEN),
    ]
}
