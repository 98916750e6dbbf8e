//! How many rows a worker aims to hold, from how long its handlers and its claims take.
//!
//! The batch ([`super::WorkerOptions::batch`]) stays the hard cap (a worker never holds more,
//! contract 17); within it a worker holds the rows its handlers are running plus the rows
//! they will have consumed by the time about two claim statements have come back:
//!
//! ```text
//! target = concurrency + ceil(concurrency × 2 × claim_time / handler_time)
//!          clamped to [min(concurrency, batch), batch], at least 1
//! ```
//!
//! so that a slot freed while a claim runs still finds a row waiting, and no more. A no-op
//! handler (µs) against a claim (ms) reaches the whole batch, which is what the adaptive
//! batch was sized for (benchmarks/results/batch-sweep-2026-12-04.json). Slow handlers
//! (500 ms at concurrency 8 against a 1 ms claim) hold concurrency + 1, so rows that other
//! workers could run, or that a crashed worker left behind, do not queue behind this one's
//! prefetch (benchmarks/peers.md, crash section: 64 rows of 4 s held at concurrency 8).
//! Before anything is measured a worker holds at most `max(10, 2 × concurrency)` within the
//! batch: a cold worker beside a slow queue does not take 8× its handlers.
//!
//! A claim waits, while handlers run, until half the target is free (fewer, larger claim
//! statements), or until the rows the handlers consume in one claim round trip are free
//! when that is less: with slow handlers the target is near `concurrency`, and waiting for
//! half of it would leave slots idle for a handler's length.
//!
//! "Handler time" is what the core sees: from a task's hand-out (`next`/`next_batch`) to the
//! start of its first finish. For the Rust worker and the Go and C# wrappers, whose core
//! concurrency is their handler count, that is the handler plus the boundary crossing. The
//! TypeScript and Python wrappers take whole batches and queue them in their own loop
//! (`WorkerOptions::hand_out`), so what the core sees would include that queue's wait: their
//! loops report the handlers' own times instead (`Worker::handlers_took`), and
//! `concurrency` is their handler count, as for the others.
//!
//! Both times are exponentially weighted moving averages, so the target follows a queue
//! whose handlers slow down or speed up within a few tasks.

use std::time::Duration;

/// The weight of a new observation in the moving averages.
const ALPHA: f64 = 0.2;

/// Moving averages of handler and claim-statement time, in seconds.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pace {
    handler: Option<f64>,
    claim: Option<f64>,
}

/// What the next claim may take: `target` rows held in all, and the fewest rows worth a
/// claim statement while handlers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Plan {
    pub target: u32,
    pub min_claim: u32,
}

impl Pace {
    pub fn handler_took(&mut self, d: Duration) {
        ewma(&mut self.handler, d.as_secs_f64());
    }

    pub fn claim_took(&mut self, d: Duration) {
        ewma(&mut self.claim, d.as_secs_f64());
    }

    pub fn plan(&self, concurrency: u32, batch: u32) -> Plan {
        plan(concurrency, batch, self.handler, self.claim)
    }
}

fn ewma(avg: &mut Option<f64>, x: f64) {
    *avg = Some(match *avg {
        Some(a) => a + ALPHA * (x - a),
        None => x,
    });
}

/// The sizing rule of this module, on measured times in seconds (`None`: not measured yet).
pub(super) fn plan(concurrency: u32, batch: u32, handler: Option<f64>, claim: Option<f64>) -> Plan {
    let batch = batch.max(1);
    let slots = concurrency.clamp(1, batch);
    let (target, per_claim) = match (handler, claim) {
        (Some(h), Some(k)) => {
            // Rows the handlers consume during one claim round trip (f64 → u32 saturates;
            // a handler time of 0 makes it infinite, so the batch).
            let per_claim = if h > 0.0 {
                f64::from(slots) * k / h
            } else {
                f64::INFINITY
            };
            let ahead = (2.0 * per_claim).ceil() as u32;
            (slots.saturating_add(ahead), Some(per_claim.ceil() as u32))
        }
        _ => (concurrency.saturating_mul(2).max(10), None),
    };
    let target = target.clamp(slots, batch);
    let half = (target / 2).max(1);
    let min_claim = per_claim.map_or(half, |p| p.clamp(1, half));
    Plan { target, min_claim }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 0.001;

    #[test]
    fn a_cold_worker_holds_twice_its_handlers_at_least_10_within_the_batch() {
        assert_eq!(plan(8, 64, None, None).target, 16);
        assert_eq!(plan(1, 10, None, None).target, 10);
        assert_eq!(plan(32, 256, None, Some(MS)).target, 64);
        assert_eq!(plan(8, 12, None, None).target, 12, "capped by the batch");
        assert_eq!(plan(8, 64, None, None).min_claim, 8);
    }

    #[test]
    fn no_op_handlers_reach_the_whole_batch() {
        for (c, batch) in [(1, 10), (8, 64), (32, 256)] {
            let p = plan(c, batch, Some(0.02 * MS), Some(MS));
            assert_eq!(
                p,
                Plan {
                    target: batch,
                    min_claim: batch / 2
                }
            );
        }
        assert_eq!(plan(8, 64, Some(0.0), Some(MS)).target, 64);
    }

    #[test]
    fn slow_handlers_hold_their_slots_and_a_round_trip_more() {
        // 500 ms handlers, 1 ms claims: one row ahead, and a claim as soon as one is free.
        assert_eq!(
            plan(8, 64, Some(500.0 * MS), Some(MS)),
            Plan {
                target: 9,
                min_claim: 1
            }
        );
        // 200 ms handlers at 4: what the integration test runs.
        assert_eq!(plan(4, 32, Some(200.0 * MS), Some(2.0 * MS)).target, 5);
        // Handlers as long as a claim: two claims' worth ahead.
        assert_eq!(
            plan(8, 64, Some(MS), Some(MS)),
            Plan {
                target: 24,
                min_claim: 8
            }
        );
    }

    #[test]
    fn an_explicit_batch_stays_the_cap() {
        assert_eq!(plan(8, 10, Some(0.02 * MS), Some(MS)).target, 10);
        assert_eq!(plan(8, 10, Some(MS), Some(MS)).target, 10);
        assert_eq!(plan(1, 1, Some(MS), Some(10.0 * MS)).target, 1);
    }

    #[test]
    fn concurrency_above_the_batch_holds_the_batch() {
        // Handlers at or above the batch: the slots are the batch.
        for h in [None, Some(0.02 * MS), Some(5000.0 * MS)] {
            assert_eq!(plan(64, 64, h, Some(MS)).target, 64);
            assert_eq!(plan(100, 64, h, Some(MS)).target, 64);
        }
        assert_eq!(plan(64, 64, Some(5000.0 * MS), Some(MS)).min_claim, 1);
        assert_eq!(plan(64, 64, None, None).min_claim, 32, "cold: as before");
    }

    #[test]
    fn the_averages_follow_new_times() {
        let mut p = Pace::default();
        p.claim_took(Duration::from_millis(1));
        p.handler_took(Duration::from_millis(500));
        assert_eq!(p.plan(8, 64).target, 9);
        for _ in 0..40 {
            p.handler_took(Duration::from_micros(10));
        }
        assert_eq!(p.plan(8, 64).target, 64);
    }
}
