//! Kafka offsets: a committed offset says that every record before it is done, so the
//! source commits only the unbroken run of records the inbox accepted, and rewinds a
//! partition to its first failed record. Records may finish in any order; the tracker keeps
//! the state of each dispatched offset per partition.

use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Accepted,
    Failed,
}

/// (topic, partition).
pub type Tp = (String, i32);

#[derive(Debug, Default)]
struct Partition {
    offsets: BTreeMap<i64, State>,
    /// While set, records of this partition at or after this offset are stale copies read
    /// before the seek: skip them until the rewound record itself comes back.
    rewinding_to: Option<i64>,
}

#[derive(Debug, Default)]
pub struct OffsetTracker {
    parts: HashMap<Tp, Partition>,
}

/// What to do with a record the consumer just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Process,
    /// Read before a seek-back took effect: a later poll rereads it; ignore this copy.
    Skip,
}

impl OffsetTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// A record was read. Returns whether to process it.
    pub fn admit(&mut self, tp: &Tp, offset: i64) -> Admit {
        let p = self.parts.entry(tp.clone()).or_default();
        if let Some(r) = p.rewinding_to {
            if offset != r {
                return Admit::Skip;
            }
            p.rewinding_to = None;
        }
        if p.offsets.contains_key(&offset) {
            return Admit::Skip;
        }
        p.offsets.insert(offset, State::InFlight);
        Admit::Process
    }

    /// The inbox accepted the record (new row, duplicate or dead row).
    pub fn accept(&mut self, tp: &Tp, offset: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            if let Some(s) = p.offsets.get_mut(&offset) {
                *s = State::Accepted;
            }
        }
    }

    /// The store failed for the record. Returns the offset to seek the partition back to when
    /// this is the partition's first failure (the caller seeks); `None` when an earlier
    /// failure already rewinds the partition past it.
    pub fn fail(&mut self, tp: &Tp, offset: i64) -> Option<i64> {
        let p = self.parts.get_mut(tp)?;
        p.offsets.get(&offset)?;
        p.offsets.insert(offset, State::Failed);
        let first_failed = p
            .offsets
            .iter()
            .find(|(_, s)| **s == State::Failed)
            .map(|(o, _)| *o)?;
        if first_failed != offset {
            // An earlier record already failed: this one is reread anyway.
            p.offsets.remove(&offset);
            return None;
        }
        // Everything from the failed record on is reread after the seek: forget it (records
        // still in flight there finish harmlessly, their rows deduplicate on reread).
        let later: Vec<i64> = p.offsets.range(offset..).map(|(o, _)| *o).collect();
        for o in later {
            p.offsets.remove(&o);
        }
        p.rewinding_to = Some(offset);
        Some(offset)
    }

    /// The offsets to commit now: per partition, one past the end of the unbroken run of
    /// accepted records from the start. Committed entries are forgotten.
    pub fn take_committable(&mut self) -> Vec<(Tp, i64)> {
        let mut out = Vec::new();
        for (tp, p) in &mut self.parts {
            let mut last = None;
            while let Some((&o, &s)) = p.offsets.iter().next() {
                if s != State::Accepted {
                    break;
                }
                last = Some(o);
                p.offsets.remove(&o);
            }
            if let Some(o) = last {
                out.push((tp.clone(), o + 1));
            }
        }
        out.sort();
        out
    }

    /// Records dispatched and not finished yet.
    pub fn in_flight(&self) -> usize {
        self.parts
            .values()
            .map(|p| {
                p.offsets
                    .values()
                    .filter(|s| **s == State::InFlight)
                    .count()
            })
            .sum()
    }

    /// A rebalance took the partition away: forget it.
    pub fn revoke(&mut self, tp: &Tp) {
        self.parts.remove(tp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> Tp {
        ("t".into(), p)
    }

    #[test]
    fn commits_only_the_unbroken_run_before_the_first_failure_and_rewinds_there() {
        let mut t = OffsetTracker::new();
        for o in 10..16 {
            assert_eq!(t.admit(&tp(0), o), Admit::Process);
        }
        for o in [10, 11, 12] {
            t.accept(&tp(0), o);
        }
        assert_eq!(t.fail(&tp(0), 13), Some(13));
        t.accept(&tp(0), 14); // finished after the failure: forgotten, reread later
        assert_eq!(t.fail(&tp(0), 15), None);
        assert_eq!(
            t.take_committable(),
            vec![(tp(0), 13)],
            "10..=12 are done; 13 is not"
        );
        assert_eq!(t.take_committable(), vec![]);
        // Copies read before the seek took effect are skipped, then 13 comes back.
        assert_eq!(t.admit(&tp(0), 14), Admit::Skip);
        assert_eq!(t.admit(&tp(0), 13), Admit::Process);
        assert_eq!(t.admit(&tp(0), 14), Admit::Process);
        t.accept(&tp(0), 14);
        assert_eq!(t.take_committable(), vec![], "14 waits for 13");
        t.accept(&tp(0), 13);
        assert_eq!(t.take_committable(), vec![(tp(0), 15)]);
    }

    #[test]
    fn out_of_order_completion_commits_only_when_the_gap_closes_and_partitions_are_independent() {
        let mut t = OffsetTracker::new();
        for o in 0..3 {
            t.admit(&tp(0), o);
            t.admit(&tp(1), o);
        }
        t.accept(&tp(0), 2);
        t.accept(&tp(0), 1);
        t.accept(&tp(1), 0);
        assert_eq!(t.take_committable(), vec![(tp(1), 1)]);
        assert_eq!(t.in_flight(), 3);
        t.accept(&tp(0), 0);
        assert_eq!(t.take_committable(), vec![(tp(0), 3)]);
        t.revoke(&tp(1));
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn a_failure_at_the_head_commits_nothing() {
        let mut t = OffsetTracker::new();
        t.admit(&tp(0), 5);
        t.admit(&tp(0), 6);
        t.accept(&tp(0), 6);
        assert_eq!(t.fail(&tp(0), 5), Some(5));
        assert!(t.take_committable().is_empty());
    }
}
