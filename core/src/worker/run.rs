//! [`Worker::run`]: claim, run the handler, finish by its outcome, repeat until stopped.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::{Task, Worker};
use crate::error::{Error, Result};

/// An error a handler returns; it becomes a retry (or dead at the ceiling) with its text.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// What a handler wants done with its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Mark the row processed (inside the handler's transaction, if it opened one).
    Complete,
    /// Retry after `after` (or the policy's backoff when `None`), recording `reason`.
    Retry {
        after: Option<Duration>,
        reason: String,
    },
    /// Dead-letter the row with `reason`.
    Dead { reason: String },
}

impl Worker {
    /// Runs `handler` on every claimed row until `stop` resolves, then shuts down
    /// gracefully ([`Worker::shutdown`]). A handler error or panic becomes a retry with
    /// its text in `last_error` (dead once the attempts are spent). A handler whose lease
    /// is lost is cancelled and nothing is written. Returns an error only when the schema
    /// is missing.
    pub async fn run<H, F>(&self, handler: H, stop: impl Future<Output = ()> + Send) -> Result<()>
    where
        H: Fn(Task) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<Outcome, HandlerError>> + Send + 'static,
    {
        let handler = std::sync::Arc::new(handler);
        let mut running = JoinSet::new();
        tokio::pin!(stop);
        let mut failure = None;
        loop {
            // Reap finished handlers without racing `next()` against them, so one pending
            // poll lives until it yields a task.
            while running.try_join_next().is_some() {}
            tokio::select! {
                _ = &mut stop => break,
                next = self.next() => match next {
                    Ok(Some(task)) => {
                        let h = handler.clone();
                        let span = handle_span(task.message());
                        running.spawn(run_one(task, move |t| h(t)).instrument(span));
                    }
                    Ok(None) => break,
                    Err(e) => { failure = Some(e); break; }
                },
            }
        }
        let shutdown = self.shutdown();
        let drain = async { while running.join_next().await.is_some() {} };
        let (abandoned, _) = tokio::join!(shutdown, drain);
        if abandoned > 0 {
            tracing::info!(
                abandoned,
                "worker stopped; abandoned rows return after their lease"
            );
        }
        failure.map_or(Ok(()), Err)
    }
}

/// The `tracing` span a handled row runs in (the handler and the row's finish): `handle`,
/// named `handle <source>` for OpenTelemetry, with `source`, `message_id`, `attempt`, and the
/// `outcome` recorded at the end (an error status when the handler failed or panicked).
/// With the `otel` feature and the application's `tracing-opentelemetry` layer, its parent is
/// the row's W3C trace context, so the trace of the request that brought the row goes on
/// through the handler and its own spans. Without a subscriber that wants it, it costs
/// nothing.
fn handle_span(m: &crate::message::InboxMessage) -> tracing::Span {
    let span = tracing::info_span!(
        "handle",
        otel.name = %format_args!("handle {}", m.source),
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        source = %m.source,
        message_id = %m.id,
        attempt = m.attempt,
        outcome = tracing::field::Empty,
    );
    #[cfg(feature = "otel")]
    if let Some(sc) = m.trace.as_ref().and_then(crate::otlp::span_context) {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        // Only a span whose subscriber has the OpenTelemetry layer takes a parent; without
        // one there is nothing to attach it to and nothing to report.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
    }
    span
}

/// Records the row's outcome on the current `handle` span (see [`handle_span`]).
fn record_outcome(outcome: &'static str, failed: bool) {
    let span = tracing::Span::current();
    span.record("outcome", outcome);
    if failed {
        span.record("otel.status_code", "ERROR");
    }
}

/// Runs one handler and finishes its task by the outcome.
async fn run_one<H, F>(task: Task, handler: H)
where
    H: FnOnce(Task) -> F,
    F: Future<Output = std::result::Result<Outcome, HandlerError>> + Send + 'static,
{
    let cancel = task.cancelled().clone();
    let work = std::panic::AssertUnwindSafe(handler(task.clone())).catch_unwind();
    let result = tokio::select! {
        r = work => r,
        _ = cancel.cancelled() => {
            // Lease lost or shutdown grace over: drop the handler, write nothing.
            record_outcome("abandoned", true);
            task.abandon().await;
            return;
        }
    };
    match &result {
        Ok(Ok(Outcome::Complete)) => record_outcome("complete", false),
        Ok(Ok(Outcome::Retry { .. })) => record_outcome("retry", false),
        Ok(Ok(Outcome::Dead { .. })) => record_outcome("dead", true),
        Ok(Err(_)) | Err(_) => record_outcome("failed", true),
    }
    let finished = match result {
        Ok(Ok(Outcome::Complete)) => task.complete().await,
        Ok(Ok(Outcome::Retry {
            after: Some(d),
            reason,
        })) => task.retry(d, &reason).await,
        Ok(Ok(Outcome::Retry {
            after: None,
            reason,
        })) => task.fail(&reason).await.map(|_| ()),
        Ok(Ok(Outcome::Dead { reason })) => task.dead(&reason).await,
        Ok(Err(e)) => task.fail(&e.to_string()).await.map(|_| ()),
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            task.fail(&format!("handler panicked: {text}"))
                .await
                .map(|_| ())
        }
    };
    match finished {
        Ok(()) | Err(Error::ClaimLost { .. }) => {}
        Err(e) => {
            tracing::warn!(message_id = %task.message().id, source = %task.message().source, error = %e, "could not finish the row; it will be redelivered after its lease")
        }
    }
}
