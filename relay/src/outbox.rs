//! The outbox relay: claims due rows in batches (leased for `outbox.claimTimeoutMs`),
//! routes each by topic (first matching glob), publishes with at most
//! `outbox.concurrency` in flight, and records the outcome with fenced writes. A publish
//! whose claim was lost meanwhile is a duplicate delivery: logged and counted.

use std::time::{Duration, Instant};

use futures::StreamExt;
use queuebox_core::backoff::{Decision, RetryPolicy};
use queuebox_core::headers::redact_error;
use queuebox_core::metrics::{claim_lost, Component};
use queuebox_core::store::relay::{ClaimedOutbox, RelayStore};
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::destinations::OutboundMessage;
use crate::inbox_relay::sleep_or_stop;

pub async fn run(st: AppState, stop: CancellationToken) {
    let oc = &st.cfg.outbox;
    let lease = Duration::from_millis(oc.claim_timeout_ms);
    let reclaim_every = lease / 5;
    let mut last_reclaim: Option<Instant> = None;
    let mut last_gauge: Option<Instant> = None;
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        if last_reclaim.is_none_or(|t| t.elapsed() >= reclaim_every) {
            match st.store.reclaim_outbox().await {
                Ok(n) if n > 0 => {
                    st.metrics.add("queuebox_outbox_messages_reclaimed_total", &[], n as f64);
                    tracing::info!(rows = n, "reclaimed outbox rows whose lease expired");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "outbox reclaim failed"),
            }
            last_reclaim = Some(Instant::now());
        }
        if last_gauge.is_none_or(|t| t.elapsed() >= Duration::from_millis(oc.pending_gauge_interval_ms)) {
            if let Ok(b) = st.store.backlog().await {
                st.metrics.set("queuebox_outbox_messages_pending", &[], b.outbox_pending as f64);
                st.metrics.set("queuebox_outbox_oldest_pending_age_seconds", &[], b.outbox_oldest_pending_age);
            }
            last_gauge = Some(Instant::now());
        }
        let claimed = match st.store.claim_outbox(oc.batch_size, lease).await {
            Ok(c) => {
                failures = 0;
                c
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, "outbox claim failed; retrying");
                sleep_or_stop(&stop, Duration::from_millis(oc.poll_interval_ms * u64::from(failures.min(10)))).await;
                continue;
            }
        };
        let full = claimed.len() as u32 >= oc.batch_size;
        // The batch finishes even when shutdown starts: in-flight publishes complete.
        futures::stream::iter(claimed).for_each_concurrent(oc.concurrency as usize, |c| process(&st, c)).await;
        if !full {
            sleep_or_stop(&stop, Duration::from_millis(oc.poll_interval_ms)).await;
        }
    }
}

async fn process(st: &AppState, c: ClaimedOutbox) {
    let t0 = Instant::now();
    let row = &c.row;
    let secrets: Vec<&str> = st.secrets.iter().map(String::as_str).collect();
    let Some(route) = st.cfg.route_for(&row.topic) else {
        let why = format!("No route matches topic '{}'", row.topic);
        tracing::warn!(messageId = %row.id, topic = %row.topic, "{why}; the row is dead");
        finish(st, &c, st.store.dead_outbox(&c.claim, &why).await, "dead");
        return;
    };
    let Some(publisher) = st.publishers.get(&route.destination) else {
        let why = format!("No publisher supports destination '{}'", route.destination);
        finish(st, &c, st.store.dead_outbox(&c.claim, &why).await, "dead");
        return;
    };
    let dest = route.destination.as_str();
    let msg = OutboundMessage::from(row);
    st.metrics.gauge_add("queuebox_outbox_queue_depth", &[("destination", dest)], 1.0);
    let p0 = Instant::now();
    let result = publisher.publish(&msg).await;
    st.metrics.observe("queuebox_outbox_publish_duration_seconds", &[("destination_type", publisher.destination_type())], p0.elapsed());
    st.metrics.gauge_add("queuebox_outbox_queue_depth", &[("destination", dest)], -1.0);
    match result {
        Ok(()) => {
            st.metrics.inc("queuebox_outbox_destination_messages_total", &[("destination", dest), ("outcome", "success")]);
            match st.store.mark_sent(&c.claim).await {
                Ok(true) => st.metrics.inc("queuebox_outbox_messages_total", &[("status", "sent")]),
                Ok(false) => {
                    claim_lost(Component::Outbox);
                    tracing::error!(
                        messageId = %row.id, topic = %row.topic, attempt = row.attempt,
                        "published after the claim was lost: another replica owns the row, so this is a duplicate delivery; raise outbox.claimTimeoutMs above the slowest publish"
                    );
                }
                Err(e) => {
                    st.metrics.inc("queuebox_outbox_process_errors_total", &[]);
                    tracing::error!(messageId = %row.id, error = %e, "published but could not mark the row sent; it is delivered again after its lease");
                }
            }
        }
        Err(e) => {
            st.metrics.inc("queuebox_outbox_destination_messages_total", &[("destination", dest), ("outcome", "failure")]);
            let why = redact_error(&e.to_string(), &secrets);
            let policy = RetryPolicy {
                max_attempts: row.max_attempts.max(0) as u32,
                base_delay: Duration::from_millis(st.cfg.outbox.retry_base_delay_ms),
                ..RetryPolicy::relay_default()
            };
            match policy.decide_now(row.attempt.max(0) as u32) {
                Decision::Retry(delay) => {
                    tracing::warn!(messageId = %row.id, topic = %row.topic, attempt = row.attempt, error = %why, delay_ms = delay.as_millis() as u64, "delivery failed; retrying");
                    finish(st, &c, st.store.retry_outbox(&c.claim, delay, &why).await, "failed");
                }
                Decision::Dead => {
                    tracing::warn!(messageId = %row.id, topic = %row.topic, attempt = row.attempt, error = %why, "delivery failed; no attempts left, the row is dead");
                    finish(st, &c, st.store.dead_outbox(&c.claim, &why).await, "dead");
                }
            }
        }
    }
    st.metrics.observe("queuebox_outbox_processing_duration_seconds", &[], t0.elapsed());
}

fn finish(st: &AppState, c: &ClaimedOutbox, r: queuebox_core::Result<bool>, status: &'static str) {
    match r {
        Ok(true) => st.metrics.inc("queuebox_outbox_messages_total", &[("status", status)]),
        Ok(false) => {
            claim_lost(Component::Outbox);
            tracing::warn!(messageId = %c.row.id, "claim lost before the outcome was written; another replica owns the row");
        }
        Err(e) => {
            st.metrics.inc("queuebox_outbox_process_errors_total", &[]);
            tracing::error!(messageId = %c.row.id, error = %e, "could not write the outcome; the row is retried after its lease");
        }
    }
}
