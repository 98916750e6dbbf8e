//! Refusing a connection pooler that does not keep a client on one server session
//! (PgBouncer's `pool_mode = transaction` or `statement`), and saying what to set when
//! PgBouncer refuses the connection itself.
//!
//! QueueBox relies on session state: the owner session holds a session advisory lock for the
//! process's life (a dead replica's claims come back when its lock is gone), `queuebox
//! migrate` takes turns under one, workers and the outbox relay `LISTEN`, and sqlx prepares
//! each statement once per connection under a name (`sqlx_s_1` …). Behind a pooler that
//! hands each transaction to whichever server connection is free, all of that breaks: names
//! collide (`prepared statement "sqlx_s_1" already exists`), a live owner's lock looks free
//! to its peers, which take its rows back while it still publishes them, and notifications
//! go to other clients. Making that mode work would mean no advisory locks, no `LISTEN` and
//! no named statements anywhere; instead the store refuses it when it opens its pool, the one
//! place the relay, `queuebox migrate`, the Rust worker and every binding connect through.
//!
//! [`check`] tells the two apart by server process ids, and cannot refuse a direct
//! connection or a session-mode pool: PostgreSQL runs one backend process per session, and no
//! two live sessions share a pid. Connection A reads its backend's pid; while A stays open
//! and idle, connection B reads its own. On PostgreSQL directly, or through a session-mode
//! pool (which gives each client one server connection until the client leaves), B can never
//! be served by A's backend, and A always by the same one. Under transaction or statement
//! pooling A's server connection goes back to the pooler's pool as soon as A's statement
//! ends, and PgBouncer hands out the most recently freed one first (`server_round_robin = 0`,
//! its default): B's statement runs on A's backend, the first round already shows it. A few
//! rounds, A and B alternating, also catch a pooler whose pool other clients use meanwhile or
//! that hands servers out in turn: one client connection seen on two backends is as
//! conclusive. (A pooler so busy that every round lands elsewhere escapes the check: it errs
//! only that way, never refusing a pool that keeps sessions.)
//!
//! The statements go over the simple-query protocol (`raw_sql`), since a named prepared
//! statement would itself fail behind such a pooler before it could say why. Each first sets
//! a QueueBox-named setting: a pooler that pins a client to its server once the session holds
//! state (RDS Proxy pins on `SET`, advisory locks and `LISTEN`) then answers the question
//! that matters — does a session holding state keep its server — as it will for QueueBox's
//! own sessions; PgBouncer pins nothing, so the setting changes nothing there but a harmless,
//! unused `queuebox.` variable on a shared server connection.
//!
//! Cost: A is the connection `connect_with` opens first anyway to report why a connect
//! fails, and B is the pool's first connection, so the check opens no connection of its own;
//! it is [`ROUNDS`] × 2 round trips of a trivial statement, once per pool open.

use sqlx::{Executor, PgConnection, Row};

use crate::error::Error;

use super::redact_url;

/// Rounds of A-then-B pid reads. PgBouncer is seen in the first; the others catch a pooler
/// that other clients share or that hands out its server connections in turn.
pub(super) const ROUNDS: usize = 3;

/// One round trip: a session setting (see the module's text), then the backend's pid.
const PID: &str = "SET queuebox.pooler_check = 'on'; SELECT pg_backend_pid()";

/// What the check saw: nothing amiss, or why the connections are pooled per transaction.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Each connection kept one backend, and no two shared one.
    OwnSessions,
    /// Two client connections, or one at two moments, were served by different backends than
    /// a session would be: the evidence, in words.
    Pooled(String),
}

async fn pid(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
    let rows = conn.fetch_all(sqlx::raw_sql(PID)).await?;
    match rows.last() {
        Some(row) => row.try_get::<i32, _>(0),
        None => Err(sqlx::Error::Protocol(
            "SELECT pg_backend_pid() returned no row".into(),
        )),
    }
}

/// Reads backend pids on `a` and `b` (two open client connections to the same URL) in
/// [`ROUNDS`] alternating rounds; stops at the first evidence of pooling.
pub(super) async fn check(a: &mut PgConnection, b: &mut PgConnection) -> Result<Seen, sqlx::Error> {
    let mut a_seen: Vec<i32> = Vec::with_capacity(ROUNDS);
    let mut b_first: Option<i32> = None;
    for _ in 0..ROUNDS {
        let pa = pid(a).await?;
        if let Some(&first) = a_seen.first() {
            if pa != first {
                return Ok(Seen::Pooled(format!(
                    "one connection's statements ran in server sessions {first} and then {pa}"
                )));
            }
        }
        a_seen.push(pa);
        let pb = pid(b).await?;
        if a_seen.contains(&pb) {
            return Ok(Seen::Pooled(format!(
                "a second connection's statement ran in server session {pb}, the first connection's, while the first was still open"
            )));
        }
        match b_first {
            Some(first) if first != pb => {
                return Ok(Seen::Pooled(format!(
                    "one connection's statements ran in server sessions {first} and then {pb}"
                )))
            }
            _ => b_first = Some(pb),
        }
    }
    Ok(Seen::OwnSessions)
}

/// The start-up error for a pooled URL: not transient (the relay does not wait
/// `database.startupTimeoutMs` for it), naming PgBouncer's setting and the way out.
pub(super) fn refusal(url: &str, evidence: &str) -> Error {
    Error::Config {
        path: "database.url".into(),
        reason: format!(
            "`{}` goes through a connection pooler in transaction or statement mode (PgBouncer pool_mode = transaction or statement): {evidence}. \
             QueueBox needs session state (advisory-lock owner sessions, LISTEN, prepared statements), so it does not run on such a pool. \
             Use pool_mode = session for QueueBox's database or user in pgbouncer.ini, or connect to PostgreSQL directly (docs/operations.md, PgBouncer)",
            redact_url(url)
        ),
    }
}

/// PgBouncer refuses startup parameters it does not know unless `ignore_startup_parameters`
/// lists them, and sqlx sends `extra_float_digits` on every connection: with PgBouncer's
/// defaults every connection fails with `unsupported startup parameter: extra_float_digits`.
/// That error, turned into what to set (not transient: it fails the same way until
/// pgbouncer.ini changes); `None` for any other error.
pub(super) fn refused_startup_parameter(url: &str, e: &sqlx::Error) -> Option<Error> {
    let sqlx::Error::Database(d) = e else {
        return None;
    };
    let param = d
        .message()
        .strip_prefix("unsupported startup parameter: ")?
        .trim();
    Some(Error::Config {
        path: "database.url".into(),
        reason: format!(
            "`{}` refused the connection: {} — a connection pooler (PgBouncer) that does not accept the startup parameter `{param}`, which QueueBox's PostgreSQL driver sends. \
             Set ignore_startup_parameters = {param} in pgbouncer.ini's [pgbouncer] section (and pool_mode = session: QueueBox refuses transaction and statement pooling)",
            redact_url(url),
            d.message()
        ),
    })
}
