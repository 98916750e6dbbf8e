//! The store interface: every SQL statement of the lease protocol sits behind these traits,
//! one implementation per database (River's driver layer). Queue logic in [`crate::worker`]
//! speaks only to [`Store`], and the relay only to [`relay::RelayStore`], so the same
//! behavioural suite runs against every backend. Each backend keeps its statements in one
//! `sql` module of named constants (`postgres::sql`, `sqlserver::sql`, same names on both
//! sides); [`crate::backend`] picks the backend from the database URL.

use std::any::Any;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::message::{ClaimRef, ClaimedRow, InsertOutcome, NewInboxMessage};

pub mod deadline;
pub mod names;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod relay;
#[cfg(feature = "sqlserver")]
pub mod sqlserver;
/// How a SQL Server connection string is spelled, in every build: the backend factory tells
/// a SQL Server URL from a wrong one even without the `sqlserver` feature.
#[path = "sqlserver/form.rs"]
pub(crate) mod sqlserver_form;

/// Each backend's statements (`postgres::sql`, `sqlserver::sql`) in every build: the
/// statements an application's own driver runs ([`crate::app_tx`]) are rendered for either
/// database by bindings built without that database's driver. Plain constants, no driver.
pub mod sql {
    #[cfg(feature = "postgres")]
    pub use super::postgres::sql as postgres;
    #[cfg(not(feature = "postgres"))]
    pub use super::postgres_sql as postgres;
    #[cfg(feature = "sqlserver")]
    pub use super::sqlserver::sql as sqlserver;
    #[cfg(not(feature = "sqlserver"))]
    pub use super::sqlserver_sql as sqlserver;
}
#[cfg(not(feature = "postgres"))]
#[path = "postgres/sql.rs"]
#[doc(hidden)]
pub mod postgres_sql;
#[cfg(not(feature = "sqlserver"))]
#[path = "sqlserver/sql.rs"]
#[doc(hidden)]
pub mod sqlserver_sql;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    SqlServer,
}

/// What a store's pool cannot get and why: the relay's readiness and
/// `queuebox_db_pool_*` metrics. PostgreSQL only; another backend reports all well.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolHealth {
    /// The last connect attempt's failure in the server's words (`sorry, too many clients
    /// already (SQLSTATE 53300)`, `Connection refused (os error 111)`); `None` once one
    /// succeeded.
    pub last_connect_error: Option<String>,
    /// The last connect attempt found the server unreachable (refused, no answer, shutting
    /// down or starting up): statements fail at once instead of waiting for a connection.
    pub unreachable: bool,
    /// Connecting fails and a statement got no connection within the last 10 s: the pool
    /// cannot get the connections it needs (readiness reports the database down).
    pub starved: bool,
    /// Statements that got no connection (timed out, failed fast, or past their caller's
    /// deadline) since start.
    pub acquire_failures: u64,
    /// Failed connect attempts seen since start.
    pub connect_failures: u64,
}

/// A parameter bound to a statement run through a [`StoreTx`].
///
/// Each variant has one database type, whatever its value: a backend that caches prepared
/// statements keys them by the SQL text *and* the variants of its parameters, so a statement
/// run first with an integer and then with a fraction is never decoded with the other call's
/// types.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// Bound without a type (PostgreSQL infers it from the statement).
    Null,
    Bool(bool),
    /// `int8` / `bigint`.
    Int(i64),
    /// `float8` / `float`.
    Float(f64),
    /// A number kept as its exact decimal text (`4.25`, `1e-400`, an integer beyond 64 bits):
    /// `numeric` on PostgreSQL, converted by SQL Server from its text. No digit is lost; a
    /// value outside the database's range is an error naming the parameter.
    Decimal(String),
    Text(String),
    /// Bound as JSON (`jsonb` on PostgreSQL, text on SQL Server).
    Json(Value),
}

impl SqlValue {
    /// JSON → parameter: strings are text, integers that fit 64 bits are `Int`, every other
    /// number is `Decimal` with the exact text the sender wrote (serde_json's
    /// `arbitrary_precision` keeps it), objects and arrays are JSON.
    pub fn from_json(v: &Value) -> SqlValue {
        match v {
            Value::Null => SqlValue::Null,
            Value::Bool(b) => SqlValue::Bool(*b),
            Value::Number(n) => n
                .as_i64()
                .map(SqlValue::Int)
                .unwrap_or_else(|| SqlValue::Decimal(n.to_string())),
            Value::String(s) => SqlValue::Text(s.clone()),
            other => SqlValue::Json(other.clone()),
        }
    }

    /// One letter per variant: the parameter types a statement is prepared with.
    pub fn type_code(&self) -> char {
        match self {
            SqlValue::Null => 'u',
            SqlValue::Bool(_) => 'b',
            SqlValue::Int(_) => 'i',
            SqlValue::Float(_) => 'f',
            SqlValue::Decimal(_) => 'd',
            SqlValue::Text(_) => 't',
            SqlValue::Json(_) => 'j',
        }
    }
}

/// One row of a query result: column name → JSON value.
pub type JsonRow = Map<String, Value>;

/// The operations on pull rows and inbox inserts. Every fenced write returns `Ok(false)`
/// when it matched no row (the caller turns that into [`crate::Error::ClaimLost`]).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// The table and column names the store's statements use (`database.*TableName`,
    /// `database.columnMapping`); the statements handed to an application's own driver
    /// ([`crate::app_tx`]) are rendered with them.
    fn names(&self) -> names::Names {
        names::Names::default()
    }

    /// Inserts one inbox row; a repeat of `(source, idempotency_key)` is `Duplicate`.
    async fn insert_inbox(&self, msg: &NewInboxMessage) -> Result<InsertOutcome>;

    /// Inserts several inbox rows, one outcome per row in order, each as
    /// [`Store::insert_inbox`] would answer it: a row the database refuses fails alone. A key
    /// repeated within `msgs` is stored once; its later rows are `Duplicate`s of the first.
    /// The relay groups concurrent receipts into one call (`relay/src/sources/group.rs`). A
    /// backend that can store them in one statement does (PostgreSQL); the default is
    /// [`insert_inbox_each`].
    async fn insert_inbox_many(&self, msgs: &[NewInboxMessage]) -> Vec<Result<InsertOutcome>> {
        insert_inbox_each(self, msgs).await
    }

    /// Claims up to `batch` due pull rows of `source`: pending rows whose time has come and
    /// processing rows whose lease expired, the head row of each aggregate only, skipping
    /// aggregates that hold a live lease. Rows come back in claim order.
    async fn claim_pull(
        &self,
        source: &str,
        batch: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>>;

    /// [`Store::claim_pull`] that records `owner`, the key of the claiming worker's
    /// [`OwnerSession`], on each row, so that the rows can be recovered as soon as that
    /// session ends ([`Store::expire_dead_owners`]). A backend without owner sessions never
    /// hands out a key, so its default ignores a `None` owner and claims as before.
    async fn claim_pull_owned(
        &self,
        source: &str,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedRow>> {
        debug_assert!(owner.is_none(), "this backend opens no owner sessions");
        self.claim_pull(source, batch, lease).await
    }

    /// Opens the session a pull worker holds for as long as it runs: a dedicated connection
    /// holding a lock on a fresh key, released by the database when the connection ends (the
    /// worker process died). `None`: the backend has none (SQL Server), and a dead worker's
    /// rows wait for their lease.
    async fn open_owner_session(&self) -> Result<Option<Box<dyn OwnerSession>>> {
        Ok(None)
    }

    /// [`Self::open_owner_session`] on `key` again if it is free, else on a fresh key: a
    /// holder whose session broke (its connection was closed, the connection table was full)
    /// keeps its key, so the rows it claimed under it (and may still be publishing or
    /// marking) are not taken for a dead holder's.
    async fn reopen_owner_session(&self, key: i64) -> Result<Option<Box<dyn OwnerSession>>> {
        let _ = key;
        self.open_owner_session().await
    }

    /// Expires the live leases of `source`'s pull rows whose owner session has ended, so the
    /// next claim takes them; returns how many. Rows without an owner are left to their lease.
    async fn expire_dead_owners(&self, _source: &str) -> Result<u64> {
        Ok(0)
    }

    /// Extends the leases of `claims` that are still live; returns the ids it renewed.
    async fn renew_pull(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<uuid::Uuid>>;

    /// Marks the row processed in autocommit (the plain handler mode).
    async fn complete_pull(&self, claim: &ClaimRef) -> Result<bool>;

    /// Completes many claims in one statement where the backend can; returns the ids it
    /// completed (a missing id lost its claim). The default runs them one by one.
    async fn complete_pull_many(&self, claims: &[ClaimRef]) -> Result<Vec<uuid::Uuid>> {
        let mut done = Vec::with_capacity(claims.len());
        for c in claims {
            if self.complete_pull(c).await? {
                done.push(c.id);
            }
        }
        Ok(done)
    }

    /// Back to pending after `delay`, `attempt + 1`, `last_error = error`.
    async fn retry_pull(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool>;

    /// To dead with `last_error = error`.
    async fn dead_pull(&self, claim: &ClaimRef, error: &str) -> Result<bool>;

    /// Back to pending at once without spending an attempt (a claimed row that never ran).
    async fn release_pull(&self, claim: &ClaimRef) -> Result<bool>;

    /// Opens a transaction for a handler's business writes.
    async fn begin(&self) -> Result<Box<dyn StoreTx>>;

    /// A wake-up stream for new pull rows of `source`, if the backend has one (LISTEN/NOTIFY).
    async fn listen(&self, source: &str) -> Result<Option<Box<dyn Wakeup>>>;
}

/// A handler's transaction. The completion runs inside it, so business writes and the
/// `processed` mark commit together or not at all.
#[async_trait]
pub trait StoreTx: Send {
    /// Runs a statement with positional parameters (`$1`… on PostgreSQL, `@P1`… on SQL
    /// Server); returns the affected row count.
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64>;

    /// Runs a query; each row comes back as a JSON object keyed by column name.
    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<JsonRow>>;

    /// The fenced completion, inside this transaction. `Ok(false)`: the claim was lost.
    async fn complete_pull(&mut self, claim: &ClaimRef) -> Result<bool>;

    async fn commit(self: Box<Self>) -> Result<()>;
    async fn rollback(self: Box<Self>) -> Result<()>;

    /// The backend's own transaction, for Rust callers who want the native driver API
    /// (e.g. `sqlx::Transaction<'static, Postgres>`).
    fn as_any_mut(&mut self) -> &mut (dyn Any + Send);
}

/// [`Store::insert_inbox_many`] for a backend without a statement for it: every row through
/// [`Store::insert_inbox`], concurrently, so grouping costs the backend no parallelism. The
/// first row of each `(source, idempotency_key)` goes first and its repeats after, so a repeat
/// is always the duplicate of the first, as the trait promises (all at once, a repeat could
/// win the race and make the first its duplicate).
pub async fn insert_inbox_each<S: Store + ?Sized>(
    store: &S,
    msgs: &[NewInboxMessage],
) -> Vec<Result<InsertOutcome>> {
    let mut seen = std::collections::HashSet::new();
    let (firsts, repeats): (Vec<usize>, Vec<usize>) =
        (0..msgs.len()).partition(|&i| seen.insert((&msgs[i].source, &msgs[i].idempotency_key)));
    let mut out: Vec<Option<Result<InsertOutcome>>> = msgs.iter().map(|_| None).collect();
    for wave in [firsts, repeats] {
        let answers = futures::future::join_all(wave.iter().map(|&i| store.insert_inbox(&msgs[i])));
        for (i, answer) in wave.iter().zip(answers.await) {
            out[*i] = Some(answer);
        }
    }
    out.into_iter()
        .map(|o| o.expect("every row is in one of the two waves"))
        .collect()
}

/// The session a pull worker holds so that others can tell when it has died
/// ([`Store::open_owner_session`]). Dropping it ends the session and releases its key.
#[async_trait]
pub trait OwnerSession: Send {
    /// The key the worker's claims record.
    fn key(&self) -> i64;

    /// Succeeds while the session, and so its lock, is alive.
    async fn check(&mut self) -> Result<()>;
}

/// Wakes a worker when new rows may be claimable.
#[async_trait]
pub trait Wakeup: Send {
    /// Returns when a notification arrives; an error means the stream broke (the worker
    /// falls back to polling and reconnects later).
    async fn wait(&mut self) -> Result<()>;
}

/// How many candidates a claim scans for `batch` rows: room for rows of busy aggregates
/// to be skipped without starving the batch. Computed here, never a public option.
pub fn candidate_limit(batch: u32) -> i64 {
    (3 * batch as i64).clamp(50, 500).max(batch as i64)
}
