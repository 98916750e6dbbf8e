//! Worker settings with their defaults and validation.

use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::error::{Error, Result};

/// Settings of a pull [`crate::Worker`]. Defaults follow the reference client libraries.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOptions {
    /// The source whose pull rows this worker claims (required).
    pub source: String,
    /// Rows claimed per claim statement (default 10). Never more than this many rows are
    /// claimed by one worker at once, running, waiting or being completed, so for short
    /// handlers about 4–5× `concurrency` keeps them busy (see benchmarks/peers.md).
    pub batch_size: u32,
    /// Handlers running at once (default 1); effectively at most `batch_size`.
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

impl WorkerOptions {
    pub fn new(source: impl Into<String>) -> Self {
        WorkerOptions {
            source: source.into(),
            batch_size: 10,
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
        if self.batch_size == 0 {
            return Err(Error::config("batchSize", "must be greater than 0"));
        }
        if self.batch_size > 10_000 {
            return Err(Error::config("batchSize", "must be at most 10000"));
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

    /// Handlers that can run at once: `min(concurrency, batch_size)`.
    pub fn effective_concurrency(&self) -> u32 {
        self.concurrency.min(self.batch_size)
    }

    /// How often the leases are renewed: a third of the lease.
    pub fn renewal_interval(&self) -> Duration {
        crate::lease::renewal_interval(self.lease)
    }
}
