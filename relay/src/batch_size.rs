//! How many rows a relay's next claim asks for. A fixed size (`min == max`, a `batchSize`
//! that was set) is asked for every time. A range (the outbox relay with `outbox.batchSize`
//! unset) starts at `min` and follows what the last batch showed:
//!
//! - it came back full, and a batch twice as large would still be processed within
//!   [`STEP_LIMIT`] and hold at most [`BYTES_LIMIT`] of rows: double, up to `max` or the
//!   keys' limit below (the rows were there, and each claim and each sent mark costs about
//!   the same for 100 rows as for 1,000, so larger batches drain faster: BENCHMARKS.md);
//! - it came back short, claimed with nothing else held (everything claimable, or one row per
//!   ordering key when keys bound it): the size and the limit become what it returned, at
//!   least `min`. Asking for more where keys bound the claim makes the claim walk every key
//!   for nothing;
//! - it came back short, claimed *ahead* while the batch before held `held` rows and so their
//!   keys: about `held + got` keys have rows, and two batches of half that each fill while
//!   the other is published, so the size and the limit become `(held + got) / 2` (rather
//!   than alternating full and short batches, which drained slower);
//! - it took longer than [`STEP_LIMIT`] or held more than [`BYTES_LIMIT`]: halve, down to
//!   `min`, so a slow destination or large payloads bring it back to the configured floor.
//!
//! The limit stands until [`PROBE_AFTER`] full batches at it (rows may have spread over more
//! keys since) or a claim that finds nothing (the backlog is gone). An empty claim changes no
//! size: the relay is idle, and its next batch starts where the last one left off (a trickle
//! of rows shrinks it back to `min` on its first short claim).

use std::time::Duration;

/// A batch grows only while twice its processing time stays within this: the relay's loop
/// finishes the batch in progress at shutdown and beats its heartbeat between batches, so
/// a batch stays a short step whatever the default lets it grow to.
pub(crate) const STEP_LIMIT: Duration = Duration::from_secs(1);

/// A batch grows only while twice its rows' bytes (payloads and headers) stay within this:
/// the claimed rows are held in memory until the batch is done.
pub(crate) const BYTES_LIMIT: usize = 16 << 20;

/// Full batches at the keys' limit before the size may grow past it again: rows may have
/// spread over more keys since the limit was learned. One probe costs about one batch
/// published without a claim overlapping it.
pub(crate) const PROBE_AFTER: u32 = 8;

/// The rows one claim may ask for: `min..=max`, fixed when they are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSize {
    pub min: u32,
    pub max: u32,
}

impl BatchSize {
    pub(crate) fn fixed(n: u32) -> Self {
        BatchSize { min: n, max: n }
    }

    /// Whether the size follows the batches (and so needs their bytes).
    pub(crate) fn adapts(&self) -> bool {
        self.min < self.max
    }
}

/// The size of the next claim, following [`BatchSize`]'s rules.
#[derive(Debug)]
pub(crate) struct Sizer {
    range: BatchSize,
    next: u32,
    /// The most the size grows to: `max`, or what the last short claim showed the rows (or
    /// their keys) allow.
    limit: u32,
    /// Full batches in a row at `limit` (below `max`).
    at_limit: u32,
}

/// What one processed batch showed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    /// The rows its claim asked for.
    pub asked: u32,
    /// The rows it returned.
    pub got: usize,
    /// How long the batch took to process.
    pub took: Duration,
    /// Its rows' bytes (0 when the relay does not count them).
    pub bytes: usize,
    /// The rows of the batch processed while it was claimed (their keys held); 0 when it
    /// was not claimed ahead.
    pub held: usize,
}

impl Sizer {
    pub(crate) fn new(range: BatchSize) -> Self {
        Sizer {
            range,
            next: range.min,
            limit: range.max,
            at_limit: 0,
        }
    }

    /// The rows the next claim asks for.
    pub(crate) fn next(&self) -> u32 {
        self.next
    }

    pub(crate) fn adapts(&self) -> bool {
        self.range.adapts()
    }

    /// Follows one processed batch; returns the new size when it changed.
    pub(crate) fn processed(&mut self, b: Outcome) -> Option<u32> {
        let BatchSize { min, max } = self.range;
        if min == max {
            return None;
        }
        if b.got == 0 {
            // Only a claim made alone comes back empty (an empty claim ahead is not a batch).
            self.limit = max;
            return None;
        }
        let got = u32::try_from(b.got).unwrap_or(u32::MAX);
        let next = if b.took > STEP_LIMIT || b.bytes > BYTES_LIMIT {
            (self.next / 2).max(min)
        } else if got < b.asked {
            let held = u32::try_from(b.held).unwrap_or(u32::MAX);
            self.limit = if held > 0 {
                (held.saturating_add(got) / 2).clamp(min, max)
            } else {
                got.clamp(min, max)
            };
            self.at_limit = 0;
            self.limit
        } else if b.took * 2 <= STEP_LIMIT && b.bytes.saturating_mul(2) <= BYTES_LIMIT {
            if self.next >= self.limit && self.limit < max {
                self.at_limit += 1;
                if self.at_limit >= PROBE_AFTER {
                    self.limit = max;
                    self.at_limit = 0;
                }
            }
            self.next.saturating_mul(2).min(self.limit)
        } else {
            self.next
        };
        if next < self.limit {
            self.at_limit = 0;
        }
        (next != std::mem::replace(&mut self.next, next)).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_millis(10);
    /// The outbox relay's default range.
    const OUTBOX: BatchSize = BatchSize {
        min: 100,
        max: 1000,
    };

    fn full(n: u32) -> Outcome {
        Outcome {
            asked: n,
            got: n as usize,
            took: FAST,
            bytes: 1000,
            held: 0,
        }
    }

    #[test]
    fn full_fast_batches_double_up_to_the_max() {
        let mut s = Sizer::new(OUTBOX);
        let mut seen = vec![s.next()];
        for _ in 0..5 {
            s.processed(full(s.next()));
            seen.push(s.next());
        }
        assert_eq!(seen, [100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn a_short_batch_sets_the_size_and_the_limit_to_what_it_returned_but_not_below_the_min() {
        let mut s = Sizer::new(OUTBOX);
        for _ in 0..4 {
            s.processed(full(s.next()));
        }
        assert_eq!(s.next(), 1000);
        let short = |asked, got| Outcome {
            asked,
            got,
            ..full(0)
        };
        assert_eq!(s.processed(short(1000, 300)), Some(300));
        assert_eq!(s.processed(full(300)), None, "held at the limit");
        // A claim that finds nothing lifts the limit.
        assert_eq!(s.processed(short(300, 0)), None);
        assert_eq!(s.processed(full(300)), Some(600));
        s.next = 1000;
        assert_eq!(s.processed(short(1000, 7)), Some(100));
    }

    #[test]
    fn a_short_batch_claimed_ahead_sets_half_the_keys_seen_as_the_limit_until_probed() {
        let mut s = Sizer::new(OUTBOX);
        s.next = 800;
        // 800 rows (keys) held, 200 more keys claimable: 1,000 keys, two batches of 500.
        let ahead = Outcome {
            got: 200,
            held: 800,
            ..full(800)
        };
        assert_eq!(s.processed(ahead), Some(500));
        // Full batches at the limit do not grow it, until the probe.
        for _ in 1..PROBE_AFTER {
            assert_eq!(s.processed(full(500)), None);
        }
        assert_eq!(s.processed(full(500)), Some(1000), "probe");
        // The keys have not changed: back to half of them.
        let ahead = Outcome {
            asked: 1000,
            got: 500,
            held: 500,
            ..full(1000)
        };
        assert_eq!(s.processed(ahead), Some(500));
        assert_eq!(
            s.processed(full(500)),
            None,
            "a new limit waits for its own probe"
        );
        // A short claim with nothing held sets the limit to what it returned.
        let alone = Outcome {
            asked: 500,
            got: 480,
            ..full(500)
        };
        assert_eq!(s.processed(alone), Some(480));
        assert_eq!(s.processed(full(480)), None);
    }

    #[test]
    fn slow_or_heavy_batches_halve_to_the_min_and_do_not_grow() {
        let mut s = Sizer::new(OUTBOX);
        s.next = 800;
        let slow = Outcome {
            took: STEP_LIMIT + FAST,
            ..full(800)
        };
        assert_eq!(s.processed(slow), Some(400));
        let heavy = Outcome {
            bytes: BYTES_LIMIT + 1,
            ..full(400)
        };
        assert_eq!(s.processed(heavy), Some(200));
        assert_eq!(s.processed(heavy), Some(100));
        assert_eq!(s.processed(heavy), None, "never below the min");
        // Within the limits but not with twice the batch: it stays.
        let half_a_second = Outcome {
            took: STEP_LIMIT / 2 + FAST,
            ..full(100)
        };
        assert_eq!(s.processed(half_a_second), None);
        let half_the_bytes = Outcome {
            bytes: BYTES_LIMIT / 2 + 1,
            ..full(100)
        };
        assert_eq!(s.processed(half_the_bytes), None);
    }

    #[test]
    fn empty_claims_and_fixed_sizes_change_nothing() {
        let mut s = Sizer::new(OUTBOX);
        let empty = Outcome {
            got: 0,
            ..full(100)
        };
        assert_eq!(s.processed(empty), None);
        assert_eq!(s.next(), 100);
        let mut fixed = Sizer::new(BatchSize::fixed(100));
        assert!(!fixed.adapts());
        assert_eq!(fixed.processed(full(100)), None);
        assert_eq!(fixed.next(), 100);
    }
}
