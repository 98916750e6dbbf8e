//! Where a pull claim starts its scan of pending rows ("cost does not grow with
//! history").
//!
//! [`sql::CLAIM`](super::sql::CLAIM) reads due pending rows in `(priority, scheduled_at, sequence)`
//! order from the head of `idx_inbox_pull_pending_priority`. Every row it claims leaves a dead entry
//! at that head until vacuum removes it, and while any transaction stays open (vacuum pinned)
//! nothing can, so each claim from the head walks every row drained since the pin: ~5,000
//! buffers and 35 ms per claim after 20,000 rows (`benchmarks/history.md`). So while a queue
//! drains, a claim that follows a full one starts where that one stopped instead — at the
//! first pending candidate it did not take — and leaves out the expired-lease branch, whose
//! index fills with dead entries the same way ([`sql::CLAIM_FROM`](super::sql::CLAIM_FROM)).
//!
//! A claim that starts further on can miss rows behind its start: a row whose insert committed
//! after later rows were claimed, a row released back to its old place, a lease that expired.
//! A claim from the head finds them, and one runs
//! - whenever the last claim of the source came back short (the queue is drained, so the next
//!   claim is cheap, or the start is unknown), or saw an expired lease it did not take;
//! - right after dead-owner recovery expired a crashed worker's leases
//!   ([`ClaimStarts::restart_at_head`]), so recovery in seconds does not wait for the interval;
//! - right after this process released a claimed row ([`ClaimStarts::restart_all_at_head`]):
//!   a released row goes back to its old place in the queue and is the next one claimed, as
//!   before there was a start, not a second later behind newer rows;
//! - at least every [`FULL_EVERY`], or [`FULL_COST_SHARE`] times as long as the last full
//!   claim took if that is longer (at most [`FULL_EVERY_MAX`]): with a transaction held open a
//!   claim from the head walks every row drained since, so it runs less often and takes a
//!   bounded share of the time, and the late rows it catches up on wait longer (only while the
//!   queue stays full: a short claim sends the next one to the head).
//!
//! The start is a hint kept per source in this process's store; nothing depends on it for
//! correctness, since the claim itself (its lock step re-checks every row) decides what is
//! taken. Several workers of a source share it, and several processes each keep their own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// The longest claims start further on without a claim from the head, when the last claim
/// from the head was fast.
pub(super) const FULL_EVERY: Duration = Duration::from_secs(1);

/// A slow claim from the head runs at most once per this many times its duration.
const FULL_COST_SHARE: u32 = 50;

/// The longest claims start further on without a claim from the head, however slow the last
/// one was (a claim slowed by a busy database must not hold late rows back for minutes).
const FULL_EVERY_MAX: Duration = Duration::from_secs(10);

/// A position in the pending scan's order: `(priority, scheduled_at, sequence)`, where a
/// higher priority comes first.
pub(super) type Position = (i16, DateTime<Utc>, i64);

/// The claim starts of one store, per source.
#[derive(Debug, Default)]
pub(super) struct ClaimStarts(Mutex<HashMap<String, Start>>);

#[derive(Debug)]
struct Start {
    /// Where the next claim may start; `None` after a short claim.
    from: Option<Position>,
    /// When the last claim from the head ran, and how long it took.
    last_full: Instant,
    full_took: Duration,
    /// When a claim from the head was asked for (dead-owner recovery, a release). It stays
    /// due until a claim from the head that began after the ask ends: a claim already running
    /// then (started, or from the head but too early) may not have seen the rows.
    head_due: Option<Instant>,
}

impl ClaimStarts {
    /// Where `source`'s next claim starts its scan; `None`: from the head, with the
    /// expired-lease branch.
    pub(super) fn next(&self, source: &str) -> Option<Position> {
        let starts = self.0.lock().unwrap();
        let s = starts.get(source)?;
        let every = (s.full_took * FULL_COST_SHARE).clamp(FULL_EVERY, FULL_EVERY_MAX);
        s.from
            .filter(|_| s.head_due.is_none() && s.last_full.elapsed() < every)
    }

    /// Sends `source`'s next claim to the head.
    pub(super) fn restart_at_head(&self, source: &str) {
        if let Some(s) = self.0.lock().unwrap().get_mut(source) {
            s.head_due = Some(Instant::now());
        }
    }

    /// Sends every source's next claim to the head (a released row does not say its
    /// source; releases are rare, and a claim from the head is cheap once).
    pub(super) fn restart_all_at_head(&self) {
        let now = Instant::now();
        for s in self.0.lock().unwrap().values_mut() {
            s.head_due = Some(now);
        }
    }

    /// Records a claim of `source`: whether it ran `from_head` and how long it `took`, and
    /// where the next one may start (`Some` only when this claim was full and knew a
    /// candidate it did not take).
    pub(super) fn record(
        &self,
        source: &str,
        from_head: bool,
        took: Duration,
        next: Option<Position>,
    ) {
        let mut starts = self.0.lock().unwrap();
        match starts.get_mut(source) {
            Some(s) => {
                if from_head {
                    let now = Instant::now();
                    s.last_full = now;
                    s.full_took = took;
                    if let (Some(asked), Some(began)) = (s.head_due, now.checked_sub(took)) {
                        if began >= asked {
                            s.head_due = None;
                        }
                    }
                }
                s.from = next;
            }
            None if from_head => {
                starts.insert(
                    source.to_string(),
                    Start {
                        from: next,
                        last_full: Instant::now(),
                        full_took: took,
                        head_due: None,
                    },
                );
            }
            // Only a claim from the head creates a source's entry (a started claim needs one).
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: i64) -> Option<Position> {
        Some((
            0,
            DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap(),
            seq,
        ))
    }

    #[test]
    fn a_source_claims_from_the_head_until_a_full_claim_knows_where_to_go_on() {
        let s = ClaimStarts::default();
        assert_eq!(s.next("a"), None, "nothing known: from the head");
        s.record("a", true, Duration::from_millis(1), None);
        assert_eq!(s.next("a"), None, "a short claim: from the head again");
        s.record("a", true, Duration::from_millis(1), at(11));
        assert_eq!(s.next("a"), at(11));
        assert_eq!(s.next("b"), None, "per source");
        s.record("a", false, Duration::from_millis(1), at(21));
        assert_eq!(s.next("a"), at(21), "a started claim moves the start on");
        s.record("a", false, Duration::from_millis(1), None);
        assert_eq!(s.next("a"), None, "a short started claim: back to the head");
    }

    #[test]
    fn a_claim_from_the_head_runs_at_least_every_interval() {
        let s = ClaimStarts::default();
        s.record("a", true, Duration::from_millis(1), at(11));
        assert_eq!(s.next("a"), at(11));
        std::thread::sleep(FULL_EVERY + Duration::from_millis(20));
        assert_eq!(s.next("a"), None, "the interval passed: from the head");
        s.record("a", false, Duration::ZERO, at(31));
        assert_eq!(
            s.next("a"),
            None,
            "only a claim from the head restarts the interval"
        );
    }

    #[test]
    fn a_slow_claim_from_the_head_runs_less_often() {
        let s = ClaimStarts::default();
        // 40 ms from the head: the next one is due after 2 s, not FULL_EVERY.
        s.record("a", true, Duration::from_millis(40), at(11));
        std::thread::sleep(FULL_EVERY + Duration::from_millis(20));
        assert_eq!(s.next("a"), at(11));
    }

    #[test]
    fn however_slow_the_last_claim_from_the_head_the_next_comes_within_the_cap() {
        let s = ClaimStarts::default();
        s.record("a", true, Duration::from_secs(5), at(11));
        assert_eq!(s.next("a"), at(11));
        // As if FULL_EVERY_MAX had passed since that claim.
        s.0.lock().unwrap().get_mut("a").unwrap().last_full -= FULL_EVERY_MAX;
        assert_eq!(s.next("a"), None);
    }

    #[test]
    fn dead_owner_recovery_sends_the_next_claim_to_the_head() {
        let s = ClaimStarts::default();
        s.record("a", true, Duration::from_millis(1), at(11));
        s.restart_at_head("a");
        assert_eq!(s.next("a"), None);
        // A started claim that was running meanwhile records its end: still to the head.
        s.record("a", false, Duration::from_millis(1), at(21));
        assert_eq!(s.next("a"), None);
        // So does a claim from the head that began before the ask.
        s.record("a", true, Duration::from_secs(1), at(21));
        assert_eq!(s.next("a"), None);
        std::thread::sleep(Duration::from_millis(5));
        s.record("a", true, Duration::from_millis(1), at(31));
        assert_eq!(s.next("a"), at(31), "the claim from the head ran");
    }

    #[test]
    fn a_release_sends_every_sources_next_claim_to_the_head() {
        let s = ClaimStarts::default();
        s.record("a", true, Duration::from_millis(1), at(11));
        s.record("b", true, Duration::from_millis(1), at(12));
        s.restart_all_at_head();
        assert_eq!((s.next("a"), s.next("b")), (None, None));
        std::thread::sleep(Duration::from_millis(5));
        s.record("a", true, Duration::from_millis(1), at(21));
        assert_eq!((s.next("a"), s.next("b")), (at(21), None));
    }
}
