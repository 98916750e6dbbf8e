//! The relay's store role: the push claim of the inbox relay, the outbox claim and its
//! fenced outcomes, retention, gauges and the admin operations. Backend-neutral; each
//! database implements [`RelayStore`] (PostgreSQL in `store::postgres::relay`).
//!
//! Every fenced write returns `Ok(false)` when it matched no row: the lease expired and
//! the row was reclaimed or claimed by another replica (a "claim lost").

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage};

/// An outbox row to insert (the relay's forward, an admin replay).
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutboxRow {
    pub topic: String,
    pub key: Option<String>,
    pub payload: Value,
    pub headers: Map<String, Value>,
    pub max_attempts: u32,
}

/// A claimed outbox row: what a publisher needs, and the fence of the claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxRow {
    pub id: Uuid,
    pub topic: String,
    pub key: Option<String>,
    pub aggregate_type: Option<String>,
    pub payload: Value,
    pub headers: Map<String, Value>,
    /// Failed deliveries so far (0 on the first delivery).
    pub attempt: i32,
    pub max_attempts: i32,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ClaimedOutbox {
    pub row: OutboxRow,
    pub claim: ClaimRef,
}

/// The outcome of forwarding a claimed push row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarded {
    /// The outbox row was written and the inbox row marked processed, in one transaction.
    Done { outbox_id: Uuid },
    /// The fence failed; the outbox insert was rolled back.
    ClaimLost,
}

/// A dead (or any terminal) row for the admin listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadRow {
    pub id: Uuid,
    /// The outbox topic, or the inbox source.
    pub topic_or_source: String,
    pub key: Option<String>,
    pub attempt: i32,
    pub last_error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// Which outbox rows an admin replay moves back to pending (only `sent` or `dead` rows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayFilter {
    pub ids: Option<Vec<Uuid>>,
    pub topic: Option<String>,
    pub source: Option<String>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// Only `dead` rows (else `sent` and `dead`).
    pub dead_only: bool,
}

impl ReplayFilter {
    /// True when no criterion is set (a replay of everything is refused).
    pub fn is_empty(&self) -> bool {
        self.ids.is_none()
            && self.topic.is_none()
            && self.source.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
    }
}

/// The outbox gauges the relay exports, computed by the database clock.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutboxBacklog {
    pub pending: i64,
    /// Seconds since the oldest pending row was created; 0 when none.
    pub oldest_pending_age: f64,
}

/// The inbox gauges, computed by the database clock: push rows (the inbox relay's backlog)
/// and pull rows (waiting for application workers, which the relay never claims) apart, so
/// a pull backlog does not look like a stuck relay.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InboxBacklog {
    /// Seconds since the oldest pending push row was created; 0 when none.
    pub push_oldest_pending_age: f64,
    /// Seconds since the oldest pending pull row was created; 0 when none.
    pub pull_oldest_pending_age: f64,
}

/// What [`RelayStore::expire_dead_relay_owners`] put back to pending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayOwnersExpired {
    pub outbox: u64,
    pub push: u64,
}

#[async_trait]
pub trait RelayStore: Send + Sync + 'static {
    // ---- inbox relay (push rows only; a pull row is invisible here) ----

    /// Push rows whose lease expired (or has none) go back to pending; returns how many.
    async fn reclaim_push(&self) -> Result<u64>;

    /// Claims up to `batch` due pending push rows, the head row of each aggregate only
    /// (across all sources), skipping aggregates with a row in processing.
    async fn claim_push(&self, batch: u32, lease: Duration) -> Result<Vec<ClaimedRow>> {
        self.claim_push_owned(batch, lease, None).await
    }

    /// [`RelayStore::claim_push`], recording `owner` (the relay's owner session key, see
    /// [`RelayStore::expire_dead_relay_owners`]) on the claimed rows.
    async fn claim_push_owned(
        &self,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedRow>>;

    /// In one transaction: inserts `row` and marks the inbox row processed (fenced). A lost
    /// fence rolls the insert back.
    async fn forward_push(&self, claim: &ClaimRef, row: &NewOutboxRow) -> Result<Forwarded>;

    /// [`RelayStore::forward_push`] for a batch, one outcome per row in order; the outbox rows
    /// are inserted in the batch's order, so their `sequence` keeps it. PostgreSQL forwards
    /// the batch in one transaction (an `Err`: none was forwarded); the default forwards row
    /// by row (an `Err`: the rows before the failing one were).
    async fn forward_push_many(&self, rows: &[(ClaimRef, NewOutboxRow)]) -> Result<Vec<Forwarded>> {
        let mut out = Vec::with_capacity(rows.len());
        for (claim, row) in rows {
            out.push(self.forward_push(claim, row).await?);
        }
        Ok(out)
    }

    /// Marks a claimed push row dead (fenced).
    /// Extends the leases of claimed push rows to `lease` from now in one statement, fenced
    /// like every write; returns the ids renewed (a claim missing from the result is lost).
    /// The inbox relay renews the rows of a batch that wait for their forward.
    async fn renew_push(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>>;

    async fn dead_push(&self, claim: &ClaimRef, error: &str) -> Result<bool>;

    // ---- outbox relay ----

    /// Processing outbox rows whose lease expired go back to pending without spending an
    /// attempt; returns how many.
    async fn reclaim_outbox(&self) -> Result<u64>;

    /// Claims up to `batch` due pending rows in `(scheduled_at, sequence)` order, keeping
    /// the key head rule: a row with a non-empty key only when no row of that key with a
    /// lower sequence is pending or processing.
    async fn claim_outbox(&self, batch: u32, lease: Duration) -> Result<Vec<ClaimedOutbox>> {
        self.claim_outbox_owned(batch, lease, None).await
    }

    /// [`RelayStore::claim_outbox`], recording `owner` on the claimed rows.
    async fn claim_outbox_owned(
        &self,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedOutbox>>;

    /// Puts the outbox rows and push rows claimed by relays whose owner session is gone
    /// (the process died: PostgreSQL released its advisory lock) back to pending, without
    /// waiting for their lease and without spending an attempt; returns how many of each.
    /// A relay opens its session with [`crate::Store::open_owner_session`] and claims with
    /// its key. A backend without owner sessions (SQL Server) finds none: leases only.
    async fn expire_dead_relay_owners(&self) -> Result<RelayOwnersExpired> {
        Ok(RelayOwnersExpired::default())
    }

    /// Extends the lease of the given claimed outbox rows to `lease` from now, in one
    /// statement, fenced like every write (`processing`, same token, lease still live).
    /// Returns the ids renewed; a claim missing from the result is lost. The relay calls it
    /// every `claimTimeoutMs / 3` while a batch is being published, on the pool, outside any
    /// transaction. The default refuses, so a backend without it keeps compiling; such a
    /// relay writes nothing on a failed renewal and relies on the fenced outcome writes.
    async fn renew_outbox(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        let _ = (claims, lease);
        Err(crate::error::Error::InvalidInput(
            "outbox lease renewal is not implemented by this store".into(),
        ))
    }

    async fn mark_sent(&self, claim: &ClaimRef) -> Result<bool>;

    /// Marks many claimed rows sent in one statement, each fenced like [`Self::mark_sent`];
    /// returns the ids marked (a claim missing from the result was lost). The relay marks a
    /// batch's deliveries with it, so a sent row costs a share of one statement, not one.
    async fn mark_sent_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>>;

    /// Subscribes to the notification migration 0004's trigger sends after every statement
    /// that inserts outbox rows, so the relay claims within milliseconds of a commit instead
    /// of a poll interval later. `None` (the default, and SQL Server) means poll only.
    async fn listen_outbox(&self) -> Result<Option<Box<dyn crate::store::Wakeup>>> {
        Ok(None)
    }
    /// Back to pending after `delay` with `attempt + 1` and `last_error`.
    async fn retry_outbox(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool>;
    async fn dead_outbox(&self, claim: &ClaimRef, error: &str) -> Result<bool>;

    // ---- operations ----

    /// Pending outbox rows and the age of the oldest (the outbox loop's gauges).
    async fn outbox_backlog(&self) -> Result<OutboxBacklog>;
    /// The age of the oldest pending push row and of the oldest pending pull row (the inbox
    /// relay's gauges). Separate from the outbox's so neither loop counts the other's table.
    async fn inbox_backlog(&self) -> Result<InboxBacklog>;

    /// Deletes at most `batch` terminal outbox rows (`sent`, `dead`) last updated before
    /// `max_age` ago; returns how many.
    async fn delete_old_outbox(&self, max_age: Duration, batch: u32) -> Result<u64>;
    /// Deletes at most `batch` terminal outbox rows beyond the newest `keep` of each state.
    async fn delete_excess_outbox(&self, keep: u64, batch: u32) -> Result<u64>;
    /// Deletes at most `batch` terminal inbox rows (`processed`, `dead`) created before
    /// `max_age` ago.
    async fn delete_old_inbox(&self, max_age: Duration, batch: u32) -> Result<u64>;

    async fn list_dead_outbox(&self, limit: u32) -> Result<Vec<DeadRow>>;
    async fn list_dead_inbox(&self, limit: u32) -> Result<Vec<DeadRow>>;
    /// One inbox row by id (any state), for an admin replay.
    async fn inbox_row(&self, id: Uuid) -> Result<Option<InboxMessage>>;
    /// Inserts a new outbox row; returns its id.
    async fn insert_outbox(&self, row: &NewOutboxRow) -> Result<Uuid>;
    /// Moves matching `sent`/`dead` rows back to pending with `attempt = 0`; returns how many.
    async fn replay_outbox(&self, filter: &ReplayFilter) -> Result<u64>;
    /// Deletes the given outbox rows unless they are being delivered; returns how many.
    async fn delete_outbox(&self, ids: &[Uuid]) -> Result<u64>;

    // The operator commands (`queuebox dead`, `queuebox inspect`). Only PostgreSQL
    // implements them; the defaults refuse, naming the backend, rather than half-work.

    /// The dead rows of `filter.table` matching the filter, newest first, at most `limit`.
    async fn find_dead(&self, filter: &DeadFilter) -> Result<Vec<DeadRow>> {
        let _ = filter;
        Err(operator_unsupported())
    }
    /// Deletes the given rows of `table` that are still `dead`; returns how many.
    async fn delete_dead(&self, table: DeadTable, ids: &[Uuid]) -> Result<u64> {
        let _ = (table, ids);
        Err(operator_unsupported())
    }
    /// Moves the given inbox rows that are still `dead` back to pending with `attempt = 0`
    /// (push rows are forwarded again by the inbox relay, pull rows claimed by workers).
    async fn requeue_dead_inbox(&self, ids: &[Uuid]) -> Result<u64> {
        let _ = ids;
        Err(operator_unsupported())
    }
    /// A message's journey: its inbox row (found by `id`, by `source:key`, or as the
    /// `x-inbox-id` of the outbox row `id`) and the outbox rows carrying that `x-inbox-id`
    /// (or the outbox row `id` itself).
    async fn journey(&self, target: &JourneyTarget) -> Result<Journey> {
        let _ = target;
        Err(operator_unsupported())
    }
    /// The console's overview: live and dead rows counted by state, per outbox topic and per
    /// inbox source, with the oldest pending row's age and the processing rows' leases
    /// (delivered `sent`/`processed` rows are not counted: retention removes them anyway).
    async fn state_counts(&self) -> Result<Vec<StateCounts>> {
        Err(operator_unsupported())
    }
    /// Cancels the pending rows `target` names (proto-docs/states.md, "Cancelled"): in one
    /// statement, fenced by state, so a row being handled is left to finish or fail and is
    /// counted in [`Cancelled::in_flight`], and no row is cancelled twice.
    async fn cancel(&self, target: &CancelTarget) -> Result<Cancelled> {
        let _ = target;
        Err(crate::Error::InvalidInput(
            "cancel supports PostgreSQL only, not SQL Server".into(),
        ))
    }

    // ---- pause and resume (proto-docs/states.md, "Paused") ----
    //
    // The paused set lives in the database (migration 15), so every relay replica and every
    // worker process obeys it: the pull and push claims read it themselves; the outbox claim
    // skips the topics of [`RelayStore::exclude_outbox_topics`], which the relay sets from
    // [`RelayStore::list_paused`] once a second. SQL Server refuses pause (the defaults).

    /// Pauses `name` of `kind`; `Ok(false)` when it was paused already. Whether the name
    /// exists is the caller's check ([`RelayStore::source_seen`], the relay's configuration).
    async fn pause(&self, kind: PauseKind, name: &str) -> Result<bool> {
        let _ = (kind, name);
        Err(pause_unsupported())
    }
    /// Resumes `name` of `kind`; `Ok(false)` when it was not paused.
    async fn resume(&self, kind: PauseKind, name: &str) -> Result<bool> {
        let _ = (kind, name);
        Err(pause_unsupported())
    }
    /// Everything paused now. Empty on a backend without pause.
    async fn list_paused(&self) -> Result<Vec<Paused>> {
        Ok(Vec::new())
    }
    /// Whether any inbox row (of any state) has `source`: a source that only applications
    /// enqueue to is in no relay configuration, yet can be paused once it has rows. Only the
    /// pause's name check asks, so a backend without pause refuses here too.
    async fn source_seen(&self, source: &str) -> Result<bool> {
        let _ = source;
        Err(pause_unsupported())
    }
    /// From now on the outbox claim leaves pending the rows whose topic matches `pattern` (a
    /// PostgreSQL regular expression, [`topics_pattern`]); `None` claims every topic.
    fn exclude_outbox_topics(&self, pattern: Option<String>) {
        let _ = pattern;
    }
}

fn pause_unsupported() -> crate::Error {
    crate::Error::InvalidInput(
        "pause and resume support PostgreSQL only, not SQL Server (the table exists since migration 15; no claim reads it there yet)"
            .into(),
    )
}

/// What a pause names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PauseKind {
    /// An inbox source: a pull source's workers claim nothing of it; a push source's rows
    /// are not forwarded by the inbox relay.
    Source,
    /// An outbox destination of the relay's configuration: the topics routed to it.
    Destination,
    /// One outbox topic, whatever its route.
    Topic,
}

impl PauseKind {
    pub const ALL: [PauseKind; 3] = [PauseKind::Source, PauseKind::Destination, PauseKind::Topic];

    /// The word stored in `queuebox_paused.kind` and used by the CLI and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseKind::Source => "source",
            PauseKind::Destination => "destination",
            PauseKind::Topic => "topic",
        }
    }

    /// The kind a word names; an error lists the three.
    pub fn parse(word: &str) -> Result<PauseKind> {
        PauseKind::ALL
            .into_iter()
            .find(|k| k.as_str() == word)
            .ok_or_else(|| {
                crate::Error::InvalidInput(format!(
                    "kind: `{word}` is not source, destination or topic"
                ))
            })
    }
}

/// One paused thing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paused {
    pub kind: PauseKind,
    pub name: String,
    pub paused_at: DateTime<Utc>,
}

/// The pattern for [`RelayStore::exclude_outbox_topics`]: a topic is excluded when it is
/// paused itself, or when the first of `routes` (topic globs in order, each with whether its
/// destination is paused) that matches it goes to a paused destination, exactly the route
/// the relay would deliver it by. `None` when nothing is excluded.
///
/// Globs are the configuration's (`*` any run of characters without a `.`, `**` any run);
/// first-match order is kept with a negative lookahead over the earlier routes' globs.
pub fn topics_pattern(paused_topics: &[&str], routes: &[(&str, bool)]) -> Option<String> {
    let mut alternatives: Vec<String> = paused_topics.iter().map(|t| glob_regex(t, true)).collect();
    for (i, (glob, paused)) in routes.iter().enumerate() {
        if !paused {
            continue;
        }
        let earlier: Vec<String> = routes[..i]
            .iter()
            .map(|(g, _)| glob_regex(g, false))
            .collect();
        let this = glob_regex(glob, false);
        alternatives.push(if earlier.is_empty() {
            this
        } else {
            format!("(?!(?:{})$)(?:{this})", earlier.join("|"))
        });
    }
    (!alternatives.is_empty()).then(|| format!("^(?:{})$", alternatives.join("|")))
}

/// A glob (or, `literal`, a plain topic) as an anchored-by-caller regular expression: every
/// ASCII character but letters and digits is escaped (a backslash before such a character is
/// always the character itself in PostgreSQL's regular expressions).
fn glob_regex(glob: &str, literal: bool) -> String {
    let mut out = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if !literal => {
                if chars.peek() == Some(&'*') {
                    chars.next();
                    out.push_str(".*");
                } else {
                    out.push_str("[^.]*");
                }
            }
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Which rows a cancel names. Built with [`CancelTarget::inbox`] or [`CancelTarget::outbox`],
/// which refuse a target that names no row in particular.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelTarget {
    /// Pull inbox rows: by id, or within `source` by idempotency key or aggregate id.
    Inbox {
        source: Option<String>,
        id: Option<Uuid>,
        key: Option<String>,
        aggregate: Option<String>,
    },
    /// Outbox rows: by id, or by key (the outbox's ordering key, its aggregate), optionally
    /// within one topic.
    Outbox {
        topic: Option<String>,
        id: Option<Uuid>,
        key: Option<String>,
    },
}

impl CancelTarget {
    /// Exactly one of `id`, `key` and `aggregate`; `source` is required with a key or an
    /// aggregate (an idempotency key or an aggregate id means something within one source).
    pub fn inbox(
        source: Option<String>,
        id: Option<Uuid>,
        key: Option<String>,
        aggregate: Option<String>,
    ) -> Result<Self> {
        let given = [id.is_some(), key.is_some(), aggregate.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(crate::Error::InvalidInput(
                "cancel inbox: give exactly one of id, key or aggregate".into(),
            ));
        }
        if source.is_none() && id.is_none() {
            return Err(crate::Error::InvalidInput(
                "cancel inbox: source is required with a key or an aggregate".into(),
            ));
        }
        Ok(CancelTarget::Inbox {
            source,
            id,
            key,
            aggregate,
        })
    }

    /// Exactly one of `id` and `key`.
    pub fn outbox(topic: Option<String>, id: Option<Uuid>, key: Option<String>) -> Result<Self> {
        if id.is_some() == key.is_some() {
            return Err(crate::Error::InvalidInput(
                "cancel outbox: give exactly one of id or key".into(),
            ));
        }
        Ok(CancelTarget::Outbox { topic, id, key })
    }

    /// A target from the names every caller outside Rust hands over, as a JSON object of
    /// `id`, `source`, `key`, `aggregate` (inbox) or `id`, `topic`, `key` (outbox): the admin
    /// API's body and the bindings' cancel. `table` is `inbox` or `outbox`. An unknown or
    /// mistyped field, or a field of the other table, is refused by name; then the rules of
    /// [`CancelTarget::inbox`] and [`CancelTarget::outbox`] apply.
    pub fn from_json(table: &str, v: &Value) -> Result<Self> {
        let bad = |m: String| crate::Error::InvalidInput(format!("cancel {table}: {m}"));
        let obj = v
            .as_object()
            .ok_or_else(|| bad("the target must be a JSON object".into()))?;
        let allowed: &[&str] = match table {
            "inbox" => &["id", "source", "key", "aggregate"],
            "outbox" => &["id", "topic", "key"],
            _ => {
                return Err(crate::Error::InvalidInput(format!(
                    "cancel: table must be inbox or outbox, not `{table}`"
                )))
            }
        };
        let text = |name: &str| -> Result<Option<String>> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(format!("{name} must be a string"))),
            }
        };
        for name in obj.keys() {
            if !allowed.contains(&name.as_str()) {
                let hint = match (table, name.as_str()) {
                    ("inbox", "topic") => " (an inbox row has a source, not a topic)",
                    ("outbox", "source" | "aggregate") => {
                        " (an outbox row is cancelled by id, or by key within an optional topic)"
                    }
                    _ => "",
                };
                return Err(bad(format!("`{name}` is not a field of the target{hint}")));
            }
        }
        let id = text("id")?
            .map(|s| Uuid::parse_str(&s).map_err(|e| bad(format!("id is not a UUID: {e}"))))
            .transpose()?;
        if table == "inbox" {
            CancelTarget::inbox(text("source")?, id, text("key")?, text("aggregate")?)
        } else {
            CancelTarget::outbox(text("topic")?, id, text("key")?)
        }
    }
}

/// What a cancel did with the rows it named. A name that matched no row gives all zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled {
    /// Pending (or scheduled, or waiting for a retry) rows now `cancelled`.
    pub cancelled: u64,
    /// Rows being handled (`processing`), left to finish or fail normally.
    pub in_flight: u64,
    /// Rows already terminal (`processed`/`sent`, `dead`, or `cancelled` before), unchanged.
    pub finished: u64,
    /// Inbox push rows, never cancelled: the inbox relay forwards them within moments.
    pub push: u64,
}

fn operator_unsupported() -> crate::Error {
    crate::Error::InvalidInput(
        "`queuebox dead`, `queuebox inspect` and the console's views support PostgreSQL only, \
         not SQL Server; use the statements of proto-docs/dead-letter.md"
            .into(),
    )
}

/// One line of the console's overview: the rows of one outbox topic or one inbox source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateCounts {
    /// `outbox` or `inbox`.
    pub table: String,
    /// The outbox topic, or the inbox source.
    pub topic_or_source: String,
    /// Inbox rows: `push` or `pull`; none for outbox rows.
    pub consumption: Option<String>,
    /// Pending rows not tried yet (`attempt = 0`).
    pub pending: i64,
    /// Pending rows waiting for a retry after a failure (`attempt > 0`).
    pub retrying: i64,
    pub processing: i64,
    /// Processing rows whose lease has run out: the holder died or hangs (reclaimed soon).
    pub lease_expired: i64,
    /// The earliest lease expiry among the processing rows.
    pub next_lease_expiry: Option<DateTime<Utc>>,
    pub dead: i64,
    /// Seconds since the oldest pending row was created, by the database clock; 0 when none.
    pub oldest_pending_age: f64,
    /// Rows finished (outbox `sent`, inbox `processed`) in the last five minutes: the recent
    /// throughput, so a topic that stopped moving stands out.
    pub done_last_5_min: i64,
}

/// The table an operator command looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadTable {
    Inbox,
    Outbox,
}

/// Which dead rows `queuebox dead` lists, replays or deletes (every criterion is ANDed).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadFilter {
    pub table: DeadTable,
    pub ids: Option<Vec<Uuid>>,
    /// The inbox source, or an outbox row's `x-source` header.
    pub source: Option<String>,
    /// Outbox only (an inbox row has no topic).
    pub topic: Option<String>,
    /// Only rows created longer ago than this, by the database clock.
    pub older_than: Option<Duration>,
    pub limit: u32,
}

/// What `queuebox inspect` looks up.
#[derive(Debug, Clone, PartialEq)]
pub enum JourneyTarget {
    /// An inbox or outbox row id.
    Id(Uuid),
    /// An inbox row by its source and idempotency key.
    SourceKey { source: String, key: String },
}

/// One row of a message's journey.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JourneyRow {
    pub id: Uuid,
    /// The outbox topic, or the inbox source.
    pub topic_or_source: String,
    /// The outbox key, or the inbox idempotency key.
    pub key: Option<String>,
    pub state: String,
    pub attempt: i32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The outbox row's last change, or the inbox row's `processed_at`.
    pub updated_at: Option<DateTime<Utc>>,
    /// The stored payload and headers (the console shows them; `inspect --json` prints them).
    pub payload: Value,
    pub headers: Value,
}

/// A message's inbox row (none for an outbox-only message) and its outbox rows, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Journey {
    pub inbox: Option<JourneyRow>,
    pub outbox: Vec<JourneyRow>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(table: &str, v: Value) -> String {
        match CancelTarget::from_json(table, &v) {
            Err(crate::Error::InvalidInput(m)) => m,
            other => panic!("{table} {v}: {other:?}"),
        }
    }

    #[test]
    fn a_cancel_target_from_json_names_what_is_missing_or_wrong() {
        let id = Uuid::new_v4();
        assert_eq!(
            CancelTarget::from_json("inbox", &json!({"source": "s", "key": "k"})).unwrap(),
            CancelTarget::inbox(Some("s".into()), None, Some("k".into()), None).unwrap()
        );
        assert_eq!(
            CancelTarget::from_json("outbox", &json!({"id": id.to_string(), "topic": null}))
                .unwrap(),
            CancelTarget::outbox(None, Some(id), None).unwrap()
        );
        let m = refused("inbox", json!({"source": "s"}));
        assert!(m.contains("id, key or aggregate"), "{m}");
        let m = refused("outbox", json!({}));
        assert!(m.contains("id or key"), "{m}");
        let m = refused("inbox", json!({"key": "k"}));
        assert!(m.contains("source is required"), "{m}");
        let m = refused("inbox", json!({"id": id.to_string(), "topic": "t"}));
        assert!(m.contains("`topic`"), "{m}");
        let m = refused("outbox", json!({"aggregate": "a"}));
        assert!(m.contains("`aggregate`"), "{m}");
        let m = refused("inbox", json!({"id": "nope"}));
        assert!(m.contains("id is not a UUID"), "{m}");
        let m = refused("inbox", json!({"source": 1, "key": "k"}));
        assert!(m.contains("source must be a string"), "{m}");
        let m = refused("dead", json!({"id": id.to_string()}));
        assert!(m.contains("inbox or outbox"), "{m}");
    }
}
