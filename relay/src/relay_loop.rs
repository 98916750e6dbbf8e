//! The loop the inbox relay and the outbox relay share: reclaim expired leases every
//! `lease / 5`, refresh the pending gauges every `gauge_interval`, claim a batch (backing
//! off `poll_interval × failures` (at most ×10) after a failed claim), process it, and claim
//! again at once; only a claim that found nothing waits `poll_interval`, until `stop` is
//! cancelled. (Waiting after every batch that was not full made a relay whose rows sit on
//! fewer keys than `batchSize` sleep after every batch: 100 keys, batch 500 → ~130 rows/s.) Each relay supplies
//! its table's steps through [`Relay`]. The loop beats its [`Heartbeat`] before every step
//! and every sleep, so `/health/ready` sees a loop stuck inside a step.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::liveness::Heartbeat;

/// How often one relay claims, reclaims and refreshes its gauges.
pub(crate) struct Pace {
    pub batch_size: u32,
    /// The claim lease; expired leases are reclaimed every `lease / 5`.
    pub lease: Duration,
    pub poll_interval: Duration,
    pub gauge_interval: Duration,
}

/// One relay's steps. Each logs and counts its own failures: the loop only paces them.
pub(crate) trait Relay {
    type Row;

    /// Returns rows whose claim lease expired to pending.
    async fn reclaim(&self);

    /// Refreshes the relay's pending gauges.
    async fn update_gauges(&self);

    /// Claims up to `n` rows for `lease`.
    async fn claim(&self, n: u32, lease: Duration) -> queuebox_core::Result<Vec<Self::Row>>;

    /// Handles one claimed batch; the batch finishes even when shutdown starts. Beats `hb`
    /// as rows complete, so a long batch that makes progress is not taken for a stuck loop.
    async fn process(&self, batch: Vec<Self::Row>, hb: &Heartbeat);

    /// Waits `d` after a claim that found nothing, or less when `stop` is cancelled; a relay
    /// that hears about new rows (LISTEN) returns as soon as it does.
    async fn idle(&self, stop: &CancellationToken, d: Duration) {
        sleep_or_stop(stop, d).await
    }
}

/// Runs `relay` at `pace` until `stop` is cancelled.
pub(crate) async fn run<R: Relay>(relay: &R, pace: Pace, stop: &CancellationToken, hb: &Heartbeat) {
    let reclaim_every = pace.lease / 5;
    let mut last_reclaim: Option<Instant> = None;
    let mut last_gauge: Option<Instant> = None;
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        if last_reclaim.is_none_or(|t| t.elapsed() >= reclaim_every) {
            hb.beat(Duration::ZERO);
            relay.reclaim().await;
            last_reclaim = Some(Instant::now());
        }
        if last_gauge.is_none_or(|t| t.elapsed() >= pace.gauge_interval) {
            hb.beat(Duration::ZERO);
            relay.update_gauges().await;
            last_gauge = Some(Instant::now());
        }
        hb.beat(Duration::ZERO);
        let claimed = match relay.claim(pace.batch_size, pace.lease).await {
            Ok(c) => {
                failures = 0;
                c
            }
            Err(_) => {
                failures += 1;
                let backoff = pace.poll_interval * failures.min(10);
                hb.beat(backoff);
                sleep_or_stop(stop, backoff).await;
                continue;
            }
        };
        let idle = claimed.is_empty();
        hb.beat(Duration::ZERO);
        relay.process(claimed, hb).await;
        if idle {
            hb.beat(pace.poll_interval);
            relay.idle(stop, pace.poll_interval).await;
        }
    }
}

/// Sleeps `d`, or less when `stop` is cancelled meanwhile.
pub(crate) async fn sleep_or_stop(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.cancelled() => {}
    }
}
