//! `destinations.<name>.rateLimit` (docs/operations.md#outbound-limits): at most `inFlight`
//! publishes to the destination at once and at most `perSecond` started per second, so a slow
//! partner is never flooded.
//!
//! **Where a row waits.** Inside its batch, after its claim and before its publish, while the
//! batch's renewal ticker keeps its lease (`outbox.rs`: every row of a batch stays in the
//! renewed set until its outcome is written). Waiting is not an attempt: nothing is written
//! for the row until it has been published, so no attempt is spent, no backoff is scheduled
//! and no error recorded; a claim lost meanwhile cancels the wait like a publish. The other
//! choice, claiming only as many rows as the limits let through, would need a claim per
//! destination (a claim takes due rows whatever their route); and the relay loop already
//! claims the next batch ahead only while batches take less than a third of the lease, so a
//! batch slowed down by a limit is never followed by rows left waiting unrenewed.
//!
//! **Per replica.** Each relay applies the numbers on its own: N replicas call a destination
//! up to N × `perSecond` times a second and N × `inFlight` at once; the operator divides the
//! partner's limit by the replicas (documented). Shared in the database it would cost a
//! statement per request (or per lease of a block of requests) on the one table every replica
//! contends for, an in-flight slot held by a crashed replica would need leases of its own, and
//! a database outage would also stop every limited destination; replicas are few and their
//! number is known to whoever deploys them.
//!
//! **Why these parts.** `perSecond` is `governor`'s GCRA limiter, the maintained standard for
//! this, with a burst of one: starts are spaced `1 / perSecond` apart, so any one-second
//! window sees at most `perSecond + 1` of them (one at each edge). `inFlight` is a tokio
//! `Semaphore`: a publish holds a permit until its answer (or timeout), it is fair (first
//! come, first served), and a dropped wait gives nothing back because it took nothing.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use queuebox_config::Config;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::metrics::Metrics;

/// The limits of the destinations that have any, by destination name.
#[derive(Default)]
pub(crate) struct Limits {
    by_destination: HashMap<String, Limit>,
}

struct Limit {
    rate: Option<DefaultDirectRateLimiter>,
    in_flight: Option<Semaphore>,
}

/// What a publish holds while it runs: the destination's `inFlight` permit and the relay's
/// HTTP request permit (`outbox.concurrency`), either absent when it does not apply.
pub(crate) struct Admitted<'a> {
    _in_flight: Option<SemaphorePermit<'a>>,
    _request: Option<SemaphorePermit<'a>>,
}

impl Limits {
    pub(crate) fn from_config(cfg: &Config) -> Limits {
        let by_destination = cfg
            .destinations
            .iter()
            .filter_map(|(name, d)| {
                let l = d.rate_limit.as_ref()?;
                let limit = Limit {
                    rate: l.per_second.map(|n| {
                        RateLimiter::direct(Quota::per_second(n).allow_burst(NonZeroU32::MIN))
                    }),
                    in_flight: l.in_flight.map(|n| Semaphore::new(u32::from(n) as usize)),
                };
                Some((name.clone(), limit))
            })
            .collect();
        Limits { by_destination }
    }

    /// The longest a limited destination can leave the loop without a completed publish
    /// beyond its `timeoutMs`: one spacing of its `perSecond`.
    pub(crate) fn longest_spacing(cfg: &Config) -> Duration {
        cfg.destinations
            .values()
            .filter_map(|d| d.rate_limit.as_ref()?.per_second)
            .map(|n| Duration::from_secs(1) / u32::from(n))
            .max()
            .unwrap_or_default()
    }

    /// Waits until a publish to `destination` may start: its `inFlight` permit, then its
    /// `perSecond` turn, then `requests` (the relay's cap on HTTP requests, for HTTP
    /// destinations). The time a row waited on the destination's own limits is observed in
    /// `queuebox_outbox_limit_wait_seconds` and the rows waiting now in
    /// `queuebox_outbox_limit_waiting`; a destination without limits waits for `requests`
    /// only, as before.
    pub(crate) async fn admit<'a>(
        &'a self,
        destination: &str,
        requests: Option<&'a Semaphore>,
        metrics: &Metrics,
    ) -> Admitted<'a> {
        // The semaphores are never closed, so acquiring fails never.
        let acquire = |s: &'a Semaphore| async move { s.acquire().await.expect("never closed") };
        let Some(limit) = self.by_destination.get(destination) else {
            return Admitted {
                _in_flight: None,
                _request: match requests {
                    Some(r) => Some(acquire(r).await),
                    None => None,
                },
            };
        };
        let labels = [("destination", destination)];
        let t0 = Instant::now();
        let waiting = Waiting::new(metrics, destination);
        let in_flight = match &limit.in_flight {
            Some(s) => Some(acquire(s).await),
            None => None,
        };
        if let Some(rate) = &limit.rate {
            rate.until_ready().await;
        }
        let request = match requests {
            None => None,
            Some(r) => match r.try_acquire() {
                Ok(p) => Some(p),
                Err(_) => {
                    // Waiting here after taking a turn would let the turns of several rows
                    // go out at once when permits free up: take a fresh turn after the wait,
                    // so every start is right behind its own turn.
                    let p = acquire(r).await;
                    if let Some(rate) = &limit.rate {
                        rate.until_ready().await;
                    }
                    Some(p)
                }
            },
        };
        drop(waiting);
        metrics.observe("queuebox_outbox_limit_wait_seconds", &labels, t0.elapsed());
        Admitted {
            _in_flight: in_flight,
            _request: request,
        }
    }
}

/// One row counted in `queuebox_outbox_limit_waiting` until dropped (also when the wait is
/// cancelled because the row's claim was lost).
struct Waiting<'a> {
    metrics: &'a Metrics,
    destination: &'a str,
}

impl<'a> Waiting<'a> {
    fn new(metrics: &'a Metrics, destination: &'a str) -> Self {
        metrics.gauge_add(
            "queuebox_outbox_limit_waiting",
            &[("destination", destination)],
            1.0,
        );
        Waiting {
            metrics,
            destination,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.metrics.gauge_add(
            "queuebox_outbox_limit_waiting",
            &[("destination", self.destination)],
            -1.0,
        );
    }
}
