//! One claimed row in the hands of a handler: its message, its cancellation, a lazily
//! opened transaction for business writes, and the four ways to finish it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{MutexGuard, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::Inner;

/// How often [`Task::complete`] tries its batched statement when it fails with a transient
/// error, and the pause before the second try (doubling after each): 50 + 100 + 200 + 400 ms.
const COMPLETE_TRIES: u32 = 5;
const COMPLETE_RETRY_PAUSE: Duration = Duration::from_millis(50);
use crate::backoff::Decision;
use crate::error::{Error, Result};
use crate::headers::redact_error;
use crate::message::{ClaimRef, ClaimedRow, InboxMessage};
use crate::metrics::{self, Component};
use crate::otlp::{KeyValue, Span, SpanKind};
use crate::store::{JsonRow, SqlValue, StoreTx};

/// A claimed pull row. Clones share one claim; the first finish wins and later ones
/// return [`Error::AlreadyFinished`]. Dropping every clone unfinished abandons the row:
/// renewal stops and another worker takes it after the lease.
///
/// A cancelled task (lease lost, shutdown grace over) may only be abandoned: every other
/// finish abandons it and returns [`Error::Cancelled`].
#[derive(Clone)]
pub struct Task {
    inner: Arc<TaskInner>,
}

struct TaskInner {
    worker: Arc<Inner>,
    message: InboxMessage,
    claim: ClaimRef,
    /// The row's own dead-letter ceiling (an enqueued row's `max_attempts`), if any.
    max_attempts: Option<u32>,
    finishing: Arc<AtomicBool>,
    cancel: CancellationToken,
    tx: tokio::sync::Mutex<Option<Box<dyn StoreTx>>>,
    /// The concurrency slot; freed when the handler is done (see [`Task::complete`]).
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// Handed out by `next` (counted in `in_flight` until the task settles).
    handed_out: AtomicBool,
    /// The application completes the row in its own transaction (shared with the renewer).
    app_completes: Arc<AtomicBool>,
    /// The application reported its completion fenced out ([`Task::claim_lost`]).
    lost: AtomicBool,
    /// When the row was handed out: the handler's duration ends at the first finish.
    started: Instant,
    /// The `handle` span (tracing on), ended when the task settles or is given up.
    span: Mutex<Option<Span>>,
}

impl Task {
    pub(super) fn new(
        worker: Arc<Inner>,
        row: ClaimedRow,
        finishing: Arc<AtomicBool>,
        cancel: CancellationToken,
        app_completes: Arc<AtomicBool>,
    ) -> Task {
        let mut message = row.message;
        let span = Span::start(
            worker.otlp.as_deref().map(|e| e.tracer()),
            "handle",
            SpanKind::Consumer,
            || message.trace.clone(),
            None,
            || {
                vec![
                    KeyValue::new("source", message.source.clone()),
                    KeyValue::new("messageId", message.id.to_string()),
                    KeyValue::new("attempt", i64::from(message.attempt) + 1),
                ]
            },
        );
        // The handler continues the trace from the handle span, not from the row.
        if let Some(own) = span.context() {
            message.trace = Some(own);
        }
        Task {
            inner: Arc::new(TaskInner {
                worker,
                message,
                claim: row.claim,
                max_attempts: row.max_attempts,
                finishing,
                cancel,
                tx: tokio::sync::Mutex::new(None),
                permit: Mutex::new(None),
                handed_out: AtomicBool::new(false),
                app_completes,
                lost: AtomicBool::new(false),
                started: Instant::now(),
                span: Mutex::new(Some(span)),
            }),
        }
    }

    pub(super) fn with_permit(self, permit: OwnedSemaphorePermit) -> Task {
        *self.inner.permit.lock().unwrap() = Some(permit);
        self.inner.handed_out.store(true, Ordering::SeqCst);
        self
    }

    /// The claimed message.
    pub fn message(&self) -> &InboxMessage {
        &self.inner.message
    }

    /// Fires when the lease is lost (the handler must stop: its completion would fail) or
    /// when shutdown's grace runs out.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// True once a finish (or an abandon) has begun.
    pub fn is_finished(&self) -> bool {
        self.inner.finishing.load(Ordering::SeqCst)
    }

    /// The handler's transaction, opened on first use. Business writes made in it commit
    /// with [`Task::complete`] or roll back with any other finish. Downcast with
    /// `guard.as_any_mut().downcast_mut::<PgStoreTx>()` for the native sqlx API.
    pub async fn tx(&self) -> Result<TxGuard<'_>> {
        self.check_open()?;
        if self.completes_in_app() {
            return Err(Error::InvalidInput(
                "this task is completed in the application's transaction (completion_statement was asked for); run business writes there, not in the task's own transaction".into(),
            ));
        }
        let mut guard = self.inner.tx.lock().await;
        if guard.is_none() {
            *guard = Some(self.inner.worker.store.begin().await?);
        }
        Ok(TxGuard { guard })
    }

    /// Runs a statement in the handler's transaction; returns the affected row count.
    // Boxed futures with explicit `Send` bounds: a plain `async fn` here trips the
    // compiler's higher-ranked `Send` check when a handler future is spawned.
    pub fn execute<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [SqlValue],
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            let mut tx = self.tx().await?;
            tx.execute(sql, params).await
        })
    }

    /// Runs a query in the handler's transaction; rows come back as JSON objects.
    pub fn query<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [SqlValue],
    ) -> BoxFuture<'a, Result<Vec<JsonRow>>> {
        Box::pin(async move {
            let mut tx = self.tx().await?;
            tx.query(sql, params).await
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.finishing.load(Ordering::SeqCst) {
            return Err(Error::AlreadyFinished {
                id: self.inner.claim.id,
            });
        }
        if self.inner.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    /// The fenced completion to run inside the application's own transaction, in the
    /// application driver's parameter style ([`crate::app_tx`]). From this call on the
    /// application owns the completion: the worker stops renewing the lease (the
    /// application's `UPDATE` holds the row lock until it commits) and [`Task::complete`]
    /// writes nothing, since the application's commit decides. Zero rows affected means the
    /// claim was lost: call [`Task::claim_lost`] and raise its error in the application's
    /// transaction. A failed handler is still retried or dead-lettered by
    /// [`Task::fail`] (fenced, on the worker's own connection, after the application's
    /// rollback releases the row). Refused once the task opened its own transaction
    /// ([`Task::tx`]): one task, one transaction.
    pub fn completion_statement(
        &self,
        placeholder: crate::app_tx::Placeholder,
    ) -> Result<crate::app_tx::Statement> {
        self.check_open()?;
        let own_tx_open = match self.inner.tx.try_lock() {
            Ok(guard) => guard.is_some(),
            Err(_) => true,
        };
        if own_tx_open {
            return Err(Error::InvalidInput(
                "this task already opened its own transaction (execute/query/tx); finish it with complete, or make every write in the application's transaction".into(),
            ));
        }
        self.inner.app_completes.store(true, Ordering::SeqCst);
        Ok(crate::app_tx::completion_statement_named(
            self.inner.worker.store.backend(),
            &self.inner.worker.store.names(),
            self.inner.claim.id,
            self.inner.claim.token,
            placeholder,
        ))
    }

    /// True once [`Task::completion_statement`] handed the completion to the application.
    pub fn completes_in_app(&self) -> bool {
        self.inner.app_completes.load(Ordering::SeqCst)
    }

    /// The application's completion statement affected no row: the lease expired and the
    /// row was (or will be) claimed again. Counts the loss once (worker stats and
    /// `queuebox_claims_lost_total{component="pull"}`), logs it, settles the task, and
    /// returns the [`Error::ClaimLost`] the wrapper raises inside the application's
    /// transaction so that its business write rolls back. Later finishes return it too.
    pub fn claim_lost(&self) -> Error {
        if self.inner.finishing.swap(true, Ordering::SeqCst) {
            // Already settled (a second report, or a finish raced it): count nothing more.
            self.inner.lost.store(true, Ordering::SeqCst);
            return Error::ClaimLost {
                id: self.inner.claim.id,
                operation: "complete",
            };
        }
        self.inner.lost.store(true, Ordering::SeqCst);
        self.handler_done();
        match self.settle(Ok(false), "complete", None, |s| &s.completed) {
            Err(e) => e,
            Ok(()) => unreachable!("a settle of Ok(false) is a lost claim"),
        }
    }

    /// Claims the right to finish; false when another finish (or the renewer) came first.
    fn begin_finish(&self) -> Result<()> {
        if self.inner.finishing.swap(true, Ordering::SeqCst) {
            if self.inner.lost.load(Ordering::SeqCst) {
                // The application reported its completion fenced out: every later finish
                // (the handler's error path) answers the same, without counting again.
                return Err(Error::ClaimLost {
                    id: self.inner.claim.id,
                    operation: "complete",
                });
            }
            return Err(Error::AlreadyFinished {
                id: self.inner.claim.id,
            });
        }
        self.handler_done();
        Ok(())
    }

    /// Observes the handler's duration, at the task's first finish (any kind).
    fn handler_done(&self) {
        let w = &self.inner.worker;
        let took = self.inner.started.elapsed();
        w.stats.handler_duration.observe(took.as_secs_f64());
        // A hand-out worker's handlers run in a language's loop, which reports their times
        // (`Worker::handlers_took`): this one includes the wait in that loop's queue.
        if !w.opts.hand_out {
            w.pace.lock().unwrap().handler_took(took);
        }
    }

    /// Claims the right to finish with a write (complete, retry, dead, release). A
    /// cancelled task may only be abandoned: after a lost lease the row belongs to someone
    /// else, and after shutdown's grace no row may be completed. So a cancelled task is
    /// abandoned here (business writes roll back, nothing is written) and the finish
    /// returns [`Error::Cancelled`]. Every binding inherits this rule from here.
    async fn begin_write(&self) -> Result<()> {
        self.begin_finish()?;
        if self.inner.cancel.is_cancelled() {
            self.give_up().await;
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    fn lost(&self, operation: &'static str) -> Error {
        let w = &self.inner.worker;
        w.stats.claims_lost.inc();
        metrics::claim_lost(Component::Pull);
        tracing::warn!(message_id = %self.inner.claim.id, source = %self.inner.message.source, operation,
            "claim lost: the lease expired or another worker took the row; nothing was changed");
        Error::ClaimLost {
            id: self.inner.claim.id,
            operation,
        }
    }

    async fn take_tx(&self) -> Option<Box<dyn StoreTx>> {
        self.inner.tx.lock().await.take()
    }

    /// Marks the row processed. With an open transaction the mark runs inside it and
    /// commits with the business writes; if the fence matches no row everything rolls
    /// back and [`Error::ClaimLost`] is returned. After [`Task::completion_statement`] it
    /// writes nothing: the application's transaction completed the row.
    pub async fn complete(&self) -> Result<()> {
        self.begin_write().await?;
        if self.completes_in_app() {
            // The application's transaction ran the fenced completion; its commit decides.
            // Writing here would complete a row the application may still roll back.
            return self.settle(Ok(true), "complete", None, |s| &s.completed);
        }
        let claim = self.inner.claim;
        let w = &self.inner.worker;
        let r = match self.take_tx().await {
            Some(mut tx) => match tx.complete_pull(&claim).await {
                Ok(true) => tx.commit().await.map(|_| true),
                Ok(false) => {
                    let _ = tx.rollback().await;
                    Ok(false)
                }
                Err(e) => {
                    let _ = tx.rollback().await;
                    Err(e)
                }
            },
            None => {
                // The handler is done; only the batched completion statement is left. Free
                // the concurrency slot now so the next buffered row starts while it runs.
                // The row stays on the books (shutdown waits for it; an explicit batch
                // still counts it), marked completing so that with the adaptive batch the
                // next claim need not wait for this statement.
                drop(self.inner.permit.lock().unwrap().take());
                let _completing = Completing::start(w);
                self.complete_batched(claim).await
            }
        };
        self.settle(r, "complete", None, |s| &s.completed)
    }

    /// The batched completion statement, tried again while it fails with a transient error
    /// ([`Error::is_transient`]: a deadlock, a serialisation failure, a lock timeout such as
    /// SQL Server's claim-lock Msg 51000, a dropped connection) and the claim is live: up to
    /// [`COMPLETE_TRIES`] tries with a doubling pause, so such an error neither sends the row
    /// back to be handled again after its lease nor, ever, fails or dead-letters it. A retry
    /// after a completion that did commit (its answer lost with the connection) finds the
    /// fence gone and reports the claim lost; nothing changes either way. (A completion
    /// inside the handler's own transaction is not retried: its business writes rolled back
    /// with it, so the row comes back after its lease to be handled again.)
    async fn complete_batched(&self, claim: ClaimRef) -> Result<bool> {
        let completer = &self.inner.worker.completer;
        let mut pause = COMPLETE_RETRY_PAUSE;
        for _ in 1..COMPLETE_TRIES {
            match completer.complete(claim).await {
                Err(e) if e.is_transient() && !self.inner.cancel.is_cancelled() => {
                    tracing::debug!(message_id = %claim.id, source = %self.inner.message.source, error = %e,
                        "completion failed with a transient error; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = self.inner.cancel.cancelled() => {}
                    }
                    pause *= 2;
                }
                r => return r,
            }
        }
        completer.complete(claim).await
    }

    /// Completes several tasks at once, as if [`Task::complete`] were called on each at the
    /// same time: the plain completions share one batched statement, a task with its own
    /// transaction commits it, and each task keeps its own fence. The results come back in
    /// the order of `tasks`; a lost claim or a failure is reported for that task only.
    pub async fn complete_all(tasks: &[Task]) -> Vec<Result<()>> {
        futures::future::join_all(tasks.iter().map(|t| t.complete())).await
    }

    /// Applies the retry policy to a failed handler: retry after the backoff, or dead once
    /// the attempts are spent. Business writes are rolled back.
    /// A row enqueued with its own `max_attempts` is judged by that ceiling instead of the
    /// policy's (the backoff stays the policy's).
    pub async fn fail(&self, error: &str) -> Result<Decision> {
        let policy = &self.inner.worker.opts.retry;
        let attempt = self.inner.message.attempt.max(0) as u32;
        let decision = match self.inner.max_attempts {
            Some(max_attempts) => crate::backoff::RetryPolicy {
                max_attempts,
                ..*policy
            }
            .decide_now(attempt),
            None => policy.decide_now(attempt),
        };
        match decision {
            Decision::Retry(d) => self.retry(d, error).await?,
            Decision::Dead => self.dead(error).await?,
        }
        Ok(decision)
    }

    /// Back to pending after `delay` with `attempt + 1`; business writes roll back.
    pub async fn retry(&self, delay: Duration, error: &str) -> Result<()> {
        self.begin_write().await?;
        if let Some(tx) = self.take_tx().await {
            let _ = tx.rollback().await;
        }
        let text = redact_error(error, &[]);
        let r = self
            .inner
            .worker
            .store
            .retry_pull(&self.inner.claim, delay, &text)
            .await;
        self.settle(r, "retry", Some(&text), |s| &s.retried)?;
        let m = &self.inner.message;
        // A warning, once per failed attempt: a failing handler must show under every
        // language's default logging (Python's and .NET's hide info).
        tracing::warn!(message_id = %m.id, source = %m.source, topic = m.event_type.as_deref().unwrap_or(""),
            attempt = m.attempt + 1, delay_ms = delay.as_millis() as u64, error = %text,
            "handler failed; retry scheduled");
        Ok(())
    }

    /// To dead with `reason`; business writes roll back.
    pub async fn dead(&self, reason: &str) -> Result<()> {
        self.begin_write().await?;
        if let Some(tx) = self.take_tx().await {
            let _ = tx.rollback().await;
        }
        let text = redact_error(reason, &[]);
        let r = self
            .inner
            .worker
            .store
            .dead_pull(&self.inner.claim, &text)
            .await;
        self.settle(r, "dead", Some(&text), |s| &s.dead)?;
        let m = &self.inner.message;
        tracing::warn!(message_id = %m.id, source = %m.source, topic = m.event_type.as_deref().unwrap_or(""),
            attempt = m.attempt + 1, reason = %text, "message dead-lettered; it stays dead until replayed");
        Ok(())
    }

    /// Back to pending at once without spending an attempt (the handler never ran, or the
    /// application wants the row redelivered now).
    pub async fn release(&self) -> Result<()> {
        self.begin_write().await?;
        if let Some(tx) = self.take_tx().await {
            let _ = tx.rollback().await;
        }
        let r = self
            .inner
            .worker
            .store
            .release_pull(&self.inner.claim)
            .await;
        self.settle(r, "release", None, |s| &s.released)
    }

    /// Gives the row up without writing: renewal stops and the lease expires. Business
    /// writes roll back.
    pub async fn abandon(&self) {
        if self.begin_finish().is_ok() {
            self.give_up().await;
        }
    }

    /// The body of an abandon, once the right to finish is held.
    async fn give_up(&self) {
        if let Some(tx) = self.take_tx().await {
            let _ = tx.rollback().await;
        }
        self.inner.end_span("abandoned", None);
        self.inner.off_the_books();
    }

    /// Takes the finished row off the books and counts it; `handler_error` is why the
    /// handler failed (retry, dead), for the `handle` span.
    fn settle(
        &self,
        r: Result<bool>,
        operation: &'static str,
        handler_error: Option<&str>,
        counter: fn(&super::WorkerStats) -> &prometheus_client::metrics::counter::Counter,
    ) -> Result<()> {
        let w = &self.inner.worker;
        self.inner.off_the_books();
        match &r {
            Ok(true) => self.inner.end_span(operation, handler_error),
            Ok(false) => self.inner.end_span("claim_lost", handler_error),
            Err(e) => self.inner.end_span("finish_failed", Some(&e.to_string())),
        }
        match r {
            Ok(true) => {
                counter(&w.stats).inc();
                Ok(())
            }
            Ok(false) => Err(self.lost(operation)),
            Err(e) => {
                tracing::warn!(message_id = %self.inner.claim.id, source = %self.inner.message.source, operation, error = %e, "finishing the row failed; its lease will expire and it will be redelivered");
                Err(e)
            }
        }
    }
}

/// Counts a row as completing while its batched statement runs, and wakes a claim that
/// may now have room; dropping it (the statement ended, or the caller stopped waiting)
/// takes the count back.
struct Completing<'a>(&'a Inner);

impl<'a> Completing<'a> {
    fn start(w: &'a Inner) -> Self {
        w.state.lock().unwrap().completing += 1;
        w.wake.notify_one();
        Completing(w)
    }
}

impl Drop for Completing<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap();
        st.completing = st.completing.saturating_sub(1);
    }
}

impl TaskInner {
    /// Ends the `handle` span with `outcome`, once (later calls find it gone).
    fn end_span(&self, outcome: &'static str, error: Option<&str>) {
        if let Some(span) = self.span.lock().unwrap().take() {
            span.end(outcome, error);
        }
    }

    /// Frees the slot (if still held) and takes the claim off the worker's books, once:
    /// a second call finds nothing to free and nothing handed out.
    fn off_the_books(&self) {
        drop(self.permit.lock().unwrap().take());
        self.worker
            .forget(self.claim, self.handed_out.swap(false, Ordering::SeqCst));
    }
}

impl Drop for TaskInner {
    fn drop(&mut self) {
        // Unfinished, or a finish whose future was dropped half-way: give the row up (the
        // lease expires) and free the slot. A settled task has no permit left and its
        // claim is gone from the books, so this is a no-op for it.
        self.finishing.store(true, Ordering::SeqCst);
        self.end_span("abandoned", None);
        self.off_the_books();
        // Dropping an open sqlx transaction rolls it back when the connection returns.
        drop(self.tx.get_mut().take());
    }
}

/// The handler's open transaction, locked for the caller's use.
pub struct TxGuard<'a> {
    guard: MutexGuard<'a, Option<Box<dyn StoreTx>>>,
}

impl std::ops::Deref for TxGuard<'_> {
    type Target = dyn StoreTx;
    fn deref(&self) -> &Self::Target {
        self.guard.as_deref().expect("opened by Task::tx")
    }
}

impl std::ops::DerefMut for TxGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.guard.as_deref_mut().expect("opened by Task::tx")
    }
}
