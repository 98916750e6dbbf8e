//! The inbox relay: claims push rows (never pull rows), renders the source's topic
//! template, and in one fenced transaction writes the outbox row with the relay headers
//! and marks the inbox row processed.

use std::time::{Duration, Instant};

use queuebox_core::config::render_topic;
use queuebox_core::headers::relay_headers;
use queuebox_core::metrics::{claim_lost, Component};
use queuebox_core::store::relay::{Forwarded, NewOutboxRow, RelayStore};
use queuebox_core::ClaimedRow;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;

pub async fn run(st: AppState, stop: CancellationToken) {
    let rc = &st.cfg.inbox.relay;
    let lease = Duration::from_millis(rc.claim_timeout_ms);
    let reclaim_every = lease / 5;
    let mut last_reclaim: Option<Instant> = None;
    let mut last_gauge: Option<Instant> = None;
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        if last_reclaim.is_none_or(|t| t.elapsed() >= reclaim_every) {
            match st.store.reclaim_push().await {
                Ok(n) if n > 0 => {
                    st.metrics.add("queuebox_inbox_messages_reclaimed_total", &[], n as f64);
                    tracing::info!(rows = n, "reclaimed push rows whose lease expired");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "push reclaim failed"),
            }
            last_reclaim = Some(Instant::now());
        }
        if last_gauge.is_none_or(|t| t.elapsed() >= Duration::from_millis(rc.pending_gauge_interval_ms)) {
            if let Ok(age) = st.store.inbox_oldest_pending_age().await {
                st.metrics.set("queuebox_inbox_oldest_pending_age_seconds", &[], age);
            }
            last_gauge = Some(Instant::now());
        }
        let claimed = match st.store.claim_push(rc.batch_size, lease).await {
            Ok(c) => {
                failures = 0;
                c
            }
            Err(e) => {
                failures += 1;
                st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
                tracing::warn!(error = %e, "push claim failed; retrying");
                sleep_or_stop(&stop, Duration::from_millis(rc.poll_interval_ms * u64::from(failures.min(10)))).await;
                continue;
            }
        };
        let full = claimed.len() as u32 >= rc.batch_size;
        for row in claimed {
            forward(&st, row).await;
        }
        if !full {
            sleep_or_stop(&stop, Duration::from_millis(rc.poll_interval_ms)).await;
        }
    }
}

pub(crate) async fn sleep_or_stop(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.cancelled() => {}
    }
}

async fn forward(st: &AppState, row: ClaimedRow) {
    let m = &row.message;
    let Some(source) = st.cfg.sources.get(&m.source) else {
        // A source removed from the configuration: leave the row for reclaim rather than guess.
        tracing::error!(source = %m.source, inbox_id = %m.id, "push row of a source that is not configured; it stays for reclaim");
        st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
        return;
    };
    let topic = render_topic(source.topic_template(), &m.source, m.event_type.as_deref());
    if topic.is_empty() {
        tracing::error!(source = %m.source, inbox_id = %m.id, "the topic template rendered empty; set the source's topic or send an event type. The row is dead.");
        st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
        let ok = st.store.dead_push(&row.claim, "the topic template rendered an empty topic").await.unwrap_or(false);
        if !ok {
            claim_lost(Component::Inbox);
        }
        return;
    }
    let correlation = m.correlation_id.clone().unwrap_or_else(|| queuebox_core::headers::correlation_id(None));
    let out = NewOutboxRow {
        topic,
        key: m.aggregate_id.clone(),
        payload: m.payload.clone(),
        headers: relay_headers(&m.headers, m.id, &m.source, &m.idempotency_key, &correlation),
        max_attempts: st.cfg.inbox.relay.max_attempts.unwrap_or(st.cfg.outbox.max_attempts),
    };
    match st.store.forward_push(&row.claim, &out).await {
        Ok(Forwarded::Done { outbox_id }) => {
            st.metrics.inc("queuebox_inbox_messages_total", &[("status", "forwarded")]);
            tracing::debug!(inbox_id = %m.id, %outbox_id, correlationId = %correlation, "forwarded");
        }
        Ok(Forwarded::ClaimLost) => {
            claim_lost(Component::Inbox);
            tracing::warn!(inbox_id = %m.id, "the push claim was lost before the forward committed; raise inbox.relay.claimTimeoutMs");
        }
        Err(e) => {
            st.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
            tracing::warn!(inbox_id = %m.id, error = %e, "forward failed; the row returns to pending after its lease");
        }
    }
}
