//! PostgreSQL backend (sqlx). Every lease comparison uses `clock_timestamp()`, the database
//! clock at the moment of the statement, never the application's clock and never the
//! transaction start time (a handler's transaction may be old by the time it completes).
//!
//! TLS comes from the URL's libpq parameters (`sslmode=verify-full&sslrootcert=…&sslcert=…
//! &sslkey=…`); `tls` checks them before connecting and turns a handshake failure into
//! [`Error::Tls`] with its cause in words.

mod claim_pool;
mod claim_start;
pub mod migrate;
mod owner;
mod pool_watch;
mod pooler;
mod pull;
mod relay;
mod schema_guard;
pub mod sql;
mod tls;
mod tx;
mod value;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::ConnectOptions;

use crate::error::{Error, Result};
use crate::message::{ClaimRef, ClaimedRow, InsertOutcome, NewInboxMessage};
use crate::store::names::{Names, Rendered, Table};
use crate::store::{Backend, OwnerSession, Store, StoreTx, Wakeup};

pub use pool_watch::WatchedPool;
pub use tx::PgStoreTx;

/// The channel the inbox trigger notifies on insert of a pull row (payload: the source).
pub const PULL_CHANNEL: &str = "queuebox_inbox_pull";

/// The channel the outbox trigger (migration 0004) notifies once per inserting statement.
pub const OUTBOX_CHANNEL: &str = "queuebox_outbox";

/// How [`PgStore::connect_with`] sizes its pool and how long a statement waits for one of
/// its connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSettings {
    /// At most this many connections (at least 2).
    pub max_connections: u32,
    /// How long a statement waits for a pooled connection (opening one included) before it
    /// fails with [`Error::Unavailable`]; also bounds the first connection. The relay sets it
    /// from `database.connectionTimeoutMs`.
    pub acquire_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// A [`Store`] on a PostgreSQL pool.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// `pool` with its acquires watched (`pool_watch`): what the store's statements run on.
    db: WatchedPool,
    /// The pull claim's own connections (`claim_pool`), watched with `db`'s watch; `None`
    /// on a pool the application handed over, where claims run on `db`.
    claims: Option<WatchedPool>,
    /// Where the outbox claim's walk over keys resumes (`sql::CLAIM_OUTBOX`): the last key
    /// it took, so keys take turns when the oldest rows are all blocked by their keys.
    outbox_walk: std::sync::Arc<std::sync::Mutex<String>>,
    /// The paused topics' pattern the outbox claim skips (`RelayStore::exclude_outbox_topics`).
    outbox_paused: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Where each source's next pull claim starts its scan (`claim_start`).
    claim_starts: std::sync::Arc<claim_start::ClaimStarts>,
    /// The table and column names, and every statement rendered for them once.
    names: std::sync::Arc<Names>,
    sql: std::sync::Arc<Rendered>,
}

impl PgStore {
    /// Connects a pool of at most `max_connections` to `url` with the default acquire
    /// timeout ([`PoolSettings::default`]), failing with [`Error::Connect`] (password
    /// redacted) when the database is unreachable.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        Self::connect_with(
            url,
            &PoolSettings {
                max_connections,
                ..PoolSettings::default()
            },
        )
        .await
    }

    /// Connects a pool with `settings`; [`Self::connect`] with every setting spelled out.
    /// TLS comes from the URL's libpq parameters (`sslmode`, `sslrootcert`, `sslcert`,
    /// `sslkey`; see the `tls` module); a TLS failure is [`Error::Tls`], never a fall-back
    /// to plain text unless the URL says `sslmode=prefer` (sqlx's default) or `allow`.
    ///
    /// A URL that goes through a connection pooler in transaction or statement mode
    /// (PgBouncer) is refused with [`Error::Config`] at `database.url` before anything else
    /// runs, as is PgBouncer's refusal of a startup parameter (module `pooler`).
    pub async fn connect_with(url: &str, settings: &PoolSettings) -> Result<Self> {
        let opts: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| Error::Connect {
            url: redact_url(url),
            reason: format!("not a PostgreSQL URL: {e}"),
        })?;
        let opts = tls::prepare(url, opts.log_statements(tracing::log::LevelFilter::Trace))?;
        let wait = settings.acquire_timeout;
        // One direct connection first: its error says why (refused, auth, unknown database)
        // where a pool would only report a timeout. It stays open until the pooler check
        // below has run on it.
        let first = tokio::time::timeout(
            wait,
            <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts),
        )
        .await;
        let mut first = match first {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                return Err(pooler::refused_startup_parameter(url, &e)
                    .unwrap_or_else(|| tls::connect_error(url, opts.get_host(), e)))
            }
            Err(_) => {
                return Err(Error::Connect {
                    url: redact_url(url),
                    reason: format!("no answer within {} ms", wait.as_millis()),
                })
            }
        };
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections.max(2))
            .acquire_timeout(wait)
            .connect_with(opts.clone())
            .await
            .map_err(|e| tls::connect_error(url, opts.get_host(), e))?;
        // Refuse a transaction or statement pooler before anything relies on a session
        // (module `pooler`): the first connection and the pool's own, both open.
        let checking = std::time::Instant::now();
        let seen = async {
            let mut second = pool.acquire().await?;
            pooler::check(&mut first, &mut second).await
        };
        let seen = tokio::time::timeout(wait, seen).await;
        tracing::debug!(took_us = checking.elapsed().as_micros() as u64, seen = ?seen,
            "checked for a transaction or statement pooler");
        let _ = tokio::time::timeout(Duration::from_secs(1), sqlx::Connection::close(first)).await;
        let refused = match seen {
            Ok(Ok(pooler::Seen::OwnSessions)) => None,
            Ok(Ok(pooler::Seen::Pooled(evidence))) => Some(pooler::refusal(url, &evidence)),
            Ok(Err(e)) => Some(db_err("pooler check", e)),
            Err(_) => Some(Error::Connect {
                url: redact_url(url),
                reason: format!("no answer within {} ms", wait.as_millis()),
            }),
        };
        if let Some(e) = refused {
            pool.close().await;
            return Err(e);
        }
        let watch = pool_watch::PoolWatch::new(opts.clone(), wait);
        let mut store = Self::from_pool(pool);
        store.db = WatchedPool::new(store.pool.clone(), watch.clone());
        store.claims = Some(WatchedPool::new(claim_pool::open(opts, wait), watch));
        Ok(store)
    }

    /// Wraps an existing pool (an application that already has one).
    pub fn from_pool(pool: PgPool) -> Self {
        Self::with_names(pool, Names::default())
    }

    /// Wraps `pool` for tables and columns named `names` (`database.outboxTableName` …);
    /// every statement is rendered here, once.
    pub fn with_names(pool: PgPool, names: Names) -> Self {
        let sql = Rendered::new(&names, Backend::Postgres, &sql::statements());
        // A handed-over pool is watched with its own connect options.
        let watch = pool_watch::PoolWatch::new(
            (*pool.connect_options()).clone(),
            pool.options().get_acquire_timeout(),
        );
        PgStore {
            db: WatchedPool::new(pool.clone(), watch),
            pool,
            claims: None,
            outbox_walk: Default::default(),
            outbox_paused: Default::default(),
            claim_starts: Default::default(),
            names: std::sync::Arc::new(names),
            sql: std::sync::Arc::new(sql),
        }
    }

    /// The pool itself, unwatched (migrations, tests, an application's own statements).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The pool with its acquires watched (`pool_watch`): what the store's statements run
    /// on, so a statement that gets no connection says why.
    pub fn db(&self) -> &WatchedPool {
        &self.db
    }

    /// What the pool cannot get and why (the relay's readiness and metrics).
    pub fn pool_health(&self) -> crate::store::PoolHealth {
        self.db.health()
    }

    /// This store for tables and columns named `names`, on the same connections (the claim's
    /// own included, unlike [`Self::with_names`] on its pool).
    pub fn renamed(self, names: Names) -> Self {
        PgStore {
            claims: self.claims,
            db: self.db,
            ..Self::with_names(self.pool, names)
        }
    }

    /// Closes the store's connections (the claim's own too); statements afterwards fail.
    pub async fn close(&self) {
        if let Some(claims) = &self.claims {
            claims.raw().close().await;
        }
        self.pool.close().await;
    }

    /// The connections the pull claim runs on: its own small pool whose sessions plan it once
    /// when this store opened its pool itself, else [`Self::pool`] (module `claim_pool`).
    pub fn claim_pool(&self) -> &PgPool {
        self.claim_db().raw()
    }

    /// [`Self::claim_pool`] with its acquires watched: what the claim runs on.
    pub fn claim_db(&self) -> &WatchedPool {
        self.claims.as_ref().unwrap_or(&self.db)
    }

    /// The table and column names this store uses.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// `template` (a constant of [`sql`]) rendered for this store's names.
    pub(crate) fn sql(&self, template: &'static str) -> &str {
        self.sql.get(template)
    }

    /// Fails with [`Error::SchemaMissing`] unless both tables exist, and, on a schema with
    /// custom names, with [`Error::Config`] naming the first mapped column that is missing
    /// (the schema guards, proto-docs/own-schema.md).
    pub async fn check_schema(&self) -> Result<()> {
        for t in [Table::Inbox, Table::Outbox] {
            let table = self.names.table(Backend::Postgres, t);
            let found: Option<String> = sqlx::query_scalar(sql::SCHEMA_CHECK)
                .bind(&table)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| db_err("schema check", e))?;
            if found.is_none() && self.names.is_default() {
                return Err(Error::SchemaMissing {
                    table: self.names.table_display(t),
                });
            }
            if found.is_none() {
                // Migrations do not create a schema with custom names: the advice differs.
                return Err(Error::Config {
                    path: t.config_key().into(),
                    reason: format!(
                        "table {} does not exist; with custom names QueueBox creates no tables: create it as proto-docs/own-schema.md shows",
                        self.names.table_display(t)
                    ),
                });
            }
        }
        if !self.names.is_default() {
            schema_guard::check(&self.pool, &self.names).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn names(&self) -> Names {
        (*self.names).clone()
    }

    async fn insert_inbox(&self, msg: &NewInboxMessage) -> Result<InsertOutcome> {
        msg.validate()?;
        pull::insert_inbox(self, msg).await
    }

    async fn insert_inbox_many(&self, msgs: &[NewInboxMessage]) -> Vec<Result<InsertOutcome>> {
        let mut out: Vec<Option<Result<InsertOutcome>>> =
            msgs.iter().map(|m| m.validate().err().map(Err)).collect();
        let valid: Vec<(usize, &NewInboxMessage)> = msgs
            .iter()
            .enumerate()
            .filter(|(i, _)| out[*i].is_none())
            .collect();
        if valid.len() > 1 {
            let rows: Vec<&NewInboxMessage> = valid.iter().map(|(_, m)| *m).collect();
            match pull::insert_inbox_many(self, &rows).await {
                Ok(outcomes) => {
                    for ((i, _), o) in valid.iter().zip(outcomes) {
                        out[*i] = Some(o);
                    }
                }
                // Nothing was stored and no row would be: each gets the outage.
                Err(Error::Unavailable { operation, reason }) => {
                    for (i, _) in &valid {
                        out[*i] = Some(Err(Error::Unavailable {
                            operation,
                            reason: reason.clone(),
                        }));
                    }
                }
                // Nothing was stored: one by one, so a row the database refuses fails alone.
                // Also the way out of a deadlock with a concurrent group inserting two of the
                // same keys in the other order (a sender's retries), which PostgreSQL breaks
                // after `deadlock_timeout`; sorting the rows would avoid it but lose arrival
                // order.
                Err(e) => tracing::debug!(error = %e, rows = rows.len(),
                    "grouped inbox insert failed; inserting its rows one by one"),
            }
        }
        let mut done = Vec::with_capacity(msgs.len());
        for (m, o) in msgs.iter().zip(out) {
            done.push(match o {
                Some(o) => o,
                None => pull::insert_inbox(self, m).await,
            });
        }
        done
    }

    async fn claim_pull(
        &self,
        source: &str,
        batch: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>> {
        pull::claim(self, source, batch, lease, None).await
    }

    async fn claim_pull_owned(
        &self,
        source: &str,
        batch: u32,
        lease: Duration,
        owner: Option<i64>,
    ) -> Result<Vec<ClaimedRow>> {
        pull::claim(self, source, batch, lease, owner).await
    }

    async fn open_owner_session(&self) -> Result<Option<Box<dyn OwnerSession>>> {
        Ok(Some(Box::new(owner::open(&self.db, None).await?)))
    }

    async fn reopen_owner_session(&self, key: i64) -> Result<Option<Box<dyn OwnerSession>>> {
        Ok(Some(Box::new(owner::open(&self.db, Some(key)).await?)))
    }

    async fn expire_dead_owners(&self, source: &str) -> Result<u64> {
        let expired = owner::expire_dead_owners(self, source).await?;
        if expired > 0 {
            // Only a claim from the head takes expired leases: the next claim is one.
            self.claim_starts.restart_at_head(source);
        }
        Ok(expired)
    }

    async fn renew_pull(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<uuid::Uuid>> {
        pull::renew(self, claims, lease).await
    }

    async fn complete_pull(&self, claim: &ClaimRef) -> Result<bool> {
        pull::complete(self, claim).await
    }

    async fn complete_pull_many(&self, claims: &[ClaimRef]) -> Result<Vec<uuid::Uuid>> {
        pull::complete_many(self, claims).await
    }

    async fn retry_pull(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
        pull::retry(self, claim, delay, error).await
    }

    async fn dead_pull(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        pull::dead(self, claim, error).await
    }

    async fn release_pull(&self, claim: &ClaimRef) -> Result<bool> {
        let released = pull::release(self, claim).await?;
        if released {
            // The row is pending again at its old place, likely behind the claim start.
            self.claim_starts.restart_all_at_head();
        }
        Ok(released)
    }

    async fn begin(&self) -> Result<Box<dyn StoreTx>> {
        let tx = self.db.begin().await.map_err(|e| db_err("begin", e))?;
        Ok(Box::new(PgStoreTx::new(tx, self.sql(sql::COMPLETE))))
    }

    async fn listen(&self, source: &str) -> Result<Option<Box<dyn Wakeup>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(|e| db_err("listen", self.db.explain(e)))?;
        listener
            .listen(PULL_CHANNEL)
            .await
            .map_err(|e| db_err("listen", e))?;
        Ok(Some(Box::new(PgWakeup {
            listener,
            source: source.to_string(),
        })))
    }
}

struct PgWakeup {
    listener: sqlx::postgres::PgListener,
    source: String,
}

#[async_trait]
impl Wakeup for PgWakeup {
    async fn wait(&mut self) -> Result<()> {
        loop {
            let n = self
                .listener
                .recv()
                .await
                .map_err(|e| db_err("listen", e))?;
            if n.payload() == self.source {
                return Ok(());
            }
        }
    }
}

/// Maps a sqlx error to [`Error`], recognising a missing table and telling a database that
/// cannot be reached ([`Error::Unavailable`]) from a statement it refused.
pub(crate) fn db_err(operation: &'static str, e: sqlx::Error) -> Error {
    if let sqlx::Error::Io(io) = &e {
        if let Some(no) = io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<pool_watch::NoConnection>())
        {
            return Error::Unavailable {
                operation,
                reason: no.0.clone(),
            };
        }
    }
    if let sqlx::Error::Database(d) = &e {
        if d.code().as_deref() == Some("42P01") {
            // Only QueueBox's own tables mean "not migrated"; a handler's missing table is
            // an ordinary database error.
            let table = d.message().split('"').nth(1).unwrap_or("").to_string();
            if matches!(
                table.as_str(),
                "inbox" | "outbox" | "queuebox_schema_history"
            ) {
                return Error::SchemaMissing { table };
            }
        }
        if d.code().as_deref().is_some_and(is_unavailable_sqlstate) {
            return Error::Unavailable {
                operation,
                reason: format!(
                    "{} (SQLSTATE {})",
                    d.message(),
                    d.code().unwrap_or_default()
                ),
            };
        }
        return Error::Database {
            operation,
            message: d.message().to_string(),
            code: d.code().map(|c| c.to_string()),
        };
    }
    match e {
        sqlx::Error::PoolTimedOut => Error::Unavailable {
            operation,
            reason:
                "no database connection within the acquire timeout (database.connectionTimeoutMs)"
                    .into(),
        },
        sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => Error::Unavailable {
            operation,
            reason: e.to_string(),
        },
        e => Error::Database {
            operation,
            message: e.to_string(),
            code: None,
        },
    }
}

/// The trace context columns of an inbox row (migration 0005); none without a traceparent.
pub(crate) fn decode_trace(row: &sqlx::postgres::PgRow) -> Option<crate::trace::TraceContext> {
    use sqlx::Row;
    let traceparent: Option<String> = row.get("traceparent");
    traceparent.map(|traceparent| crate::trace::TraceContext {
        traceparent,
        tracestate: row.get("tracestate"),
    })
}

/// SQLSTATEs that mean the server cannot serve us now rather than that it refused the
/// statement: connection exceptions (class 08), too many connections, and the server
/// shutting down, crashed or starting up.
fn is_unavailable_sqlstate(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "53300" | "57P01" | "57P02" | "57P03")
}

/// Runs a lease-renewal statement (`$1` claim ids, `$2` claim tokens, `$3` lease in ms) for
/// `claims`; returns the ids whose claim still held and was extended.
pub(crate) async fn renew_leases(
    pool: &WatchedPool,
    sql: &str,
    operation: &'static str,
    claims: &[ClaimRef],
    lease: Duration,
) -> Result<Vec<uuid::Uuid>> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<uuid::Uuid> = claims.iter().map(|c| c.id).collect();
    let tokens: Vec<uuid::Uuid> = claims.iter().map(|c| c.token).collect();
    sqlx::query_scalar(sql)
        .bind(ids)
        .bind(tokens)
        .bind(lease.as_millis() as f64)
        .fetch_all(pool)
        .await
        .map_err(|e| db_err(operation, e))
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact_url(url: &str) -> String {
    crate::headers::redact_error(url, &[])
}
