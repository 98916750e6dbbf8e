//! The loop the inbox relay and the outbox relay share: reclaim expired leases every
//! `lease / 5`, refresh the pending gauges every `gauge_interval`, claim a batch (backing
//! off `poll_interval × failures` (at most ×10) after a failed claim), process it, and claim
//! again at once; only a claim that found nothing waits `poll_interval`, until `stop` is
//! cancelled. (Waiting after every batch that was not full made a relay whose rows sit on
//! fewer keys than `batchSize` sleep after every batch, however large the backlog.)
//!
//! A relay that [claims ahead](Relay::claims_ahead) claims its next batch while the current
//! one is processed, so the claim's round trip overlaps the batch's work instead of pausing
//! it (otherwise a large part of a drain is spent claiming while nothing is published); the
//! batch claimed last before `stop` is processed too. It does so only after a full batch (a
//! shorter one took everything claimable: with ordering keys, the rest waits behind the
//! keys it holds, and a claim ahead would find nothing) and while the batch before took
//! less than a third of the lease (a renewal interval): a batch claimed ahead is not
//! renewed while it waits, and behind slow batches its lease would run out and another
//! replica take its rows (claims lost, though nothing is sent twice).
//!
//! Each claim asks for the [`Sizer`]'s size: `batchSize` when it was set, else a size that
//! follows the batches (the outbox relay's default; see [`crate::batch_size`]).
//!
//! Each relay supplies its table's steps through [`Relay`]. The loop beats its [`Heartbeat`]
//! before every step and every sleep, so `/health/ready` sees a loop stuck inside a step.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::batch_size::{BatchSize, Outcome, Sizer};
use crate::liveness::Heartbeat;

/// How much and how often one relay claims, reclaims and refreshes its gauges.
pub(crate) struct Pace {
    pub batch: BatchSize,
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

    /// Handles one claimed batch, claimed at `claimed` (earlier than now when it was claimed
    /// ahead: its lease started then); the batch finishes even when shutdown starts. Beats
    /// `hb` as rows complete, so a long batch that makes progress is not taken for a stuck loop.
    async fn process(&self, batch: Vec<Self::Row>, claimed: Instant, hb: &Heartbeat);

    /// The bytes `rows` hold in memory, for a [`BatchSize`] that adapts; 0 when not counted.
    fn bytes(&self, _rows: &[Self::Row]) -> usize {
        0
    }

    /// The next claims ask for `n` rows (an adapting [`BatchSize`] changed).
    fn resized(&self, _n: u32) {}

    /// Claim the next batch while this one is processed. Only for a relay whose `process`
    /// renews a batch's leases counted from `claimed`, since a batch claimed ahead waits.
    fn claims_ahead(&self) -> bool {
        false
    }

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
    let mut size = Sizer::new(pace.batch);
    relay.resized(size.next());
    // A batch claimed while the previous one was processed, with its claim's time, the rows
    // it asked for and the rows of the batch processed meanwhile.
    let mut ahead: Option<(Vec<R::Row>, Instant, u32, usize)> = None;
    // How long the last non-empty batch took to process.
    let mut last_batch: Option<Duration> = None;
    // The last claim ahead found nothing: claim the next batch after this one instead.
    let mut ahead_empty = false;
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
        let (claimed, at, asked, held) = match ahead.take() {
            Some(batch) => batch,
            None => {
                let at = Instant::now();
                let asked = size.next();
                match relay.claim(asked, pace.lease).await {
                    Ok(c) => {
                        failures = 0;
                        (c, at, asked, 0)
                    }
                    Err(_) => {
                        failures += 1;
                        let backoff = pace.poll_interval * failures.min(10);
                        hb.beat(backoff);
                        sleep_or_stop(stop, backoff).await;
                        continue;
                    }
                }
            }
        };
        let got = claimed.len();
        let idle = got == 0;
        let full = got >= asked as usize;
        let bytes = if size.adapts() && !idle {
            relay.bytes(&claimed)
        } else {
            0
        };
        hb.beat(Duration::ZERO);
        let started = Instant::now();
        // Tokio's clock for the batch's duration (the tests pause it).
        let began = tokio::time::Instant::now();
        if full
            && !std::mem::take(&mut ahead_empty)
            && relay.claims_ahead()
            && last_batch.is_some_and(|d| d < pace.lease / 3)
        {
            // A failed claim ahead is retried, with the backoff, by the next turn's claim. An
            // empty one is not idleness: rows behind the keys this batch holds become
            // claimable when it is done (waiting the poll interval after each batch made
            // ~900 rows/s of ~5,800 before the full-batch rule), so the next turn claims
            // again at once, and the turn after it does not claim ahead.
            let next_asked = size.next();
            let ((), next) = tokio::join!(
                relay.process(claimed, at, hb),
                relay.claim(next_asked, pace.lease)
            );
            ahead = next
                .ok()
                .filter(|rows| !rows.is_empty())
                .map(|rows| (rows, started, next_asked, got));
            ahead_empty = ahead.is_none();
        } else {
            relay.process(claimed, at, hb).await;
        }
        let took = began.elapsed();
        if !idle {
            last_batch = Some(took);
        }
        // An empty claim counts too: it lifts the limit keys had set.
        let outcome = Outcome {
            asked,
            got,
            took,
            bytes,
            held,
        };
        if let Some(n) = size.processed(outcome) {
            relay.resized(n);
        }
        if idle {
            hb.beat(pace.poll_interval);
            relay.idle(stop, pace.poll_interval).await;
        }
    }
    // Claimed before the stop (never empty): delivered like a batch in progress.
    if let Some((rows, at, ..)) = ahead {
        hb.beat(Duration::ZERO);
        relay.process(rows, at, hb).await;
    }
}

/// Sleeps `d`, or less when `stop` is cancelled meanwhile.
pub(crate) async fn sleep_or_stop(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// Claims the batches it was given, one per claim, and logs claims and processing.
    struct Fake {
        batches: Mutex<VecDeque<u32>>,
        log: Mutex<Vec<String>>,
        work: Duration,
        /// Cancelled when the batch with this number starts.
        stop_at: (u32, CancellationToken),
    }

    impl Relay for Fake {
        type Row = u32;
        async fn reclaim(&self) {}
        async fn update_gauges(&self) {}
        async fn claim(&self, _n: u32, _lease: Duration) -> queuebox_core::Result<Vec<u32>> {
            self.log.lock().unwrap().push("claim".into());
            Ok(self
                .batches
                .lock()
                .unwrap()
                .pop_front()
                .into_iter()
                .collect())
        }
        async fn process(&self, batch: Vec<u32>, _claimed: Instant, _hb: &Heartbeat) {
            let Some(&n) = batch.first() else { return };
            self.log.lock().unwrap().push(format!("start {n}"));
            if n == self.stop_at.0 {
                self.stop_at.1.cancel();
            }
            tokio::time::sleep(self.work).await;
            self.log.lock().unwrap().push(format!("end {n}"));
        }
        fn claims_ahead(&self) -> bool {
            true
        }
    }

    async fn run_fake(batches: u32, work: Duration, lease: Duration, stop_at: u32) -> Vec<String> {
        let stop = CancellationToken::new();
        let fake = Fake {
            batches: Mutex::new((1..=batches).collect()),
            log: Mutex::new(Vec::new()),
            work,
            stop_at: (stop_at, stop.clone()),
        };
        let pace = Pace {
            batch: BatchSize::fixed(1),
            lease,
            poll_interval: Duration::from_millis(10),
            gauge_interval: Duration::from_secs(60),
        };
        run(&fake, pace, &stop, &Heartbeat::unwatched()).await;
        fake.log.into_inner().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_claim_overlaps_a_fast_batch_and_a_batch_claimed_before_the_stop_is_delivered()
    {
        let log = run_fake(5, Duration::from_millis(5), Duration::from_secs(30), 3).await;
        assert_eq!(
            log,
            [
                // No batch measured yet: the first is processed before claiming again.
                "claim", "start 1", "end 1", "claim", "start 2", "claim", "end 2",
                // Stopped during batch 3; batch 4 was claimed meanwhile and is delivered.
                "start 3", "claim", "end 3", "start 4", "end 4",
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_claim_ahead_is_not_idleness() {
        // As rows behind keys the running batch holds: the claim ahead finds nothing, the
        // rows are claimable once the batch is done. The next claim must not wait the poll
        // interval (10 ms here), and the turn after does not claim ahead.
        struct Keyed(Fake, std::sync::atomic::AtomicBool);
        impl Relay for Keyed {
            type Row = u32;
            async fn reclaim(&self) {}
            async fn update_gauges(&self) {}
            async fn claim(&self, n: u32, lease: Duration) -> queuebox_core::Result<Vec<u32>> {
                if self.1.load(std::sync::atomic::Ordering::SeqCst) {
                    self.0.log.lock().unwrap().push("claim (held)".into());
                    return Ok(Vec::new());
                }
                self.0.claim(n, lease).await
            }
            async fn process(&self, batch: Vec<u32>, claimed: Instant, hb: &Heartbeat) {
                self.1
                    .store(!batch.is_empty(), std::sync::atomic::Ordering::SeqCst);
                self.0.process(batch, claimed, hb).await;
                self.1.store(false, std::sync::atomic::Ordering::SeqCst);
            }
            fn claims_ahead(&self) -> bool {
                true
            }
        }
        let stop = CancellationToken::new();
        let keyed = Keyed(
            Fake {
                batches: Mutex::new((1..=4).collect()),
                log: Mutex::new(Vec::new()),
                work: Duration::from_millis(5),
                stop_at: (4, stop.clone()),
            },
            false.into(),
        );
        let pace = Pace {
            batch: BatchSize::fixed(1),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(10),
            gauge_interval: Duration::from_secs(60),
        };
        let t0 = tokio::time::Instant::now();
        run(&keyed, pace, &stop, &Heartbeat::unwatched()).await;
        assert_eq!(
            keyed.0.log.into_inner().unwrap(),
            [
                "claim",
                "start 1",
                "end 1",
                "claim",
                "start 2",
                "claim (held)",
                "end 2",
                "claim",
                "start 3",
                "end 3",
                "claim",
                "start 4",
                "claim (held)",
                "end 4",
            ]
        );
        // Four batches of 5 ms and no poll wait.
        assert_eq!(t0.elapsed(), Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn an_adapting_batch_grows_while_claims_come_back_full_and_follows_a_short_one() {
        // 3,000 rows, claimed as asked; the relay reports each new size.
        struct Rows {
            left: Mutex<usize>,
            log: Mutex<Vec<String>>,
            stop: CancellationToken,
        }
        impl Relay for Rows {
            type Row = u32;
            async fn reclaim(&self) {}
            async fn update_gauges(&self) {}
            async fn claim(&self, n: u32, _lease: Duration) -> queuebox_core::Result<Vec<u32>> {
                let mut left = self.left.lock().unwrap();
                let got = (n as usize).min(*left);
                *left -= got;
                self.log.lock().unwrap().push(format!("claim {n}: {got}"));
                if got == 0 {
                    self.stop.cancel();
                }
                Ok(vec![0; got])
            }
            async fn process(&self, _batch: Vec<u32>, _claimed: Instant, _hb: &Heartbeat) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            fn resized(&self, n: u32) {
                self.log.lock().unwrap().push(format!("size {n}"));
            }
        }
        let stop = CancellationToken::new();
        let rows = Rows {
            left: Mutex::new(3000),
            log: Mutex::new(Vec::new()),
            stop: stop.clone(),
        };
        let pace = Pace {
            batch: BatchSize {
                min: 100,
                max: 1000,
            },
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(10),
            gauge_interval: Duration::from_secs(60),
        };
        run(&rows, pace, &stop, &Heartbeat::unwatched()).await;
        assert_eq!(
            rows.log.into_inner().unwrap(),
            [
                "size 100",
                "claim 100: 100",
                "size 200",
                "claim 200: 200",
                "size 400",
                "claim 400: 400",
                "size 800",
                "claim 800: 800",
                "size 1000",
                "claim 1000: 1000",
                "claim 1000: 500",
                "size 500",
                "claim 500: 0",
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_claim_ahead_after_a_batch_that_was_not_full() {
        // Batch size 2, batches of one row: each claim took all there was.
        let stop = CancellationToken::new();
        let fake = Fake {
            batches: Mutex::new((1..=4).collect()),
            log: Mutex::new(Vec::new()),
            work: Duration::from_millis(5),
            stop_at: (3, stop.clone()),
        };
        let pace = Pace {
            batch: BatchSize::fixed(2),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(10),
            gauge_interval: Duration::from_secs(60),
        };
        run(&fake, pace, &stop, &Heartbeat::unwatched()).await;
        assert_eq!(
            fake.log.into_inner().unwrap(),
            [
                "claim", "start 1", "end 1", "claim", "start 2", "end 2", "claim", "start 3",
                "end 3"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_claim_ahead_behind_batches_slower_than_a_renewal_interval() {
        // 50 ms batches, a 90 ms lease: a batch claimed ahead would wait past its renewal.
        let log = run_fake(5, Duration::from_millis(50), Duration::from_millis(90), 3).await;
        assert_eq!(
            log,
            [
                "claim", "start 1", "end 1", "claim", "start 2", "end 2", "claim", "start 3",
                "end 3"
            ]
        );
    }
}
