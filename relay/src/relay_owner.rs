//! The relay's owner session (a crashed relay's rows back in seconds, not after
//! their lease). The relay holds one [`queuebox_core::store::OwnerSession`] — on PostgreSQL a
//! session advisory lock on a random key, on a connection of its own — and the outbox relay and
//! the inbox relay record its key on every row they claim. Once a second this keeper
//! - checks the session and, if its connection broke, opens a new one under the same key
//!   when it is free (under a new key, the relay's own rows of the old one, still
//!   being published or waiting for their sent mark, were put back to pending as a dead
//!   relay's and delivered again), else under a new key (claims made meanwhile carry no key
//!   and wait for their lease);
//! - while it holds its session, puts the rows of relays whose session is gone back to
//!   pending ([`RelayStore::expire_dead_relay_owners`]), counted as reclaimed like expired
//!   leases.
//!
//! A relay that is alive but hung keeps its session, so its rows still wait for the lease; a
//! relay shutting down keeps its session until its loops have finished their in-flight rows.
//! On SQL Server there is no session: the key stays unset and leases do the work.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::store::relay::RelayStore;
use queuebox_core::store::OwnerSession;
use queuebox_core::Store;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// How often the session is checked and dead relays are looked for: half the 2 s target.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The key the relay's claims record; 0 while no session is open.
#[derive(Default)]
pub struct RelayOwner {
    key: AtomicI64,
}

impl RelayOwner {
    /// The key to record on a claim, `None` without a session.
    pub fn key(&self) -> Option<i64> {
        Some(self.key.load(Ordering::SeqCst)).filter(|k| *k != 0)
    }
}

/// Starts the keeper; it runs until `stop` is cancelled (after the relay loops ended), then
/// drops the session, which releases the key.
pub fn spawn(
    store: Arc<dyn Store>,
    relay_store: Arc<dyn RelayStore>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> (Arc<RelayOwner>, tokio::task::JoinHandle<()>) {
    let owner = Arc::new(RelayOwner::default());
    let keeper = owner.clone();
    let task = tokio::spawn(async move {
        let mut session: Option<Box<dyn OwnerSession>> = None;
        // The key of the last session, taken back when a broken session is reopened.
        let mut last_key = 0i64;
        loop {
            if session.is_none() {
                let opened = match last_key {
                    0 => store.open_owner_session().await,
                    k => store.reopen_owner_session(k).await,
                };
                match opened {
                    Ok(Some(s)) => {
                        if last_key != 0 && s.key() != last_key {
                            tracing::warn!("the relay's owner key was taken meanwhile; its rows claimed under the old key are put back to pending");
                        }
                        last_key = s.key();
                        keeper.key.store(s.key(), Ordering::SeqCst);
                        session = Some(s);
                    }
                    // No owner sessions on this backend: leases only.
                    Ok(None) => return,
                    Err(e) => tracing::debug!(error = %e, "relay owner session not open yet"),
                }
            }
            if let Some(s) = session.as_mut() {
                if let Err(e) = s.check().await {
                    tracing::warn!(error = %e, "the relay's owner session broke; opening a new one (claims made meanwhile wait for their lease)");
                    keeper.key.store(0, Ordering::SeqCst);
                    session = None;
                }
            }
            // Only while holding its session: without it, this relay's own rows would be
            // taken for a dead relay's before it takes its key back.
            if session.is_none() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                }
                continue;
            }
            match relay_store.expire_dead_relay_owners().await {
                Ok(e) => {
                    if e.outbox > 0 {
                        metrics.add("queuebox_outbox_messages_reclaimed_total", &[], e.outbox);
                        tracing::info!(
                            rows = e.outbox,
                            "outbox rows of a relay that is gone back to pending"
                        );
                    }
                    if e.push > 0 {
                        metrics.add("queuebox_inbox_messages_reclaimed_total", &[], e.push);
                        tracing::info!(
                            rows = e.push,
                            "push rows of a relay that is gone back to pending"
                        );
                    }
                }
                Err(e) => tracing::debug!(error = %e, "dead relay check failed; retrying"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
            }
        }
    });
    (owner, task)
}
