//! Background duties of a worker: renew every live lease each third of the lease on the
//! pool (never inside a handler's transaction; the round is the shared `crate::lease` rule,
//! also used by the relay's outbox), and turn LISTEN/NOTIFY into wake-ups.
//! Both hold only a weak reference, so they end when the worker is dropped.

use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::Inner;
use crate::error::{Error, Result};
use crate::lease::{self, Leases};
use crate::message::ClaimRef;
use crate::metrics::{self, Component};

pub(super) fn spawn_renewer(worker: Weak<Inner>) {
    tokio::spawn(async move {
        loop {
            let (interval, lease, stop) = match worker.upgrade() {
                Some(w) => (w.opts.renewal_interval(), w.opts.lease, w.hard_stop.clone()),
                None => return,
            };
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stop.cancelled() => return,
            }
            let Some(w) = worker.upgrade() else { return };
            lease::renew_once(&PullLeases(&w), lease).await;
        }
    });
}

/// The live claims of a worker, renewed by the shared [`lease`] rule. A lost claim cancels
/// its handler unless it is already finishing (its completion's fenced write decides), and
/// is counted here, once.
struct PullLeases<'a>(&'a Inner);

#[async_trait]
impl Leases for PullLeases<'_> {
    fn live(&self) -> Vec<ClaimRef> {
        let st = self.0.state.lock().unwrap();
        st.live
            .values()
            .filter(|l| {
                !l.finishing.load(Ordering::SeqCst) && !l.app_completes.load(Ordering::SeqCst)
            })
            .map(|l| l.claim)
            .collect()
    }

    async fn renew(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>> {
        // Never beside a batched completion of the same rows (Inner::row_writes).
        let renewed = {
            let _turn = self.0.row_writes.lock().await;
            self.0.store.renew_pull(claims, lease).await?
        };
        self.0.stats.lease_renewals.inc_by(renewed.len() as u64);
        Ok(renewed)
    }

    fn lost(&self, c: &ClaimRef) {
        let w = self.0;
        let mut st = w.state.lock().unwrap();
        let gone = match st.live.get(&c.id) {
            // A row the application completes in its own transaction was taken out of
            // renewal; a round that began before that may find it completed: not a loss.
            Some(l)
                if !l.finishing.load(Ordering::SeqCst)
                    && !l.app_completes.load(Ordering::SeqCst) =>
            {
                l.cancel.cancel();
                true
            }
            _ => false,
        };
        if gone {
            st.live.remove(&c.id);
            st.buffer.retain(|r| r.claim.id != c.id);
            w.stats.claims_lost.inc();
            metrics::claim_lost(Component::Pull);
            tracing::warn!(message_id = %c.id, source = %w.opts.source,
                "lease lost before renewal (the handler ran longer than the lease allows, or the database was unreachable); cancelling the handler");
        }
    }

    fn failed(&self, claims: usize, e: &Error) {
        tracing::warn!(source = %self.0.opts.source, claims, error = %e, "lease renewal failed; retrying at the next interval");
    }
}

pub(super) async fn spawn_listener(worker: Weak<Inner>) {
    let Some(w) = worker.upgrade() else { return };
    // Subscribe before the first claim so that a row inserted right after start wakes us.
    let first = w.store.listen(&w.opts.source).await;
    drop(w);
    tokio::spawn(async move {
        let mut current = first;
        loop {
            let Some(w) = worker.upgrade() else { return };
            let (stop, poll, source) = (
                w.stopping.clone(),
                w.opts.poll_interval,
                w.opts.source.clone(),
            );
            match std::mem::replace(&mut current, Ok(None)) {
                Ok(Some(mut wakeup)) => {
                    drop(w);
                    loop {
                        tokio::select! {
                            r = wakeup.wait() => match r {
                                Ok(()) => match worker.upgrade() {
                                    Some(w) => w.wake.notify_one(),
                                    None => return,
                                },
                                Err(e) => {
                                    tracing::warn!(%source, error = %e, "LISTEN connection lost; polling until it is back");
                                    break;
                                }
                            },
                            _ = stop.cancelled() => return,
                        }
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    drop(w);
                    tracing::warn!(%source, error = %e, "LISTEN failed; polling until it works");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(poll.max(Duration::from_millis(500))) => {}
                _ = stop.cancelled() => return,
            }
            let Some(w) = worker.upgrade() else { return };
            current = w.store.listen(&w.opts.source).await;
        }
    });
}
