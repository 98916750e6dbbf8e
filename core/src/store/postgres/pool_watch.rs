//! What the store's pools cannot get, and why: the last connect error, failing
//! fast while the database is known to be unreachable, and a caller's deadline.
//!
//! sqlx's pool keeps the reason it could not open a connection to itself: it retries a
//! refused connection and PostgreSQL's `too many clients already` / `remaining connection
//! slots are reserved …` (SQLSTATE 53300) in silence until the acquire timeout, then
//! reports only `PoolTimedOut`, and its options have no hook that sees a failed connect. So
//! the store acquires through a [`WatchedPool`]: once an acquire has waited
//! [`PROBE_AFTER`] (no idle connection, a new one is being opened), the store's
//! [`PoolWatch`] opens one connection of its own with the pools' options (same server,
//! user, TLS), closes it at once, and keeps what the server said (at most once a second
//! while connecting works, so a busy pool's waits do not churn connections). While that
//! fails it tries again every 0.1–1 s, and clears the failure at the first success. Both
//! pools of a store (the main pool and the claim's own) connect to the same server as the
//! same user and share one watch.
//!
//! What the watch knows is used three ways:
//! - an acquire that times out fails with the last connect error in its text
//!   (`no database connection within the acquire timeout … the last attempt to open one
//!   failed 0.4 s ago: sorry, too many clients already (SQLSTATE 53300)`), or, when no
//!   connect failed, with the pool's connections all in use; every log line and error
//!   built from it carries the cause;
//! - while the last connect attempt found the server unreachable (refused, no answer,
//!   shutting down or starting up: not a full connection table, where the pool's own
//!   connections still serve), an acquire fails at once instead of waiting
//!   `database.connectionTimeoutMs`, and one already waiting fails as soon as the watch
//!   learns it; the relay answers such an ingest 503 at once;
//! - [`PoolWatch::health`] reports the failure and whether acquires are failing for want
//!   of a connection, for the relay's readiness and metrics.
//!
//! An acquire also ends at the caller's deadline ([`crate::store::deadline`]), if any.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, TryFutureExt, TryStreamExt};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, Postgres, Transaction};
use tokio::time::Instant;

use crate::store::PoolHealth;

/// How long an acquire waits before the watch checks whether connections can be opened:
/// long enough that an acquire served by an idle or just-released connection never
/// triggers a connect of the watch's own.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(50);
/// After a connect of the watch succeeded, the next waits at least this long: under load,
/// acquires that wait for a busy pool would otherwise open and close a connection each time.
const PROBE_COOLDOWN: Duration = Duration::from_secs(1);
/// The watch's retries while connecting fails: the first after this, doubling up to
/// [`REPROBE_MAX`]. How soon acquires stop failing fast once the database is back.
const REPROBE_MIN: Duration = Duration::from_millis(100);
const REPROBE_MAX: Duration = Duration::from_secs(1);
/// How long after an acquire failed for want of a connection [`PoolHealth::starved`] holds,
/// while connecting still fails.
pub(crate) const STARVED_FOR: Duration = Duration::from_secs(10);

/// One store's connect failures and connection shortages.
pub(crate) struct PoolWatch {
    opts: PgConnectOptions,
    acquire_timeout: Duration,
    state: Mutex<State>,
    /// True while the last connect attempt found the server unreachable; waiting acquires
    /// watch it to fail as soon as it turns true.
    unreachable: tokio::sync::watch::Sender<bool>,
    /// A connect loop of the watch runs ([`PoolWatch::probe`]).
    probing: AtomicBool,
    acquire_failures: AtomicU64,
    connect_failures: AtomicU64,
}

impl fmt::Debug for PoolWatch {
    /// Without the connect options (they hold the password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolWatch")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// The last connect attempt's failure; `None` once one succeeded.
    failure: Option<Failure>,
    /// When an acquire last failed for want of a connection.
    last_acquire_failure: Option<Instant>,
    /// When a connect of the watch last succeeded.
    last_ok: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Failure {
    /// What the server (or the network) said, with the SQLSTATE.
    text: String,
    /// When it was last seen (renewed by each failing retry).
    at: Instant,
    /// Refused, no answer, shutting down or starting up: no connection of the pool can
    /// work now, so acquires fail fast. Not a full connection table (53300), where the
    /// pool's open connections still serve.
    unreachable: bool,
}

/// Why a statement got no connection: carried out of sqlx as the inner error of an I/O
/// error, and turned into `Error::Unavailable` with this text by `db_err`.
#[derive(Debug)]
pub(crate) struct NoConnection(pub String);

impl fmt::Display for NoConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoConnection {}

enum Why {
    TimedOut,
    Deadline,
    Unreachable(Failure),
}

impl PoolWatch {
    pub(crate) fn new(opts: PgConnectOptions, acquire_timeout: Duration) -> Arc<PoolWatch> {
        Arc::new(PoolWatch {
            opts,
            acquire_timeout,
            state: Mutex::default(),
            unreachable: tokio::sync::watch::channel(false).0,
            probing: AtomicBool::new(false),
            acquire_failures: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
        })
    }

    /// A failure recent enough that acquires fail fast: the server was unreachable at the
    /// last attempt, renewed by the retries (each waits at most the acquire timeout).
    fn unreachable_now(&self) -> Option<Failure> {
        let fresh = self.acquire_timeout + REPROBE_MAX * 2;
        let s = self.state.lock().unwrap();
        s.failure
            .as_ref()
            .filter(|f| f.unreachable && f.at.elapsed() < fresh)
            .cloned()
    }

    pub(crate) fn health(&self) -> PoolHealth {
        let s = self.state.lock().unwrap();
        let failing = s.failure.as_ref();
        PoolHealth {
            last_connect_error: failing.map(|f| f.text.clone()),
            unreachable: failing.is_some_and(|f| f.unreachable),
            starved: failing.is_some()
                && s.last_acquire_failure
                    .is_some_and(|t| t.elapsed() < STARVED_FOR),
            acquire_failures: self.acquire_failures.load(Ordering::Relaxed),
            connect_failures: self.connect_failures.load(Ordering::Relaxed),
        }
    }

    /// Records one connect attempt's outcome; logs the start and end of a failing spell.
    fn record(&self, outcome: Result<(), (String, bool)>) {
        let mut s = self.state.lock().unwrap();
        let was = s.failure.take();
        match outcome {
            Ok(()) => {
                s.last_ok = Some(Instant::now());
                if let Some(f) = was {
                    tracing::info!(after = %f.text, "the database accepts connections again");
                }
            }
            Err((text, unreachable)) => {
                self.connect_failures.fetch_add(1, Ordering::Relaxed);
                if was.as_ref().map(|f| &f.text) != Some(&text) {
                    tracing::warn!(error = %text, "the database pool cannot open a connection");
                }
                s.failure = Some(Failure {
                    text,
                    at: Instant::now(),
                    unreachable,
                });
            }
        }
        let unreachable = s.failure.as_ref().is_some_and(|f| f.unreachable);
        drop(s);
        self.unreachable.send_replace(unreachable);
    }

    /// Starts the watch's connect loop unless it runs: one connection opened and closed,
    /// again every 0.1–1 s while that fails. It holds the watch weakly, so it ends with the
    /// store.
    fn probe(self: &Arc<Self>) {
        {
            let s = self.state.lock().unwrap();
            let cooling =
                s.failure.is_none() && s.last_ok.is_some_and(|t| t.elapsed() < PROBE_COOLDOWN);
            if cooling {
                return;
            }
        }
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut wait = REPROBE_MIN;
            loop {
                let Some(watch) = weak.upgrade() else {
                    return;
                };
                if watch.connect_once().await {
                    watch.probing.store(false, Ordering::Release);
                    return;
                }
                drop(watch);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(REPROBE_MAX);
            }
        });
    }

    async fn connect_once(&self) -> bool {
        let attempt = tokio::time::timeout(
            self.acquire_timeout,
            <sqlx::PgConnection as sqlx::Connection>::connect_with(&self.opts),
        )
        .await;
        let outcome = match attempt {
            Ok(Ok(conn)) => {
                let _ = tokio::time::timeout(Duration::from_secs(1), sqlx::Connection::close(conn))
                    .await;
                Ok(())
            }
            Ok(Err(e)) => Err(describe(&e)),
            Err(_) => Err((
                format!(
                    "no answer to a connection attempt within {} ms",
                    self.acquire_timeout.as_millis()
                ),
                true,
            )),
        };
        let ok = outcome.is_ok();
        self.record(outcome);
        ok
    }

    /// The error of an acquire that got no connection, counted, naming the cause.
    fn no_connection(&self, why: Why, pool: &PgPool) -> sqlx::Error {
        self.acquire_failures.fetch_add(1, Ordering::Relaxed);
        let cause = {
            let mut s = self.state.lock().unwrap();
            s.last_acquire_failure = Some(Instant::now());
            match &s.failure {
                Some(f) => format!(
                    "the last attempt to open one failed {:.1} s ago: {}",
                    f.at.elapsed().as_secs_f64(),
                    f.text
                ),
                None if self.probing.load(Ordering::Acquire) => {
                    "an attempt to open one is still waiting for the server's answer".into()
                }
                None => format!(
                    "all {} of the pool's connections (at most {}) were in use; none failed to open",
                    pool.size(),
                    pool.options().get_max_connections()
                ),
            }
        };
        let text = match why {
            Why::TimedOut => format!(
                "no database connection within the acquire timeout (database.connectionTimeoutMs, {} ms); {cause}",
                self.acquire_timeout.as_millis()
            ),
            Why::Deadline => format!(
                "no database connection before the caller's deadline (database.connectionTimeoutMs from its arrival); {cause}"
            ),
            Why::Unreachable(f) => format!(
                "the database is unreachable, so the statement did not wait database.connectionTimeoutMs for a connection: the last attempt to open one failed {:.1} s ago: {} (the pool keeps trying in the background)",
                f.at.elapsed().as_secs_f64(),
                f.text
            ),
        };
        sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            NoConnection(text),
        ))
    }
}

/// A connect error in words, and whether it means the server is unreachable.
fn describe(e: &sqlx::Error) -> (String, bool) {
    match e {
        sqlx::Error::Database(d) => {
            let code = d.code().map(|c| c.to_string()).unwrap_or_default();
            let unreachable =
                code.starts_with("08") || matches!(code.as_str(), "57P01" | "57P02" | "57P03");
            (format!("{} (SQLSTATE {code})", d.message()), unreachable)
        }
        sqlx::Error::Io(io) => (io.to_string(), true),
        e => (e.to_string(), false),
    }
}

/// A pool whose acquires are watched (by the module's `PoolWatch`); an [`Executor`] like `&PgPool`.
#[derive(Clone, Debug)]
pub struct WatchedPool {
    pool: PgPool,
    watch: Arc<PoolWatch>,
}

impl WatchedPool {
    pub(crate) fn new(pool: PgPool, watch: Arc<PoolWatch>) -> Self {
        WatchedPool { pool, watch }
    }

    /// The pool itself (no watch).
    pub fn raw(&self) -> &PgPool {
        &self.pool
    }

    /// A connection of the pool; fails at once while the database is known to be
    /// unreachable, and as soon as the watch learns it is while waiting; ends at the
    /// caller's deadline ([`crate::store::deadline`]); a timeout names the cause.
    pub async fn acquire(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        if let Some(f) = self.watch.unreachable_now() {
            return Err(self.watch.no_connection(Why::Unreachable(f), &self.pool));
        }
        let mut unreachable = self.watch.unreachable.subscribe();
        let mut watch_unreachable = true;
        let deadline = crate::store::deadline::current();
        let acquire = self.pool.acquire();
        let probe = tokio::time::sleep(PROBE_AFTER);
        let until = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(acquire, probe, until);
        let mut probed = false;
        loop {
            tokio::select! {
                biased;
                r = &mut acquire => return match r {
                    Err(sqlx::Error::PoolTimedOut) => Err(self.watch.no_connection(Why::TimedOut, &self.pool)),
                    r => r,
                },
                _ = &mut probe, if !probed => {
                    probed = true;
                    self.watch.probe();
                }
                _ = unreachable.wait_for(|u| *u), if watch_unreachable => {
                    match self.watch.unreachable_now() {
                        Some(f) => return Err(self.watch.no_connection(Why::Unreachable(f), &self.pool)),
                        // Stale (the retry waits for an answer): keep waiting for the pool.
                        None => watch_unreachable = false,
                    }
                }
                _ = &mut until => return Err(self.watch.no_connection(Why::Deadline, &self.pool)),
            }
        }
    }

    /// `e` of something that acquired from [`Self::raw`] itself (a `PgListener`), with the
    /// cause of an acquire timeout named as [`Self::acquire`] names it.
    pub(crate) fn explain(&self, e: sqlx::Error) -> sqlx::Error {
        match e {
            sqlx::Error::PoolTimedOut => self.watch.no_connection(Why::TimedOut, &self.pool),
            e => e,
        }
    }

    /// [`Self::acquire`], then `BEGIN`, as `PgPool::begin`.
    pub async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let conn = self.acquire().await?;
        Transaction::begin(conn, None).await
    }

    pub(crate) fn health(&self) -> PoolHealth {
        self.watch.health()
    }
}

// `&PgPool`'s executor, acquiring through [`WatchedPool::acquire`]. A streamed result is
// collected before it is handed on: the store reads every result whole (`fetch_all`,
// `fetch_one`, `execute`), so nothing streams.
impl<'p> Executor<'p> for &'_ WatchedPool {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        Box::pin(
            async move {
                let mut conn = pool.acquire().await?;
                (&mut *conn).fetch_many(query).try_collect::<Vec<_>>().await
            }
            .map_ok(|items| futures::stream::iter(items.into_iter().map(Ok)))
            .try_flatten_stream(),
        )
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        async move { (&mut *pool.acquire().await?).fetch_optional(query).await }.boxed()
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        async move {
            (&mut *pool.acquire().await?)
                .prepare_with(sql, parameters)
                .await
        }
        .boxed()
    }

    #[doc(hidden)]
    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        async move { (&mut *pool.acquire().await?).describe(sql).await }.boxed()
    }
}
