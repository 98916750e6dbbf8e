//! A caller's deadline for getting a database connection, carried with the task rather than
//! through every store method.
//!
//! A store statement waits for a pooled connection at most the pool's acquire timeout
//! (`database.connectionTimeoutMs`), counted from when the statement starts. A caller that
//! queued before it (the relay's insert group, where a message waits for a free lane) has
//! spent part of its budget already; run under [`within`], the statement's wait for a
//! connection also ends at the caller's deadline, so the caller is answered within its own
//! budget however long it queued. Only the wait for a connection is cut short: a statement
//! that has its connection runs to its end (nothing the database may have committed is
//! abandoned). The PostgreSQL store honours it; the SQL Server store has its own pool and
//! ignores it.

use std::future::Future;

use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `f` with `deadline` as the latest moment its statements wait for a connection.
pub async fn within<F: Future>(deadline: Instant, f: F) -> F::Output {
    DEADLINE.scope(deadline, f).await
}

/// The deadline of the current task's [`within`], if any.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}
