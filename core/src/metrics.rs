//! Process-wide counters the core increments; the relay exports them at `/metrics` and a
//! worker reports its own share through [`crate::worker::WorkerStats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Which part of QueueBox lost a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Outbox,
    Inbox,
    /// A pull worker (an application's handler).
    Pull,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Outbox => "outbox",
            Component::Inbox => "inbox",
            Component::Pull => "pull",
        }
    }
}

static CLAIMS_LOST: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// Counts a fenced write that matched no row (`queuebox_claims_lost_total{component}`).
pub fn claim_lost(component: Component) {
    CLAIMS_LOST[component as usize].fetch_add(1, Ordering::Relaxed);
}

/// The current value of `queuebox_claims_lost_total{component}`.
pub fn claims_lost(component: Component) -> u64 {
    CLAIMS_LOST[component as usize].load(Ordering::Relaxed)
}
