//! The inbox relay: claims push rows (never pull rows), renders the source's topic
//! template, and in one fenced transaction writes the outbox row with the relay headers
//! and marks the inbox row processed. [`outbox_row`] is the one inbox-row → outbox-row
//! mapping, shared with the admin replay (`POST /admin/inbox/{id}/replay`).
//!
//! A batch is forwarded in one transaction (`RelayStore::forward_push_many`: one fenced mark
//! of every claim, one insert of the outbox rows in claim order) right after its claim, so
//! no row waits long enough to need its lease renewed; a claim lost meanwhile is left out by
//! the fence and counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_config::{render_topic, Config};
use queuebox_core::headers::{relay_headers, X_CORRELATION_ID};
use queuebox_core::metrics::{claim_lost, Component};
use queuebox_core::store::relay::{Forwarded, NewOutboxRow};
use queuebox_core::{ClaimedRow, InboxMessage};
use tokio_util::sync::CancellationToken;

use crate::batch_size::BatchSize;
use crate::liveness::Heartbeat;
use crate::relay_loop::{self, Pace, Relay};
use crate::state::AppState;
use queuebox_core::otlp::{KeyValue, SpanKind};
use queuebox_core::trace::TraceContext;

pub async fn run(st: AppState, stop: CancellationToken, hb: Arc<Heartbeat>) {
    let rc = &st.cfg.inbox.relay;
    let pace = Pace {
        batch: BatchSize::fixed(rc.batch_size),
        lease: Duration::from_millis(rc.claim_timeout_ms),
        poll_interval: Duration::from_millis(rc.poll_interval_ms),
        gauge_interval: Duration::from_millis(rc.pending_gauge_interval_ms),
    };
    relay_loop::run(&InboxRelay(st), pace, &stop, &hb).await;
}

const PUSH_CLAIM_FAILED: &str = "push claim failed; retrying";

/// The relay's state.
struct InboxRelay(AppState);

impl Relay for InboxRelay {
    type Row = ClaimedRow;

    async fn reclaim(&self) {
        match self.0.store.reclaim_push().await {
            Ok(n) if n > 0 => {
                self.0
                    .metrics
                    .add("queuebox_inbox_messages_reclaimed_total", &[], n);
                tracing::info!(rows = n, "reclaimed push rows whose lease expired");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "push reclaim failed"),
        }
    }

    async fn update_gauges(&self) {
        // Push rows only in `queuebox_inbox_oldest_pending_age_seconds`: pull rows wait for application workers,
        // not for this relay, and have their own family.
        if let Ok(b) = self.0.store.inbox_backlog().await {
            self.0.metrics.set(
                "queuebox_inbox_oldest_pending_age_seconds",
                &[],
                b.push_oldest_pending_age,
            );
            self.0.metrics.set(
                "queuebox_inbox_pull_oldest_pending_age_seconds",
                &[],
                b.pull_oldest_pending_age,
            );
        }
    }

    async fn claim(&self, n: u32, lease: Duration) -> queuebox_core::Result<Vec<ClaimedRow>> {
        let t0 = std::time::Instant::now();
        let claimed = self
            .0
            .store
            .claim_push_owned(n, lease, self.0.owner.key())
            .await;
        self.0
            .metrics
            .observe("queuebox_inbox_claim_duration_seconds", &[], t0.elapsed());
        claimed.inspect_err(|e| {
            self.0.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
            // Every poll interval during an outage: the first in full, then a count per 10 s.
            if crate::warn_limit::admit(&self.0.metrics, "push_claim_failed", PUSH_CLAIM_FAILED) {
                tracing::warn!(error = %e, "{PUSH_CLAIM_FAILED}");
            }
        })
    }

    async fn process(&self, batch: Vec<ClaimedRow>, _claimed: Instant, hb: &Heartbeat) {
        hb.beat(Duration::ZERO);
        forward(&self.0, batch).await;
    }
}

/// Why an inbox row has no outbox row.
#[derive(Debug, thiserror::Error)]
pub enum Unroutable {
    /// The row's source was removed from the configuration.
    #[error("source '{0}' is not configured")]
    SourceNotConfigured(String),
    /// The source's topic template (e.g. `{eventType}` on a row without one) rendered empty.
    #[error("the source's topic template renders empty for this row")]
    EmptyTopic,
}

/// The outbox row inbox row `m` becomes, for the relay's forward and the admin replay alike:
/// the source's topic template rendered, key = aggregate id, the payload, the four relay
/// headers over the stored ones (the correlation id generated when the row has none), the
/// row's W3C trace context as `traceparent` / `tracestate` (only from its columns), and
/// `inbox.relay.maxAttempts` falling back to `outbox.maxAttempts`.
pub fn outbox_row(cfg: &Config, m: &InboxMessage) -> Result<NewOutboxRow, Unroutable> {
    let source = cfg
        .sources
        .get(&m.source)
        .ok_or_else(|| Unroutable::SourceNotConfigured(m.source.clone()))?;
    let topic = render_topic(source.topic_template(), &m.source, m.event_type.as_deref());
    if topic.is_empty() {
        return Err(Unroutable::EmptyTopic);
    }
    let correlation = m
        .correlation_id
        .clone()
        .unwrap_or_else(|| queuebox_core::headers::correlation_id(None));
    let mut headers = relay_headers(
        &m.headers,
        m.id,
        &m.source,
        &m.idempotency_key,
        &correlation,
    );
    // The inbox row's own trace context, never a header of that name the row may hold.
    queuebox_core::trace::stamp(&mut headers, m.trace.as_ref());
    Ok(NewOutboxRow {
        topic,
        key: m.aggregate_id.clone(),
        payload: m.payload.clone(),
        headers,
        max_attempts: cfg
            .inbox
            .relay
            .max_attempts
            .unwrap_or(cfg.outbox.max_attempts),
    })
}

/// Forwards a batch of push rows in one `forward_push_many`, each row in its own
/// `relay.forward` span (tracing on), whose context its outbox row carries in place of the
/// inbox row's. A row that cannot be routed is reported alone and left out.
async fn forward(st: &AppState, rows: Vec<ClaimedRow>) {
    let (mut sent, mut pairs) = (Vec::new(), Vec::new());
    for row in rows {
        let m = &row.message;
        let span = crate::telemetry::span(
            "relay.forward",
            SpanKind::Internal,
            || m.trace.clone(),
            None,
            || {
                vec![
                    KeyValue::new("source", m.source.clone()),
                    KeyValue::new("messageId", m.id.to_string()),
                ]
            },
        );
        match route(st, &row, span.context()).await {
            Ok(out) => {
                pairs.push((row.claim, out));
                sent.push((row, span));
            }
            Err((outcome, error)) => span.end(outcome, error.as_deref()),
        }
    }
    if pairs.is_empty() {
        return;
    }
    match st.store.forward_push_many(&pairs).await {
        Ok(outcomes) => {
            for (((row, span), (_, out)), f) in sent.into_iter().zip(&pairs).zip(outcomes) {
                let (outcome, error) = forwarded(st, &row, out, f);
                span.end(outcome, error.as_deref());
            }
        }
        Err(e) => {
            tracing::warn!(rows = sent.len(), error = %e, "forward failed; the batch's rows return to pending after their lease");
            for (_, span) in sent {
                st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
                span.end("failed", Some(&e.to_string()));
            }
        }
    }
}

/// The outbox row of a claimed push row, or the span's outcome and error when it has none:
/// a source no longer configured leaves the row for reclaim; an empty topic makes it dead.
async fn route(
    st: &AppState,
    row: &ClaimedRow,
    trace: Option<TraceContext>,
) -> Result<NewOutboxRow, (&'static str, Option<String>)> {
    let m = &row.message;
    let mut out = match outbox_row(&st.cfg, m) {
        Ok(out) => out,
        Err(Unroutable::SourceNotConfigured(_)) => {
            // A source removed from the configuration: leave the row for reclaim rather than guess.
            tracing::error!(source = %m.source, inbox_id = %m.id, "push row of a source that is not configured; it stays for reclaim");
            st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
            return Err(("failed", Some("the row's source is not configured".into())));
        }
        Err(Unroutable::EmptyTopic) => {
            tracing::error!(source = %m.source, inbox_id = %m.id, "the topic template rendered empty; set the source's topic or send an event type. The row is dead.");
            st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
            let ok = st
                .store
                .dead_push(&row.claim, "the topic template rendered an empty topic")
                .await
                .unwrap_or(false);
            if !ok {
                claim_lost(Component::Inbox);
            }
            return Err((
                "dead",
                Some("the topic template rendered an empty topic".into()),
            ));
        }
    };
    if trace.is_some() {
        queuebox_core::trace::stamp(&mut out.headers, trace.as_ref());
    }
    Ok(out)
}

/// Counts and logs one row's forward; its span's outcome.
fn forwarded(
    st: &AppState,
    row: &ClaimedRow,
    out: &NewOutboxRow,
    f: Forwarded,
) -> (&'static str, Option<String>) {
    let m = &row.message;
    match f {
        Forwarded::Done { outbox_id } => {
            let correlation = out
                .headers
                .get(X_CORRELATION_ID)
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            st.metrics
                .inc("queuebox_inbox_messages_total", &[("status", "forwarded")]);
            tracing::debug!(inbox_id = %m.id, %outbox_id, correlationId = %correlation, "forwarded");
            ("forwarded", None)
        }
        Forwarded::ClaimLost => {
            claim_lost(Component::Inbox);
            tracing::warn!(inbox_id = %m.id, "the push claim was lost before the forward committed; raise inbox.relay.claimTimeoutMs");
            ("claim_lost", None)
        }
    }
}
