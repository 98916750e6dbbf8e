//! Dead-worker recovery in seconds. The worker holds an owner session
//! ([`crate::store::OwnerSession`]: on PostgreSQL a session advisory lock on its own
//! connection) and its claims record the session's key. Once a second (less often when the
//! look for dead owners is slow, [`CHECK_COST_SHARE`]) this duty
//! - checks the session and, if its connection broke, opens a new one under a new key (claims
//!   carry no key meanwhile and fall back to the lease); rows claimed under the old key are
//!   recovered by whoever sees it dead, and their fenced completions here fail as lost claims;
//! - expires the leases of this source's rows whose owner session has ended, and wakes the
//!   claim loop, so a crashed worker's rows run again within about two seconds.
//!
//! A worker that is alive but hung keeps its session, so its rows still wait for the lease.
//! Holds only a weak reference, so it ends (and drops the session, releasing the key) when the
//! worker is dropped or hard-stopped.

use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::store::OwnerSession;

/// How often the session is checked and dead owners are looked for: half the 2 s recovery
/// target, leaving the other half for the claim that follows.
pub(super) const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A slow look for dead owners waits this many times its duration before the next. It reads
/// the index entries of every live claim, and while a transaction is held open also those of
/// every row claimed in the last lease, live or not (100,000 after a 12 s drain): then it
/// takes at most a fiftieth of the database's time, and recovery waits longer.
const CHECK_COST_SHARE: u32 = 50;

/// The longest wait between two looks, however slow the last one was: a dead worker's rows
/// are back within the lease (30 s by default) anyway.
const CHECK_INTERVAL_MAX: Duration = Duration::from_secs(30);

/// Opens the owner session and publishes its key; `None` when the backend has none or the
/// database cannot be reached now (the keeper retries each second, `quiet`ly: the claim loop
/// already reports an outage).
pub(super) async fn open(inner: &Inner, quiet: bool) -> Option<Box<dyn OwnerSession>> {
    match inner.store.open_owner_session().await {
        Ok(Some(session)) => {
            inner.owner_key.store(session.key(), Ordering::SeqCst);
            Some(session)
        }
        Ok(None) => None,
        Err(e) if quiet => {
            tracing::debug!(source = %inner.opts.source, error = %e, "owner session not open yet");
            None
        }
        Err(e) => {
            tracing::warn!(source = %inner.opts.source, error = %e,
                "could not open the worker's owner session; its claims wait for their lease until it opens");
            None
        }
    }
}

/// Runs the once-a-second duty for as long as the worker lives. `session` is the one
/// [`open`] returned in `Worker::new`; `has_sessions` is false on a backend without them.
pub(super) fn spawn_keeper(
    worker: Weak<Inner>,
    mut session: Option<Box<dyn OwnerSession>>,
    has_sessions: bool,
) {
    if !has_sessions {
        return;
    }
    tokio::spawn(async move {
        let mut pause = CHECK_INTERVAL;
        loop {
            let stop = match worker.upgrade() {
                Some(w) => w.hard_stop.clone(),
                None => return,
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.cancelled() => return,
            }
            let Some(w) = worker.upgrade() else { return };
            let healthy = match session.as_mut() {
                Some(s) => s.check().await.is_ok(),
                None => false,
            };
            if !healthy {
                // The key is no longer held: claim without one until a new session opens.
                w.owner_key.store(0, Ordering::SeqCst);
                // Close the broken connection before opening the next.
                drop(session.take());
                session = open(&w, true).await;
            }
            let started = std::time::Instant::now();
            let expired = w.store.expire_dead_owners(&w.opts.source).await;
            // A failure (an outage's timeout) says nothing about the look's cost.
            pause = match expired {
                Ok(_) => {
                    (started.elapsed() * CHECK_COST_SHARE).clamp(CHECK_INTERVAL, CHECK_INTERVAL_MAX)
                }
                Err(_) => CHECK_INTERVAL,
            };
            match expired {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(source = %w.opts.source, rows = n,
                        "dead-owner recovery: a worker's session ended; its claimed rows are claimable again");
                    w.wake.notify_one();
                }
                Err(e) => {
                    tracing::debug!(source = %w.opts.source, error = %e, "dead-owner check failed")
                }
            }
        }
    });
}
