//! The pull worker: claim a batch, hand out tasks, renew their leases in the background,
//! and finish each task as complete, retry or dead. [`Worker::next`] and [`Task`] are the
//! poll/complete interface the C ABI and every language wrapper build on; [`Worker::run`]
//! is the Rust convenience that runs a handler over them.

mod completer;
mod metrics;
mod options;
mod owner;
mod prefetch;
mod renew;
mod run;
mod task;
mod typed;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use metrics::{WorkerMetrics, WorkerStats};
pub use options::{
    default_batch, WorkerOptions, MAX_BATCH_SIZE, MAX_DEFAULT_BATCH, MIN_DEFAULT_BATCH,
};
pub use run::{HandlerError, Outcome};
pub use task::{Task, TxGuard};
pub use typed::{typed, PayloadError};

use crate::error::{Error, Result};
use crate::message::{ClaimRef, ClaimedRow};
use crate::store::Store;

/// A snapshot of [`WorkerStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub claimed: u64,
    pub claims: u64,
    pub completed: u64,
    pub retried: u64,
    pub dead: u64,
    pub released: u64,
    pub claims_lost: u64,
    pub claim_errors: u64,
}

/// A pull worker for one source. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

/// A claimed row the worker still answers for: waiting in the buffer or running.
struct Live {
    claim: ClaimRef,
    /// Set when a finish starts, so the renewer does not mistake a completion for a loss.
    finishing: Arc<AtomicBool>,
    /// Fired when the lease is lost or shutdown's grace ran out.
    cancel: CancellationToken,
    /// Set when the application took the completion into its own transaction
    /// ([`Task::completion_statement`]): its `UPDATE` holds the row lock until it commits,
    /// so the renewer leaves the row alone (it would block on the lock, then read the
    /// completed row as a lost claim).
    app_completes: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    buffer: VecDeque<ClaimedRow>,
    live: HashMap<Uuid, Live>,
    in_flight: usize,
    /// Handed-out rows whose handler finished and whose batched completion statement runs
    /// (a subset of `live` and of `in_flight`).
    completing: usize,
}

impl State {
    /// The rows that count against the batch, and the handed-out rows still running. Up to
    /// `uncounted` rows whose completion statement runs count as neither, so the next claim
    /// overlaps that statement (`WorkerOptions::batch_size`: a batch with the adaptive
    /// batch, none with an explicit one). Bounded, so that a completion stuck on a lock
    /// does not let the worker go on claiming: it holds at most twice the batch.
    fn held_and_running(&self, uncounted: usize) -> (usize, usize) {
        let completing = self.completing.min(uncounted);
        (
            self.live.len().saturating_sub(completing),
            self.in_flight.saturating_sub(completing),
        )
    }
}

pub(crate) struct Inner {
    store: Arc<dyn Store>,
    opts: WorkerOptions,
    state: Mutex<State>,
    claim_lock: Arc<tokio::sync::Mutex<()>>,
    permits: Arc<Semaphore>,
    /// New rows may be claimable (LISTEN/NOTIFY), or a task finished and made room.
    wake: Notify,
    /// A task finished (shutdown waits on it).
    done: Notify,
    /// Stop claiming.
    stopping: CancellationToken,
    /// Cancel running handlers (shutdown grace ran out, or the worker was dropped).
    hard_stop: CancellationToken,
    /// This worker's series in `metrics`.
    stats: WorkerStats,
    metrics: WorkerMetrics,
    completer: completer::Completer,
    /// Taken by every statement that writes many of this worker's claimed rows at once: a
    /// lease renewal round and a batched completion. They lock overlapping rows, and
    /// PostgreSQL picks each statement's plan, so not its lock order: run side by side they
    /// deadlocked, the database aborted one after its deadlock timeout, and an aborted
    /// completion left its rows to be handled again after their lease (45 of 30,000 rows
    /// through the Python client, whose successes wait in the client while renewal runs).
    /// Sorting the ids still deadlocked: rows are locked in the order of each statement's
    /// plan, not of its id array. A renewal runs every lease / 3, so a completion rarely
    /// waits for one; the exception is a round begun just before the application took one of
    /// its rows into its own transaction, which waits for that commit and holds completions
    /// up meanwhile (renewal leaves such rows out from the next round on).
    row_writes: Arc<tokio::sync::Mutex<()>>,
    /// Set while claims fail because the database cannot be reached, so the outage is
    /// logged once as a warning when it starts and once when it ends, not at every poll.
    db_down: AtomicBool,
    /// The key of the worker's owner session, recorded on each claim so that others recover
    /// the rows within seconds if this process dies (`owner`); 0 while there is none.
    owner_key: AtomicI64,
    /// The `handle` spans' exporter, when tracing is on (`WorkerOptions::otlp_endpoint`).
    otlp: Option<Arc<crate::otlp::Exporter>>,
    /// Handler and claim times, which size what a claim takes within the batch (`prefetch`).
    pace: Mutex<prefetch::Pace>,
}

impl Worker {
    /// A worker on `store`. Starts the lease renewer and, when enabled, the listener.
    pub async fn new(store: Arc<dyn Store>, opts: WorkerOptions) -> Result<Worker> {
        Worker::new_with_metrics(store, opts, WorkerMetrics::default()).await
    }

    /// A worker that counts into `metrics`, which other workers may share: an application
    /// with several workers registers one [`WorkerMetrics`] (series split by `source`).
    pub async fn new_with_metrics(
        store: Arc<dyn Store>,
        opts: WorkerOptions,
        metrics: WorkerMetrics,
    ) -> Result<Worker> {
        opts.validate()?;
        let otlp = start_otlp(&opts).await?;
        let row_writes = Arc::new(tokio::sync::Mutex::new(()));
        let inner = Arc::new(Inner {
            otlp,
            stats: metrics.for_source(&opts.source),
            metrics,
            permits: Arc::new(Semaphore::new(opts.effective_concurrency() as usize)),
            completer: completer::Completer::spawn(store.clone(), row_writes.clone()),
            row_writes,
            store,
            opts,
            state: Mutex::new(State::default()),
            claim_lock: Arc::new(tokio::sync::Mutex::new(())),
            wake: Notify::new(),
            done: Notify::new(),
            stopping: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            db_down: AtomicBool::new(false),
            owner_key: AtomicI64::new(0),
            pace: Mutex::new(prefetch::Pace::default()),
        });
        // Opened before the first claim, so that every claim can carry the key.
        let session = owner::open(&inner, false).await;
        let has_sessions =
            session.is_some() || inner.store.backend() == crate::store::Backend::Postgres;
        owner::spawn_keeper(Arc::downgrade(&inner), session, has_sessions);
        renew::spawn_renewer(Arc::downgrade(&inner));
        if !inner.opts.schedules.is_empty() {
            // Stops with the worker: `stopping` is cancelled by shutdown and on drop.
            tokio::spawn(crate::schedule::run(
                inner.store.clone(),
                inner.store.backend(),
                inner.opts.schedules.clone(),
                inner.stopping.clone(),
            ));
        }
        if inner.opts.listen {
            renew::spawn_listener(Arc::downgrade(&inner)).await;
        }
        Ok(Worker { inner })
    }

    /// A worker on a new pool sized for its concurrency, on the backend `database_url` names
    /// ([`crate::backend::connect`]: PostgreSQL, or SQL Server with the `sqlserver` feature,
    /// which polls).
    pub async fn connect(database_url: &str, opts: WorkerOptions) -> Result<Worker> {
        opts.validate()?;
        // On PostgreSQL the claim runs on up to two connections of its own besides: claim_pool.
        let mut settings =
            crate::backend::DatabaseSettings::new(database_url).pool_size(opts.pool_size());
        settings.names = opts.names.clone();
        let db = match crate::backend::connect(&settings).await {
            Ok(db) => db,
            Err(e) => {
                // The caller gets the error too; the log line is for operators, who read
                // logs rather than the application's error handling.
                if e.is_unavailable() {
                    tracing::warn!(source = %opts.source, error = %e,
                        "the database is unreachable; the pull worker could not start");
                }
                return Err(e);
            }
        };
        db.check_schema().await?;
        Worker::new(db.store(), opts).await
    }

    pub fn options(&self) -> &WorkerOptions {
        &self.inner.opts
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The worker's metric families, to register into the application's registry.
    pub fn metrics(&self) -> &WorkerMetrics {
        &self.inner.metrics
    }

    /// The worker's metrics in the Prometheus text format (what every binding returns).
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.encode_text()
    }

    /// This worker's counters now (the same values as its metrics' series).
    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.inner.stats;
        let l = |c: &prometheus_client::metrics::counter::Counter| c.get();
        StatsSnapshot {
            claimed: l(&s.claimed),
            claims: l(&s.claims),
            completed: l(&s.completed),
            retried: l(&s.retried),
            dead: l(&s.dead),
            released: l(&s.released),
            claims_lost: l(&s.claims_lost),
            claim_errors: l(&s.claim_errors),
        }
    }

    /// How long `rows` handlers ran in all, reported by a [`WorkerOptions::hand_out`]
    /// worker's language loop, whose handlers run out of the core's sight (what the core sees
    /// from hand-out to finish includes the wait in that loop's queue). It sizes the claims as
    /// the measured handler time does for the Rust worker (`prefetch`); until a report
    /// arrives such a worker holds what a cold worker holds. Ignored by other workers and
    /// for `rows == 0`.
    pub fn handlers_took(&self, rows: usize, total: Duration) {
        if self.inner.opts.hand_out && rows > 0 {
            self.inner
                .pace
                .lock()
                .unwrap()
                .handler_took(total / u32::try_from(rows).unwrap_or(u32::MAX));
        }
    }

    /// True once [`Worker::shutdown`] has begun.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.is_cancelled()
    }

    /// The next claimed row, waiting until one is available. At most
    /// `effective_concurrency` tasks are out at once: a further call waits for one to
    /// finish (a plain completion frees its slot when it starts, while its batched
    /// statement runs; rows held never exceed `batch()` — with the adaptive batch, rows
    /// being completed aside — and stay near what the handlers consume while claims run,
    /// see `prefetch`). `Ok(None)` once the worker
    /// is shutting down. Claim failures (database down) are logged and retried after the
    /// poll interval; only a missing schema is returned.
    pub async fn next(&self) -> Result<Option<Task>> {
        let inner = &self.inner;
        let permit = tokio::select! {
            p = inner.permits.clone().acquire_owned() => p.map_err(|_| Error::Cancelled)?,
            _ = inner.stopping.cancelled() => return Ok(None),
        };
        loop {
            if inner.stopping.is_cancelled() {
                return Ok(None);
            }
            if let Some(task) = self.take_buffered(&permit) {
                return Ok(Some(task.with_permit(permit)));
            }
            let guard = inner.claim_lock.clone().lock_owned().await;
            if let Some(task) = self.take_buffered(&permit) {
                return Ok(Some(task.with_permit(permit)));
            }
            let plan = inner
                .pace
                .lock()
                .unwrap()
                .plan(inner.opts.handler_slots(), inner.opts.batch());
            let (room, running) = {
                let st = inner.state.lock().unwrap();
                let (held, running) =
                    st.held_and_running(inner.opts.completions_beside_batch() as usize);
                (plan.target.saturating_sub(held as u32), running)
            };
            // While handlers run, wait until `min_claim` rows are free (half the target, or
            // less with slow handlers) before claiming: a claim statement per freed slot made
            // claims of one or two rows under load (the peers benchmark saw 5.4 rows per
            // claim at batch 10, concurrency 8). A finishing task wakes us.
            if room == 0 || (room < plan.min_claim && running > 0) {
                drop(guard);
                self.idle_wait(Duration::from_secs(3600)).await;
                continue;
            }
            // The claim runs in its own task so that cancelling `next` (a select, a
            // language's context cancellation) can never strand rows the database already
            // marked processing: the task always files them in the buffer.
            let claimer = inner.clone();
            let claimed = tokio::spawn(async move {
                let _guard = guard;
                claimer.claim_into_buffer(room).await
            });
            let claimed = claimed.await;
            if matches!(claimed, Ok(Ok(_))) && inner.db_down.swap(false, Ordering::Relaxed) {
                tracing::info!(source = %inner.opts.source, "the database is reachable again; pull worker claiming");
            }
            match claimed {
                Ok(Ok(n)) if n > 0 => continue,
                Ok(Ok(_)) => self.idle_wait(inner.opts.poll_interval).await,
                Ok(Err(e @ Error::SchemaMissing { .. })) => return Err(e),
                // A failed claim changed no row: whatever the error, the whole claim is tried
                // again after the poll interval, and no row is failed or dead-lettered for it.
                Ok(Err(e)) => {
                    inner.stats.claim_errors.inc();
                    if !e.is_unavailable() && e.is_transient() {
                        // A lock timeout (SQL Server's claim lock, Msg 51000), a deadlock or a
                        // serialisation failure: expected under contention, retried as is.
                        tracing::info!(source = %inner.opts.source, error = %e, "pull claim failed with a transient error; retrying after the poll interval");
                    } else if !e.is_unavailable() {
                        tracing::warn!(source = %inner.opts.source, error = %e, "pull claim failed; retrying after the poll interval");
                    } else if !inner.db_down.swap(true, Ordering::Relaxed) {
                        // Warn, once per outage: the worker recovers by itself when the
                        // database is back (logged at info), so this is not an error yet.
                        tracing::warn!(source = %inner.opts.source, error = %e,
                            "the database is unreachable; pull worker retrying every poll interval until it is back");
                    } else {
                        tracing::debug!(source = %inner.opts.source, error = %e, "the database is still unreachable");
                    }
                    self.idle_wait(inner.opts.poll_interval).await;
                }
                Err(join) => {
                    tracing::error!(error = %join, "pull claim task failed");
                    self.idle_wait(inner.opts.poll_interval).await;
                }
            }
        }
    }

    /// Up to `max` tasks for one crossing of a language boundary: waits like [`Worker::next`]
    /// for the first, then adds whatever is already claimed and waiting, as long as free
    /// concurrency slots allow, without waiting again (and without a claim statement of its
    /// own). Each task is an ordinary [`Task`]: its own permit, lease, fence and finish, so a
    /// lost claim or a failure touches only that task. An empty vector means the worker is
    /// stopping. `max` must be at least 1.
    pub async fn next_batch(&self, max: usize) -> Result<Vec<Task>> {
        if max == 0 {
            return Err(Error::InvalidInput(
                "next_batch max must be at least 1".into(),
            ));
        }
        let Some(first) = self.next().await? else {
            return Ok(Vec::new());
        };
        let mut tasks = vec![first];
        while tasks.len() < max && !self.inner.stopping.is_cancelled() {
            let Ok(permit) = self.inner.permits.clone().try_acquire_owned() else {
                break;
            };
            match self.take_buffered(&permit) {
                Some(task) => tasks.push(task.with_permit(permit)),
                None => break,
            }
        }
        Ok(tasks)
    }

    fn take_buffered(&self, _permit: &tokio::sync::OwnedSemaphorePermit) -> Option<Task> {
        let mut st = self.inner.state.lock().unwrap();
        let row = st.buffer.pop_front()?;
        let live = st.live.get(&row.claim.id)?;
        let (finishing, cancel, app_completes) = (
            live.finishing.clone(),
            live.cancel.clone(),
            live.app_completes.clone(),
        );
        st.in_flight += 1;
        Some(Task::new(
            self.inner.clone(),
            row,
            finishing,
            cancel,
            app_completes,
        ))
    }

    async fn idle_wait(&self, d: Duration) {
        let inner = &self.inner;
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = tokio::time::sleep(d) => {}
            _ = inner.stopping.cancelled() => {}
        }
    }

    /// Tasks handed out and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.inner.state.lock().unwrap().in_flight
    }

    /// Graceful shutdown: stop claiming, release claimed rows that never started (back to
    /// pending at once, no attempt spent), wait up to `shutdown_grace` for running tasks,
    /// then cancel the rest. A cancelled task is abandoned: its lease simply expires and
    /// another worker redelivers it. Returns the number of tasks abandoned.
    pub async fn shutdown(&self) -> usize {
        let inner = &self.inner;
        inner.stopping.cancel();
        inner.release_buffered().await;
        let deadline = tokio::time::Instant::now() + inner.opts.shutdown_grace;
        loop {
            let done = inner.done.notified();
            if self.in_flight() == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                break;
            }
        }
        let left = self.in_flight();
        tracing::warn!(source = %inner.opts.source, tasks = left, "shutdown grace ran out; cancelling running handlers (their rows will be redelivered after the lease)");
        inner.hard_stop.cancel();
        left
    }
}

impl Inner {
    /// Claims up to `room` rows into the buffer; returns how many. Rows that arrive after
    /// shutdown began are released at once.
    async fn claim_into_buffer(&self, room: u32) -> Result<usize> {
        let started = Instant::now();
        let rows = self
            .store
            .claim_pull_owned(&self.opts.source, room, self.opts.lease, self.owner())
            .await?;
        let took = started.elapsed();
        self.stats.claim_duration.observe(took.as_secs_f64());
        self.pace.lock().unwrap().claim_took(took);
        let n = rows.len();
        if n > 0 {
            self.stats.claimed.inc_by(n as u64);
            self.stats.claims.inc();
            let mut st = self.state.lock().unwrap();
            for row in rows {
                st.live.insert(
                    row.claim.id,
                    Live {
                        claim: row.claim,
                        finishing: Arc::new(AtomicBool::new(false)),
                        cancel: self.hard_stop.child_token(),
                        app_completes: Arc::new(AtomicBool::new(false)),
                    },
                );
                st.buffer.push_back(row);
            }
        }
        if self.stopping.is_cancelled() {
            self.release_buffered().await;
        }
        Ok(n)
    }

    /// The owner key claims record now, if the worker holds an owner session.
    fn owner(&self) -> Option<i64> {
        Some(self.owner_key.load(Ordering::SeqCst)).filter(|k| *k != 0)
    }

    /// Hands every buffered (claimed, never started) row back to pending, spending no attempt.
    async fn release_buffered(&self) {
        let rows: Vec<ClaimedRow> = {
            let mut st = self.state.lock().unwrap();
            let rows: Vec<ClaimedRow> = st.buffer.drain(..).collect();
            for r in &rows {
                st.live.remove(&r.claim.id);
            }
            rows
        };
        for row in rows {
            match self.store.release_pull(&row.claim).await {
                Ok(true) => {
                    self.stats.released.inc();
                }
                Ok(false) => {
                    tracing::warn!(message_id = %row.claim.id, source = %self.opts.source, "release found the lease already lost")
                }
                Err(e) => {
                    tracing::warn!(message_id = %row.claim.id, source = %self.opts.source, error = %e, "release failed; the lease will expire")
                }
            }
        }
    }

    /// Removes a task from the books and wakes whoever waits for room.
    fn forget(&self, claim: ClaimRef, was_handed_out: bool) {
        let mut st = self.state.lock().unwrap();
        // Only this claim's entry: the same row may have been claimed again since.
        if st
            .live
            .get(&claim.id)
            .is_some_and(|l| l.claim.token == claim.token)
        {
            st.live.remove(&claim.id);
        }
        if was_handed_out {
            st.in_flight = st.in_flight.saturating_sub(1);
        }
        drop(st);
        self.wake.notify_one();
        self.done.notify_waiters();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stopping.cancel();
        self.hard_stop.cancel();
        // The last spans are sent from a thread of their own: this may run on a runtime's
        // worker, where the blocking flush must not.
        if let Some(e) = self.otlp.take() {
            std::thread::spawn(move || e.shutdown());
        }
    }
}

/// The worker's OTLP exporter: `opts.otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (a bad value is an error naming the variable), else none. `service.name` is
/// `OTEL_SERVICE_NAME`, else `queuebox-worker`.
async fn start_otlp(opts: &WorkerOptions) -> Result<Option<Arc<crate::otlp::Exporter>>> {
    use crate::otlp::{check_endpoint, Exporter, ENDPOINT_ENV};
    let (endpoint, key) = match &opts.otlp_endpoint {
        Some(e) => (e.clone(), "otlpEndpoint"),
        None => match std::env::var(ENDPOINT_ENV) {
            Ok(e) if !e.trim().is_empty() => (e.trim().to_string(), ENDPOINT_ENV),
            _ => return Ok(None),
        },
    };
    check_endpoint(&endpoint).map_err(|why| Error::config(key, why))?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "queuebox-worker".into());
    // Off the runtime's workers: the exporter builds a blocking HTTP client.
    let started = tokio::task::spawn_blocking(move || Exporter::start(&endpoint, &service))
        .await
        .map_err(|e| Error::config(key, e.to_string()))?;
    started
        .map(|e| Some(Arc::new(e)))
        .map_err(|why| Error::config(key, why))
}
