//! Metrics shared by the relay and the pull worker: the process-wide lost-claim counters
//! the relay exports at `/metrics`, the buckets of every timer, and the Prometheus text
//! encoding. The registry, atomics and encoders are the Prometheus org's `prometheus-client`
//! crate (re-exported here, so an application registers QueueBox's metrics into its own
//! registry with the same version); a worker's own families are [`crate::worker::WorkerMetrics`].

use std::sync::atomic::{AtomicU64, Ordering};

pub use prometheus_client;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The upper bounds (seconds) of every timer's buckets: Prometheus' default buckets, which
/// span a local insert (ms) to a slow publish (s), plus 30 s and 60 s for the longest
/// destination timeouts, handlers and retention runs. `+Inf` is implied. Fixed buckets add
/// up across replicas (`sum by (le) (rate(..._bucket[5m]))`); quantiles of a window of
/// recent samples (summaries) cannot.
pub const BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A timer histogram with [`BUCKETS`] (the constructor of every timer family).
pub fn timer() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The `Content-Type` of [`encode_text`]'s output: the Prometheus text format 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// `registry` in the Prometheus text format (version 0.0.4), which every Prometheus
/// scraper and agent reads.
pub fn encode_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
        .expect("writing to a String cannot fail");
    text
}

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
