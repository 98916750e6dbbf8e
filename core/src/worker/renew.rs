//! Background duties of a worker: renew every live lease each third of the lease on the
//! pool (never inside a handler's transaction), and turn LISTEN/NOTIFY into wake-ups.
//! Both hold only a weak reference, so they end when the worker is dropped.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

use super::Inner;
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
            renew_once(&w, lease).await;
        }
    });
}

async fn renew_once(w: &Inner, lease: Duration) {
    let claims: Vec<ClaimRef> = {
        let st = w.state.lock().unwrap();
        st.live.values().filter(|l| !l.finishing.load(Ordering::SeqCst)).map(|l| l.claim).collect()
    };
    if claims.is_empty() {
        return;
    }
    match w.store.renew_pull(&claims, lease).await {
        Ok(renewed) => {
            let renewed: HashSet<_> = renewed.into_iter().collect();
            let mut st = w.state.lock().unwrap();
            for c in claims.iter().filter(|c| !renewed.contains(&c.id)) {
                let gone = match st.live.get(&c.id) {
                    Some(l) if !l.finishing.load(Ordering::SeqCst) => {
                        l.cancel.cancel();
                        true
                    }
                    _ => false,
                };
                if gone {
                    st.live.remove(&c.id);
                    st.buffer.retain(|r| r.claim.id != c.id);
                    w.stats.claims_lost.fetch_add(1, Ordering::Relaxed);
                    metrics::claim_lost(Component::Pull);
                    tracing::warn!(id = %c.id, source = %w.opts.source,
                        "lease lost before renewal (the handler ran longer than the lease allows, or the database was unreachable); cancelling the handler");
                }
            }
        }
        Err(e) => tracing::warn!(source = %w.opts.source, error = %e, "lease renewal failed; retrying at the next interval"),
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
            let (stop, poll, source) = (w.stopping.clone(), w.opts.poll_interval, w.opts.source.clone());
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
