//! The connections the pull claim runs on: a small pool of its own whose sessions use
//! generic plans (`plan_cache_mode = force_generic_plan`).
//!
//! The claim (`sql::CLAIM`, `sql::CLAIM_FROM`) is a prepared statement, but PostgreSQL kept
//! choosing a custom plan for it, so every claim was planned again: 0.53 ms of planning on
//! top of ~1.2 ms of execution for a 64-row claim (PostgreSQL 15, `EXPLAIN (ANALYZE,
//! SUMMARY)` of the prepared statement). The generic plan has the same shape —
//! index scans in claim order, stopped by the limits — and runs as fast, so on these
//! sessions the claim is planned once per connection. The setting is per session, so it
//! lives on connections that run nothing else: the store's main pool keeps the default for
//! everything else, the application's own statements in a handler's transaction included.
//!
//! Only a store that opened its own pool ([`super::PgStore::connect_with`]) has one: a pool
//! the application hands over may set up its sessions in ways a copy of its connect options
//! would not repeat (an `after_connect` hook setting `search_path`), so such a store claims
//! on that pool, planning each claim as before.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Executor;

/// Claims of one store run one at a time per worker; two connections let two workers
/// sharing a store claim side by side without holding a pool connection each.
const MAX_CONNECTIONS: u32 = 2;

/// A lazily connected pool on `opts` (the main pool's options: same server, TLS and
/// credentials) whose sessions plan prepared statements once.
pub(super) fn open(opts: PgConnectOptions, acquire_timeout: Duration) -> PgPool {
    PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .min_connections(0)
        .acquire_timeout(acquire_timeout)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute("SET plan_cache_mode = force_generic_plan")
                    .await
                    .map(|_| ())
            })
        })
        .connect_lazy_with(opts)
}
