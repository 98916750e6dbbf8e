//! Worker settings with their defaults and validation.

use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::error::{Error, Result};

/// Settings of a pull [`crate::Worker`]. Defaults match the Go, C#, TypeScript and Python workers.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOptions {
    /// The source whose pull rows this worker claims (required).
    pub source: String,
    /// The most rows one claim statement takes, and the most rows one worker holds at once.
    /// An explicit value caps every row the worker holds — waiting, running or being
    /// completed (proto-docs/client-contract.md, promise 17). `None` (the
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
    /// Tasks go out in batches to a language's own handler loop, which queues them and runs
    /// `concurrency` handlers at once (the Node and Python bindings set this; default false).
    /// Up to the whole batch may then be handed out, so that one crossing carries many rows
    /// even at concurrency 1; `concurrency` stays the handlers' count, which sizes the
    /// adaptive batch ([`default_batch`]) and the prefetch within it, from the
    /// handler times the loop reports ([`crate::Worker::handlers_took`]); an unset
    /// `batch_size` stays adaptive, with completions beside it. (Before this flag those
    /// wrappers passed the batch as `concurrency` and the resolved batch as an explicit
    /// `batch_size`: their completing rows counted against the batch, so each claim waited
    /// for the previous batch's completion statements, and slow handlers held the whole
    /// batch.)
    pub hand_out: bool,
    /// Periodic schedules this worker's process runs beside its claims, until the worker
    /// shuts down (`crate::schedule`): each tick enqueues one row, once however many workers
    /// and relays run the same schedule. A schedule may enqueue into any source, not only
    /// the one this worker claims.
    pub schedules: Vec<crate::schedule::Schedule>,
}

/// The largest batch, explicit or adaptive.
pub const MAX_BATCH_SIZE: u32 = 10_000;

/// The adaptive batch at high concurrency (from 32 handlers), before two rows per handler
/// take over (from 129).
pub const MIN_DEFAULT_BATCH: u32 = 256;

/// The adaptive batch at low concurrency (up to 8 handlers).
pub const MAX_DEFAULT_BATCH: u32 = 1024;

/// The rows in flight that the adaptive batch shares among its handlers (8192 / 8 = 1024,
/// 8192 / 32 = 256).
const ROWS_IN_FLIGHT: u32 = 8192;

/// The batch of a worker that sets none, the same in every language:
/// `max(clamp(8192 / concurrency, 256, 1024), 2 × concurrency)`, at most 10000
/// (1024 up to 8 handlers, 512 at 16, 256 from 32 to 128, then two rows per handler).
///
/// A worker never holds more than a batch of rows, so the batch bounds the rows in its
/// pipeline (claimed and waiting, running, being completed) and, by Little's law, its rate.
/// The numbers are where the drains of benchmarks/peers.md peak on the reference 2-core
/// machine: a plain `SKIP LOCKED` claim + complete on QueueBox's table is fastest at 1024
/// rows per claim, and the Rust worker drained 1.36–1.48× faster at 1024 than at 64 with
/// 1 and 8 handlers, but 0.87× at 32 handlers, where 256 was better for the Rust worker
/// and the Python and TypeScript wrappers alike. Hence a batch that shrinks as handlers grow
/// (about 8192 rows in flight over all handlers), down to 256, and never fewer than two rows
/// per handler, so that many slow handlers all find work.
///
/// A large batch does not mean many held rows: within it a worker holds what its measured
/// handler and claim times call for (`worker::prefetch`), about `concurrency` rows for slow
/// handlers, so the batch only lets fast handlers run ahead, and a crashed worker strands
/// few slow rows. A [`WorkerOptions::hand_out`] wrapper (Go, C#, TypeScript, Python) gets
/// the same batch: its loop's own time per row is covered by the prefetch it reports times
/// for. (Before, the Rust worker defaulted to `clamp(8c, 64, 10000)` and the wrappers to
/// `clamp(32c, 1024, 10000)`, so each language was fastest at a different concurrency and
/// the Rust worker was the slow one at low concurrency.)
pub fn default_batch(concurrency: u32) -> u32 {
    let shared = (ROWS_IN_FLIGHT / concurrency.max(1)).clamp(MIN_DEFAULT_BATCH, MAX_DEFAULT_BATCH);
    shared
        .max(concurrency.saturating_mul(2))
        .min(MAX_BATCH_SIZE)
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
            hand_out: false,
            schedules: Vec::new(),
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
        let mut names = std::collections::BTreeSet::new();
        for (i, s) in self.schedules.iter().enumerate() {
            let at = format!("schedules[{i}]");
            s.validate(&at)?;
            if !names.insert(s.name.trim()) {
                return Err(Error::config(
                    format!("{at}.name"),
                    "repeats an earlier schedule's name (the name is in every tick's key)",
                ));
            }
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

    /// Tasks that can be out at once: [`WorkerOptions::handler_slots`], or the whole batch
    /// for a [`WorkerOptions::hand_out`] worker.
    pub fn effective_concurrency(&self) -> u32 {
        match self.hand_out {
            true => self.batch(),
            false => self.handler_slots(),
        }
    }

    /// Handlers that can run at once: `min(concurrency, batch())`.
    pub fn handler_slots(&self) -> u32 {
        self.concurrency.min(self.batch())
    }

    /// The connections of the pool [`crate::Worker::connect`] opens: a transaction per
    /// running handler, plus the claim, the renewer and the listener. A hand-out worker's
    /// loop keeps a finished handler's transaction open until the batched completion it waits
    /// for commits it (the Python loop gathers up to `max(16, concurrency)` successes), so it
    /// gets `2 × concurrency + 16` for transactions, within its batch; not the whole batch,
    /// which would let a shutdown's release of hundreds of queued rows open a connection each.
    pub fn pool_size(&self) -> u32 {
        let transactions = match self.hand_out {
            true => self
                .handler_slots()
                .saturating_mul(2)
                .saturating_add(16)
                .min(self.batch()),
            false => self.handler_slots(),
        };
        transactions.saturating_add(3)
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
    fn an_unset_batch_shrinks_from_1024_to_256_then_is_two_rows_per_handler() {
        assert_eq!(WorkerOptions::new("s").batch(), 1024);
        let got: Vec<u32> = [1, 2, 8, 9, 16, 32, 128, 129, 400, 4999, 5000, u32::MAX]
            .iter()
            .map(|&c| with(None, c).batch())
            .collect();
        assert_eq!(
            got,
            [1024, 1024, 1024, 910, 512, 256, 256, 258, 800, 9998, 10_000, 10_000]
        );
        // Never fewer rows than handlers: every slot of a slow queue finds work.
        for c in 1..3000 {
            assert!(with(None, c).batch() >= c, "concurrency {c}");
        }
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
    fn a_hand_out_worker_can_hand_out_its_whole_batch_which_stays_adaptive() {
        let hand_out = |batch_size, concurrency| WorkerOptions {
            hand_out: true,
            ..with(batch_size, concurrency)
        };
        for c in [1, 8, 32, 64, 313, 1000] {
            assert_eq!(
                hand_out(None, c).batch(),
                with(None, c).batch(),
                "one default"
            );
        }
        let o = hand_out(None, 8);
        assert_eq!(
            (o.effective_concurrency(), o.handler_slots()),
            (1024, 8),
            "the batch goes out, 8 handlers run"
        );
        assert_eq!(
            o.pool_size(),
            2 * 8 + 16 + 3,
            "connections for handlers, not the batch"
        );
        assert_eq!(hand_out(Some(4), 4).pool_size(), 4 + 3, "within the batch");
        assert_eq!(with(None, 8).pool_size(), 8 + 3);
        assert_eq!(
            o.completions_beside_batch(),
            1024,
            "an unset batch stays adaptive"
        );
        let o = hand_out(Some(10), 1);
        assert_eq!(
            (o.batch(), o.effective_concurrency(), o.handler_slots()),
            (10, 10, 1)
        );
        assert_eq!(o.completions_beside_batch(), 0);
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

    #[test]
    fn schedules_are_validated_with_their_index() {
        use crate::schedule::{Schedule, Timing};
        let every = Timing::every(Duration::from_secs(1), "s").unwrap();
        let s = |name: &str| Schedule::new(name, every.clone(), "jobs", serde_json::json!({}));
        let mut o = WorkerOptions::new("jobs");
        o.schedules = vec![s("a"), s("b")];
        o.validate().unwrap();
        o.schedules = vec![s("a"), s("a")];
        let e = o.validate().unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].name"),
            "{e:?}"
        );
        o.schedules = vec![
            s("a"),
            Schedule::new("b", every.clone(), " ", serde_json::json!({})),
        ];
        let e = o.validate().unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].source"),
            "{e:?}"
        );
    }
}
