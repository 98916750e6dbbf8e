//! The inbox relay: claims push rows (never pull rows), renders the source's topic
//! template, and in one fenced transaction writes the outbox row with the relay headers
//! and marks the inbox row processed.

use std::sync::Arc;
use std::time::Duration;

use queuebox_config::render_topic;
use queuebox_core::headers::relay_headers;
use queuebox_core::metrics::{claim_lost, Component};
use queuebox_core::store::relay::{Forwarded, NewOutboxRow};
use queuebox_core::ClaimedRow;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::liveness::Heartbeat;
use crate::relay_loop::{self, Pace, Relay};

pub async fn run(st: AppState, stop: CancellationToken, hb: Arc<Heartbeat>) {
    let rc = &st.cfg.inbox.relay;
    let pace = Pace {
        batch_size: rc.batch_size,
        lease: Duration::from_millis(rc.claim_timeout_ms),
        poll_interval: Duration::from_millis(rc.poll_interval_ms),
        gauge_interval: Duration::from_millis(rc.pending_gauge_interval_ms),
    };
    relay_loop::run(&InboxRelay(st), pace, &stop, &hb).await;
}

struct InboxRelay(AppState);

impl Relay for InboxRelay {
    type Row = ClaimedRow;

    async fn reclaim(&self) {
        match self.0.store.reclaim_push().await {
            Ok(n) if n > 0 => {
                self.0.metrics.add("queuebox_inbox_messages_reclaimed_total", &[], n as f64);
                tracing::info!(rows = n, "reclaimed push rows whose lease expired");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "push reclaim failed"),
        }
    }

    async fn update_gauges(&self) {
        // Push rows only in the reference's family: pull rows wait for application workers,
        // not for this relay, and have their own family.
        if let Ok(b) = self.0.store.inbox_backlog().await {
            self.0.metrics.set("queuebox_inbox_oldest_pending_age_seconds", &[], b.push_oldest_pending_age);
            self.0.metrics.set("queuebox_inbox_pull_oldest_pending_age_seconds", &[], b.pull_oldest_pending_age);
        }
    }

    async fn claim(&self, n: u32, lease: Duration) -> queuebox_core::Result<Vec<ClaimedRow>> {
        self.0.store.claim_push(n, lease).await.inspect_err(|e| {
            self.0.metrics.inc("queuebox_inbox_relay_errors_total", &[]);
            tracing::warn!(error = %e, "push claim failed; retrying");
        })
    }

    async fn process(&self, batch: Vec<ClaimedRow>, hb: &Heartbeat) {
        for row in batch {
            hb.beat(Duration::ZERO);
            forward(&self.0, row).await;
        }
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
