//! Worker settings with their defaults and validation.

use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::error::{Error, Result};

/// Settings of a pull [`crate::Worker`]. Defaults follow the reference client libraries.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOptions {
    /// The source whose pull rows this worker claims (required).
    pub source: String,
    /// The most rows one claim statement takes, and the most rows one worker holds at once.
    /// An explicit value caps every row the worker holds — waiting, running or being
    /// completed (the reference's "never more than a batch in flight"). `None` (the
    /// default) adapts it to `concurrency` ([`default_batch`]) and caps the rows waiting and
    /// running: up to a batch of rows whose handler finished and whose batched completion
    /// statement runs do not count, so the next claim overlaps that statement instead of
    /// waiting for it (at most twice the batch in `processing`). Read the value in force
    /// with [`WorkerOptions::batch`]. Within it a worker holds what its handlers consume
    /// while claims run, measured as it goes: the whole batch for fast handlers, about
    /// `concurrency` rows for slow ones (`worker::prefetch`).
    pub batch_size: Option<u32>,
    /// Handlers running at once (default 1); effectively at most [`WorkerOptions::batch`].
    pub concurrency: u32,
    /// Lease length (default 30 s); renewed every third of it on a separate connection.
    pub lease: Duration,
    /// How long an idle worker waits before claiming again (default 1 s). With `listen`,
    /// a new row wakes it sooner.
    pub poll_interval: Duration,
    /// How long shutdown waits for running handlers before cancelling them (default 30 s).
    pub shutdown_grace: Duration,
    /// Retry schedule and dead-letter ceiling for failed handlers.
    pub retry: RetryPolicy,
    /// Wake on LISTEN/NOTIFY when the backend has it (default true).
    pub listen: bool,
    /// The table and column names of an application's own schema (the relay's
    /// `database.outboxTableName` / `inboxTableName` / `columnMapping`); default QueueBox's
    /// own. [`crate::Worker::connect`] opens its store with them, so the claim and the
    /// statements handed to the application's driver use them.
    pub names: crate::store::names::Names,
    /// The OTLP collector's base URL (`otlpEndpoint`; else `OTEL_EXPORTER_OTLP_ENDPOINT`):
    /// when set, each task runs in a `handle` span exported there (`crate::otlp`). Unset:
    /// no exporter, no span.
    pub otlp_endpoint: Option<String>,
}

/// The largest batch, explicit or adaptive.
pub const MAX_BATCH_SIZE: u32 = 10_000;

/// The smallest adaptive batch: what a worker with up to 8 handlers may hold.
pub const MIN_DEFAULT_BATCH: u32 = 64;

/// The batch of a worker that sets none: `clamp(8 × concurrency, 64, 10000)`.
///
/// A worker never holds more than a batch of rows, so the batch bounds the rows in its
/// pipeline (claimed and waiting, running, being completed) and, by Little's law, its rate:
/// at a batch of `concurrency` the handlers idle while each claim and each completion
/// statement runs. Sweeping the batch at 20,000 rows with a no-op handler
/// (benchmarks/results/batch-sweep-2026-12-04.json, medians) gave, for 1c/2c/4c/8c/16c,
/// 3,621 / 6,117 / 10,623 / 15,941 / 20,194 rows/s at concurrency 8 and
/// 11,486 / 15,705 / 21,383 / 26,793 / 26,833 at concurrency 32. 8× is the knee: 16× adds
/// nothing at 32 while a worker would hold twice the rows that other workers cannot take
/// and that a crash strands until recovery. The floor is 64, not the reference's 10: one
/// handler spends most of its time waiting for claim and completion statements, and the
/// batch is what overlaps them, so at concurrency 1 the drain rose from 4,107 rows/s at
/// batch 10 to 10,673 / 13,375 / 18,487 at 32 / 64 / 128
/// (benchmarks/results/batch-sweep-c1-prefetch-2026-12-04.json). A large batch no longer
/// means many held rows: within the batch a worker holds what its measured handler and
/// claim times call for (`worker::prefetch`), about `concurrency` rows for slow handlers,
/// so the floor only lets fast handlers run ahead. 64 keeps the batch monotonic in
/// `concurrency` (8 × 8) and a crashed worker's stranded rows few. The ceiling is the
/// largest explicit batch.
pub fn default_batch(concurrency: u32) -> u32 {
    concurrency
        .saturating_mul(8)
        .clamp(MIN_DEFAULT_BATCH, MAX_BATCH_SIZE)
}

impl WorkerOptions {
    pub fn new(source: impl Into<String>) -> Self {
        WorkerOptions {
            source: source.into(),
            batch_size: None,
            concurrency: 1,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            listen: true,
            names: Default::default(),
            otlp_endpoint: None,
        }
    }

    /// Fails with [`Error::Config`] naming the first invalid field.
    pub fn validate(&self) -> Result<()> {
        if self.source.trim().is_empty() {
            return Err(Error::config("source", "is required and must not be blank"));
        }
        if self.source.chars().count() > crate::message::MAX_KEY_CHARS {
            return Err(Error::config("source", "is longer than 255 characters"));
        }
        // Only an explicit batch can be wrong; the adaptive one is clamped.
        match self.batch_size {
            Some(0) => return Err(Error::config("batchSize", "must be greater than 0")),
            Some(b) if b > MAX_BATCH_SIZE => {
                return Err(Error::config("batchSize", "must be at most 10000"))
            }
            _ => {}
        }
        if self.concurrency == 0 {
            return Err(Error::config("concurrency", "must be greater than 0"));
        }
        if self.lease < Duration::from_millis(300) {
            return Err(Error::config(
                "leaseMs",
                "must be at least 300 ms so that a renewal fits in a third of it",
            ));
        }
        if self.poll_interval.is_zero() {
            return Err(Error::config("pollIntervalMs", "must be greater than 0"));
        }
        if let Some(e) = &self.otlp_endpoint {
            crate::otlp::check_endpoint(e).map_err(|why| Error::config("otlpEndpoint", why))?;
        }
        self.retry.validate()
    }

    /// The batch in force: the explicit `batch_size`, else [`default_batch`] of
    /// `concurrency`.
    pub fn batch(&self) -> u32 {
        self.batch_size
            .unwrap_or_else(|| default_batch(self.concurrency))
    }

    /// How many rows being completed a worker may hold beside its batch: none with an
    /// explicit `batch_size`, one batch with the adaptive one ([`WorkerOptions::batch_size`]).
    pub(crate) fn completions_beside_batch(&self) -> u32 {
        match self.batch_size {
            Some(_) => 0,
            None => self.batch(),
        }
    }

    /// Handlers that can run at once: `min(concurrency, batch())`.
    pub fn effective_concurrency(&self) -> u32 {
        self.concurrency.min(self.batch())
    }

    /// How often the leases are renewed: a third of the lease.
    pub fn renewal_interval(&self) -> Duration {
        crate::lease::renewal_interval(self.lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(batch_size: Option<u32>, concurrency: u32) -> WorkerOptions {
        WorkerOptions {
            batch_size,
            concurrency,
            ..WorkerOptions::new("s")
        }
    }

    #[test]
    fn an_unset_batch_is_eight_per_handler_between_64_and_10000() {
        assert_eq!(WorkerOptions::new("s").batch(), 64);
        let got: Vec<u32> = [1, 2, 8, 32, 1250, 5000, u32::MAX]
            .iter()
            .map(|&c| with(None, c).batch())
            .collect();
        assert_eq!(got, [64, 64, 64, 256, 10_000, 10_000, 10_000]);
    }

    #[test]
    fn concurrency_32_without_a_batch_runs_32_handlers() {
        let o = with(None, 32);
        o.validate().unwrap();
        assert_eq!((o.batch(), o.effective_concurrency()), (256, 32));
    }

    #[test]
    fn an_explicit_batch_is_kept_and_caps_the_handlers() {
        let o = with(Some(10), 32);
        o.validate().unwrap();
        assert_eq!((o.batch(), o.effective_concurrency()), (10, 10));
        assert_eq!(with(Some(10_000), 1).batch(), 10_000);
    }

    #[test]
    fn only_an_explicit_batch_is_validated_naming_batch_size() {
        for bad in [0, 10_001] {
            let e = with(Some(bad), 1).validate().unwrap_err();
            assert!(
                matches!(&e, Error::Config { path, .. } if path == "batchSize"),
                "{e}"
            );
        }
        with(None, u32::MAX).validate().unwrap();
    }
}
