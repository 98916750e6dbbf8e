//! The pull worker's metrics, kept here once for every language: rows claimed (and the
//! claims that returned rows), completed,
//! retried, dead and released, claims lost, claim errors, lease renewals, and the claim
//! and handler durations as histograms, each labelled by `source`. The Rust application
//! registers them into its own `prometheus-client` registry ([`WorkerMetrics::register`]);
//! the C ABI and every wrapper hand out [`WorkerMetrics::encode_text`], which the
//! application serves from its own HTTP server.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{encode_text, timer};

type Source = [(&'static str, String); 1];
type Counters = Family<Source, Counter>;
type Timers = Family<Source, Histogram, fn() -> Histogram>;

/// The metric families of one worker, or of several that share them
/// ([`super::Worker::new_with_metrics`]: one registration, series split by `source`).
/// Cheap to clone; clones share the values.
#[derive(Clone, Debug)]
pub struct WorkerMetrics {
    claimed: Counters,
    claims: Counters,
    completed: Counters,
    retried: Counters,
    dead: Counters,
    released: Counters,
    claims_lost: Counters,
    claim_errors: Counters,
    lease_renewals: Counters,
    claim_duration: Timers,
    handler_duration: Timers,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics {
            claimed: Counters::default(),
            claims: Counters::default(),
            completed: Counters::default(),
            retried: Counters::default(),
            dead: Counters::default(),
            released: Counters::default(),
            claims_lost: Counters::default(),
            claim_errors: Counters::default(),
            lease_renewals: Counters::default(),
            claim_duration: Timers::new_with_constructor(timer),
            handler_duration: Timers::new_with_constructor(timer),
        }
    }
}

impl WorkerMetrics {
    /// Adds the families to `registry` (names below; a counter's `_total` is added by the
    /// encoder). Register each `WorkerMetrics` once per registry: two workers that should
    /// appear in one registry share one through [`super::Worker::new_with_metrics`].
    pub fn register(&self, registry: &mut Registry) {
        let counters = [
            (
                "queuebox_worker_claimed",
                "Rows claimed by pull workers",
                &self.claimed,
            ),
            (
                "queuebox_worker_claims",
                "Claim statements that returned at least one row",
                &self.claims,
            ),
            (
                "queuebox_worker_completed",
                "Rows completed (processed)",
                &self.completed,
            ),
            (
                "queuebox_worker_retried",
                "Rows handed back for a retry after a failure",
                &self.retried,
            ),
            (
                "queuebox_worker_dead",
                "Rows dead-lettered by a handler or after the last attempt",
                &self.dead,
            ),
            (
                "queuebox_worker_released",
                "Claimed rows released unhandled (shutdown), no attempt spent",
                &self.released,
            ),
            (
                "queuebox_worker_claims_lost",
                "Finishes and renewals that found the claim lost (lease expired)",
                &self.claims_lost,
            ),
            (
                "queuebox_worker_claim_errors",
                "Claim statements that failed (database unreachable, ...)",
                &self.claim_errors,
            ),
            (
                "queuebox_worker_lease_renewals",
                "Leases of running rows extended by the renewer",
                &self.lease_renewals,
            ),
        ];
        for (name, help, family) in counters {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "queuebox_worker_claim_duration_seconds",
            "Time of one claim statement that returned rows or none",
            self.claim_duration.clone(),
        );
        registry.register(
            "queuebox_worker_handler_duration_seconds",
            "Time from a row handed to the handler to its finish (complete, retry, dead, release, abandon)",
            self.handler_duration.clone(),
        );
    }

    /// The families in the Prometheus text format (version 0.0.4, content type
    /// [`crate::metrics::TEXT_CONTENT_TYPE`]), for the application's `/metrics`.
    pub fn encode_text(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        encode_text(&registry)
    }

    /// The series of `source`: handles the worker updates without a label lookup.
    pub(super) fn for_source(&self, source: &str) -> WorkerStats {
        let l = [("source", source.to_string())];
        WorkerStats {
            claimed: self.claimed.get_or_create_owned(&l),
            claims: self.claims.get_or_create_owned(&l),
            completed: self.completed.get_or_create_owned(&l),
            retried: self.retried.get_or_create_owned(&l),
            dead: self.dead.get_or_create_owned(&l),
            released: self.released.get_or_create_owned(&l),
            claims_lost: self.claims_lost.get_or_create_owned(&l),
            claim_errors: self.claim_errors.get_or_create_owned(&l),
            lease_renewals: self.lease_renewals.get_or_create_owned(&l),
            claim_duration: self.claim_duration.get_or_create_owned(&l),
            handler_duration: self.handler_duration.get_or_create_owned(&l),
        }
    }
}

/// One worker's series in its [`WorkerMetrics`] (its source's label). Counters of workers
/// that share a `WorkerMetrics` and a source are the same series.
#[derive(Debug)]
pub struct WorkerStats {
    pub claimed: Counter,
    /// Claim statements that returned at least one row.
    pub claims: Counter,
    pub completed: Counter,
    pub retried: Counter,
    pub dead: Counter,
    pub released: Counter,
    pub claims_lost: Counter,
    pub claim_errors: Counter,
    pub lease_renewals: Counter,
    pub claim_duration: Histogram,
    pub handler_duration: Histogram,
}
