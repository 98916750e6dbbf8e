//! The outbox relay: claims due rows in batches (leased for `outbox.claimTimeoutMs`; of
//! `outbox.batchSize` rows, or, unset, 100 to 1,000 as the batches allow: `batch_size`),
//! routes each by topic (first matching glob), publishes with at most
//! `outbox.concurrency` in flight (unset: 64 rows, of them at most 8 HTTP requests; see
//! `OutboxConfig::concurrency`), and records the outcome with fenced writes. While a
//! batch is being published, one background ticker renews its live claims every
//! `claimTimeoutMs / 3` (one statement on the pool, outside any transaction; the round is
//! `queuebox_core::lease`, shared with the pull worker); a claim the
//! renewal reports lost cancels its publish if it has not completed (the publish future is
//! dropped), is logged and counted once, and nothing is written for it. A publish that
//! completed after its claim was lost is a duplicate delivery: logged and counted.
//!
//! The next batch is claimed while this one publishes ([`Relay::claims_ahead`]); its leases
//! count from its claim, and it is renewed before publishing if a renewal fell due while it
//! waited.
//!
//! An idle relay waits `outbox.pollIntervalMs` for the next claim, or less: on PostgreSQL it
//! LISTENs on `queuebox_outbox` (migration 0004's trigger notifies once per inserting
//! statement) and claims as soon as a notification arrives ([`spawn_listener`]); polling
//! stays the fallback, and the only way on SQL Server.
//!
//! Delivered rows are marked sent together, in one fenced statement per [`MARK_EVERY`] rows
//! and at the end of the batch ([`mark_delivered`]), instead of one UPDATE each: that UPDATE
//! was most of the database's work per row. A delivered row stays in the renewed set until
//! its mark, so its claim stays live; a crash before the mark delivers it again (same
//! message id, which the NATS destination also sends as `Nats-Msg-Id`).
//!
//! A mark that fails only because it could not be written (no database connection: a full
//! connection table, an outage; `Error::is_unavailable`) is retried, not abandoned (abandoned,
//! such rows would stay `processing` and be delivered again after the claim timeout): the
//! rows stay in the renewed set, so their claims stay live and fenced to this relay, and the
//! mark is tried again after 0.2 s, doubling to 5 s, until it is written, the rows' claims
//! are lost, or `outbox.claimTimeoutMs` has passed since the first failure ([`retry_mark`]).
//! The batch ends only then, so the next batch waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use queuebox_core::backoff::{Decision, RetryPolicy};
use queuebox_core::headers::redact_error;
use queuebox_core::lease::{self, Leases};
use queuebox_core::message::ClaimRef;
use queuebox_core::metrics::{claim_lost, Component};
use queuebox_core::store::relay::{ClaimedOutbox, OutboxRow, RelayStore};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::batch_size::BatchSize;
use crate::destinations::OutboundMessage;
use crate::liveness::Heartbeat;
use crate::relay_loop::{self, Pace, Relay};
use crate::state::AppState;
use queuebox_core::otlp::{KeyValue, SpanKind};

const OUTBOX_CLAIM_FAILED: &str = "outbox claim failed; retrying";

pub async fn run(st: AppState, stop: CancellationToken, hb: Arc<Heartbeat>) {
    let wake = Arc::new(Notify::new());
    let _listener = AbortOnDrop(spawn_listener(
        st.store.clone(),
        wake.clone(),
        Duration::from_millis(st.cfg.outbox.poll_interval_ms),
        stop.clone(),
    ));
    let oc = &st.cfg.outbox;
    let (min, max) = oc.batch_sizes();
    let pace = Pace {
        batch: BatchSize { min, max },
        lease: Duration::from_millis(oc.claim_timeout_ms),
        poll_interval: Duration::from_millis(oc.poll_interval_ms),
        gauge_interval: Duration::from_millis(oc.pending_gauge_interval_ms),
    };
    let publish_allowance = longest_publish(&st.cfg);
    relay_loop::run(
        &OutboxRelay {
            requests: Semaphore::new(oc.http_requests() as usize),
            limits: crate::outbox_limits::Limits::from_config(&st.cfg),
            lease: pace.lease,
            publish_allowance,
            st,
            wake,
        },
        pace,
        &stop,
        &hb,
    )
    .await;
}

/// The longest a single publish may take: the largest destination `timeoutMs`, plus the
/// longest spacing of a `rateLimit.perSecond` (a row may wait that long for its turn). While a
/// batch is published, some message completes at least this often unless the loop is stuck.
fn longest_publish(cfg: &queuebox_config::Config) -> Duration {
    let ms = cfg
        .destinations
        .values()
        .map(|d| d.kind.timeout_ms())
        .max()
        .unwrap_or(0);
    Duration::from_millis(ms) + crate::outbox_limits::Limits::longest_spacing(cfg)
}

struct OutboxRelay {
    st: AppState,
    /// Requests at once to HTTP destinations (`OutboxConfig::http_requests`), across
    /// batches; a row waiting for one keeps its place among the rows in flight.
    requests: Semaphore,
    /// The destinations' `rateLimit`s: a row waits on them inside its batch, its claim
    /// renewed, and the wait is not an attempt (`crate::outbox_limits`).
    limits: crate::outbox_limits::Limits,
    lease: Duration,
    /// How long the loop may go without a message completing (see [`longest_publish`]).
    publish_allowance: Duration,
    /// Notified by [`spawn_listener`] when rows were inserted; a notification that arrives
    /// while a batch runs is kept, so the next idle wait ends at once.
    wake: Arc<Notify>,
}

/// Listens for the outbox trigger's notifications (PostgreSQL) and wakes the idle loop. A
/// broken listen falls back to polling and subscribes again after `poll` (0.5–5 s); each
/// (re)subscription wakes the loop once, for rows inserted while nobody listened. A backend
/// without notifications (SQL Server) polls only.
fn spawn_listener(
    store: Arc<dyn RelayStore>,
    wake: Arc<Notify>,
    poll: Duration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match store.listen_outbox().await {
                Ok(Some(mut w)) => {
                    wake.notify_one();
                    loop {
                        tokio::select! {
                            r = w.wait() => match r {
                                Ok(()) => wake.notify_one(),
                                Err(e) => {
                                    tracing::warn!(error = %e, "outbox LISTEN connection lost; polling until it is back");
                                    break;
                                }
                            },
                            _ = stop.cancelled() => return,
                        }
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox LISTEN failed; polling until it works")
                }
            }
            let again = poll.clamp(Duration::from_millis(500), Duration::from_secs(5));
            relay_loop::sleep_or_stop(&stop, again).await;
            if stop.is_cancelled() {
                return;
            }
        }
    })
}

impl Relay for OutboxRelay {
    type Row = ClaimedOutbox;

    async fn reclaim(&self) {
        match self.st.store.reclaim_outbox().await {
            Ok(n) if n > 0 => {
                self.st
                    .metrics
                    .add("queuebox_outbox_messages_reclaimed_total", &[], n);
                tracing::info!(rows = n, "reclaimed outbox rows whose lease expired");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "outbox reclaim failed"),
        }
    }

    async fn update_gauges(&self) {
        if let Ok(b) = self.st.store.outbox_backlog().await {
            self.st
                .metrics
                .set("queuebox_outbox_messages_pending", &[], b.pending as f64);
            self.st.metrics.set(
                "queuebox_outbox_oldest_pending_age_seconds",
                &[],
                b.oldest_pending_age,
            );
        }
    }

    async fn claim(&self, n: u32, lease: Duration) -> queuebox_core::Result<Vec<ClaimedOutbox>> {
        let t0 = std::time::Instant::now();
        let claimed = self
            .st
            .store
            .claim_outbox_owned(n, lease, self.st.owner.key())
            .await;
        self.st
            .metrics
            .observe("queuebox_outbox_claim_duration_seconds", &[], t0.elapsed());
        claimed.inspect_err(|e| {
            // Every poll interval during an outage: the first in full, then a count per 10 s.
            if crate::warn_limit::admit(
                &self.st.metrics,
                "outbox_claim_failed",
                OUTBOX_CLAIM_FAILED,
            ) {
                tracing::warn!(error = %e, "{OUTBOX_CLAIM_FAILED}");
            }
        })
    }

    async fn idle(&self, stop: &CancellationToken, d: Duration) {
        tokio::select! {
            _ = relay_loop::sleep_or_stop(stop, d) => {}
            _ = self.wake.notified() => {}
        }
    }

    /// Payloads and headers as JSON text: what the batch holds, give or take the parsed
    /// values' overhead.
    fn bytes(&self, rows: &[ClaimedOutbox]) -> usize {
        rows.iter()
            .map(|c| json_len(&c.row.payload) + json_len(&c.row.headers))
            .sum()
    }

    fn resized(&self, n: u32) {
        self.st
            .metrics
            .set("queuebox_outbox_batch_size", &[], n as f64);
        tracing::debug!(rows = n, "outbox claims now ask for {n} rows");
    }

    /// Claims ahead: the next claim runs while this batch publishes. Its leases count from
    /// its claim, so a batch that waited for the one before is renewed before it publishes
    /// when a renewal fell due meanwhile.
    fn claims_ahead(&self) -> bool {
        true
    }

    async fn process(&self, claimed: Vec<ClaimedOutbox>, at: Instant, hb: &Heartbeat) {
        let st = &self.st;
        let batch: Vec<(ClaimedOutbox, CancellationToken)> = claimed
            .into_iter()
            .map(|c| (c, CancellationToken::new()))
            .collect();
        let live: Live = Arc::new(Mutex::new(
            batch
                .iter()
                .map(|(c, t)| (c.row.id, (c.claim, t.clone())))
                .collect(),
        ));
        // Rows waiting for a concurrency slot are renewed too; the ticker stops with the batch.
        let leases = OutboxLeases {
            store: st.store.clone(),
            live: live.clone(),
        };
        let every = lease::renewal_interval(self.lease).max(Duration::from_millis(10));
        let mut first = at + every;
        if !batch.is_empty() && first <= Instant::now() {
            // Claimed ahead and waited past a renewal: renew before publishing, so a row whose
            // lease ran out meanwhile (now another replica's) is not published again.
            lease::renew_once(&leases, self.lease).await;
            first = Instant::now() + every;
        }
        let _renewal = (!batch.is_empty())
            .then(|| AbortOnDrop(spawn_renewal(leases, self.lease, first.into(), every)));
        // The batch finishes even when shutdown starts: in-flight publishes complete.
        hb.beat(self.publish_allowance);
        let delivered: Delivered = Mutex::new(Vec::new());
        futures::stream::iter(batch)
            .for_each_concurrent(st.cfg.outbox.in_flight() as usize, |(c, t)| {
                let (live, delivered) = (&live, &delivered);
                async move {
                    if let Some(c) = process(st, self, c, t, live).await {
                        let full = {
                            let mut d = delivered.lock().unwrap();
                            d.push(c);
                            (d.len() >= MARK_EVERY).then(|| std::mem::take(&mut *d))
                        };
                        if let Some(rows) = full {
                            mark_delivered(st, rows, live, &self.marking(hb)).await;
                        }
                    }
                    hb.beat(self.publish_allowance);
                }
            })
            .await;
        let rest = std::mem::take(&mut *delivered.lock().unwrap());
        mark_delivered(st, rest, &live, &self.marking(hb)).await;
    }
}

impl OutboxRelay {
    fn marking<'a>(&self, hb: &'a Heartbeat) -> Marking<'a> {
        Marking {
            hb,
            publish_allowance: self.publish_allowance,
            give_up_after: self.lease,
        }
    }
}

/// How [`mark_delivered`] retries a mark that could not be written.
struct Marking<'a> {
    hb: &'a Heartbeat,
    /// What the batch's other publishes may take between beats: a retry never shortens it.
    publish_allowance: Duration,
    /// `outbox.claimTimeoutMs`: past it, a claim nobody could renew has expired.
    give_up_after: Duration,
}

/// The first wait before a failed mark is tried again, and the longest.
const MARK_RETRY_FIRST: Duration = Duration::from_millis(200);
const MARK_RETRY_MAX: Duration = Duration::from_secs(5);

/// The length of `v` as JSON text, counted without writing it anywhere.
fn json_len(v: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing to a counter cannot fail, and a JSON value always serializes.
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

/// The claims of the batch still being published, each with the token that cancels its
/// publish. A row leaves the map when its publish ends (before its outcome is written) or
/// when a renewal reports its claim lost.
type Live = Arc<Mutex<HashMap<Uuid, (ClaimRef, CancellationToken)>>>;

/// Rows published and acknowledged, waiting for their sent mark.
type Delivered = Mutex<Vec<ClaimedOutbox>>;

/// Delivered rows marked sent in one statement: often enough that a crash re-delivers few
/// rows, rarely enough that the mark costs a small share of a statement per row. Each mark
/// costs PostgreSQL ~0.5 ms whatever its size (plan, executor start, commit): 4 µs of
/// database CPU per row at 128, 1 at 512 (benchmarks/outbox.md). A batch of the default
/// adaptive size is processed within about a second, and its rest is marked at its end, so
/// a crash re-delivers at most a second's rows (and what was in flight) either way.
const MARK_EVERY: usize = 512;

/// Marks `rows` sent in one fenced statement; a row it did not match lost its claim after
/// the publish (a duplicate delivery: logged and counted once). The rows leave the renewed
/// set only now, so their claims stay live until the mark.
async fn mark_delivered(st: &AppState, rows: Vec<ClaimedOutbox>, live: &Live, how: &Marking<'_>) {
    if rows.is_empty() {
        return;
    }
    let claims: Vec<ClaimRef> = rows.iter().map(|c| c.claim).collect();
    let mut result = st.store.mark_sent_many(&claims).await;
    let mut retried = false;
    if matches!(&result, Err(e) if e.is_unavailable()) {
        retried = true;
        result = retry_mark(st, &claims, result, live, how).await;
    }
    {
        let mut l = live.lock().unwrap();
        for c in &claims {
            l.remove(&c.id);
        }
    }
    match result {
        Ok(marked) => {
            let marked: std::collections::HashSet<Uuid> = marked.into_iter().collect();
            // One counter update per mark, not per row (a labelled series appears only once
            // something was counted in it).
            if !marked.is_empty() {
                st.metrics.add(
                    "queuebox_outbox_messages_total",
                    &[("status", "sent")],
                    marked.len() as u64,
                );
            }
            for c in &rows {
                let row = &c.row;
                if !marked.contains(&row.id) {
                    claim_lost(Component::Outbox);
                    tracing::error!(
                        messageId = %row.id, topic = %row.topic, attempt = row.attempt,
                        "published after the claim was lost: another replica owns the row, so this is a duplicate delivery; raise outbox.claimTimeoutMs above the slowest publish{}",
                        if retried { " (or a failed attempt of its sent mark, whose answer was lost, wrote it)" } else { "" }
                    );
                }
            }
        }
        Err(e) => {
            for c in &rows {
                st.metrics.inc("queuebox_outbox_process_errors_total", &[]);
                tracing::error!(messageId = %c.row.id, error = %e, retried, "published but could not mark the row sent; it is delivered again after its lease");
            }
        }
    }
}

/// Tries a mark that could not be written (`first`, an unavailable error) again with
/// backoff while the rows' claims hold: they stay in `live`, so the batch's renewal keeps
/// them fenced to this relay. Stops at the first answer that is not "unavailable" (the
/// rows it matched are marked; the caller reports the rest as it reports any mark), when
/// every row's claim was reported lost (`Ok` of nothing: each is reported a duplicate), or
/// after `outbox.claimTimeoutMs` (the last error: the rows are delivered again after their
/// lease, as before).
async fn retry_mark(
    st: &AppState,
    claims: &[ClaimRef],
    first: queuebox_core::Result<Vec<Uuid>>,
    live: &Live,
    how: &Marking<'_>,
) -> queuebox_core::Result<Vec<Uuid>> {
    let started = Instant::now();
    let mut wait = MARK_RETRY_FIRST;
    let mut result = first;
    if let Err(e) = &result {
        tracing::warn!(rows = claims.len(), error = %e, "published but could not mark the rows sent; retrying the mark while their claims hold");
    }
    let mut attempts = 1u32;
    while matches!(&result, Err(e) if e.is_unavailable()) && started.elapsed() < how.give_up_after {
        how.hb.beat(how.publish_allowance.max(wait));
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MARK_RETRY_MAX);
        // A claim the renewal reported lost has left `live`: another relay owns that row.
        let held: Vec<ClaimRef> = {
            let l = live.lock().unwrap();
            claims
                .iter()
                .filter(|c| l.contains_key(&c.id))
                .copied()
                .collect()
        };
        if held.is_empty() {
            return Ok(Vec::new());
        }
        st.metrics.inc("queuebox_outbox_mark_retries_total", &[]);
        result = st.store.mark_sent_many(&held).await;
        attempts += 1;
    }
    if let Ok(marked) = &result {
        tracing::info!(
            rows = marked.len(),
            attempts,
            "the delayed sent mark was written"
        );
    }
    result
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The live claims of a batch, renewed by the shared `queuebox_core::lease` rule. A lost
/// claim leaves the map and its token cancels the publish; the loss is counted once, where
/// the publish notices it ([`lost_unpublished`]) or, if the publish ended meanwhile (gone
/// from the map), by its fenced outcome write.
struct OutboxLeases {
    store: Arc<dyn RelayStore>,
    live: Live,
}

#[async_trait::async_trait]
impl Leases for OutboxLeases {
    fn live(&self) -> Vec<ClaimRef> {
        self.live
            .lock()
            .unwrap()
            .values()
            .map(|(c, _)| *c)
            .collect()
    }

    async fn renew(
        &self,
        claims: &[ClaimRef],
        lease: Duration,
    ) -> queuebox_core::Result<Vec<Uuid>> {
        self.store.renew_outbox(claims, lease).await
    }

    fn lost(&self, c: &ClaimRef) {
        if let Some((_, token)) = self.live.lock().unwrap().remove(&c.id) {
            token.cancel();
        }
    }

    fn failed(&self, claims: usize, e: &queuebox_core::Error) {
        tracing::warn!(error = %e, rows = claims, "outbox lease renewal failed");
    }
}

fn spawn_renewal(
    leases: OutboxLeases,
    lease: Duration,
    first: tokio::time::Instant,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(first, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            lease::renew_once(&leases, lease).await;
        }
    })
}

fn lost_unpublished(row: &queuebox_core::store::relay::OutboxRow, started: bool) {
    claim_lost(Component::Outbox);
    tracing::warn!(
        messageId = %row.id, topic = %row.topic, attempt = row.attempt,
        "the outbox claim was lost (a lease renewal matched no row){}; nothing is written, another replica owns the row",
        if started { " while publishing: the publish was cancelled" } else { " before its publish started" }
    );
}

/// Publishes one claimed row and writes a failure's outcome; returns the row when it was
/// delivered, for [`mark_delivered`].
async fn process(
    st: &AppState,
    relay: &OutboxRelay,
    mut c: ClaimedOutbox,
    lost: CancellationToken,
    live: &Live,
) -> Option<ClaimedOutbox> {
    let t0 = Instant::now();
    // Only the message needs the payload (the outcome writes read the row's id, attempts and
    // headers): moved into it, not copied, which was the relay's largest allocation per row.
    let payload = std::mem::take(&mut c.row.payload);
    let row = &c.row;
    if lost.is_cancelled() {
        lost_unpublished(row, false);
        return None;
    }
    let Some(route) = st.cfg.route_for(&row.topic) else {
        live.lock().unwrap().remove(&row.id);
        let why = format!("No route matches topic '{}'", row.topic);
        tracing::warn!(messageId = %row.id, topic = %row.topic, "{why}; the row is dead");
        finish(st, &c, st.store.dead_outbox(&c.claim, &why).await, "dead");
        return None;
    };
    let Some(publisher) = st.publishers.get(&route.destination) else {
        live.lock().unwrap().remove(&row.id);
        let why = format!("No publisher supports destination '{}'", route.destination);
        finish(st, &c, st.store.dead_outbox(&c.claim, &why).await, "dead");
        return None;
    };
    let dest = route.destination.as_str();
    // The route's transform, then the destination's (crate::transforms).
    let mut msg = match crate::transforms::at_delivery(
        &st.transforms,
        &st.cfg,
        &st.metrics,
        route,
        st.route_keys.apply(
            &st.cfg,
            route,
            OutboundMessage {
                payload,
                ..OutboundMessage::from(row)
            },
        ),
    )
    .await
    {
        Ok(msg) => msg,
        Err(stop) => {
            live.lock().unwrap().remove(&row.id);
            write_stop(st, stop, &c).await;
            return None;
        }
    };
    // The attempt's span; the destination continues the trace from it, not from the row.
    let span = crate::telemetry::span(
        "outbox.publish",
        SpanKind::Producer,
        || row_trace(row),
        None,
        || {
            vec![
                KeyValue::new("topic", row.topic.clone()),
                KeyValue::new("destination", dest.to_string()),
                KeyValue::new("attempt", i64::from(row.attempt) + 1),
                KeyValue::new("messageId", row.id.to_string()),
            ]
        },
    );
    if let Some(own) = span.context() {
        queuebox_core::trace::stamp(&mut msg.headers, Some(&own));
    }
    st.metrics
        .gauge_add("queuebox_outbox_queue_depth", &[("destination", dest)], 1.0);
    let publish = async {
        // The destination's limits and the relay's HTTP request cap; a lost claim cancels
        // the wait like the publish, and nothing is written for a row that only waited.
        let requests = publisher.is_request().then_some(&relay.requests);
        let _admitted = relay.limits.admit(dest, requests, &st.metrics).await;
        let p0 = Instant::now();
        (publisher.publish(&msg).await, p0.elapsed())
    };
    let result = tokio::select! {
        biased;
        r = publish => Some(r),
        _ = lost.cancelled() => None,
    };
    if !matches!(result, Some((Ok(()), _))) {
        // A delivered row stays renewed until its sent mark (`mark_delivered`).
        live.lock().unwrap().remove(&row.id);
    }
    st.metrics.gauge_add(
        "queuebox_outbox_queue_depth",
        &[("destination", dest)],
        -1.0,
    );
    let Some((result, took)) = result else {
        span.end("claim_lost", None);
        lost_unpublished(row, true);
        return None;
    };
    st.metrics.observe(
        "queuebox_outbox_publish_duration_seconds",
        &[("destination_type", publisher.destination_type())],
        took,
    );
    match result {
        Ok(()) => {
            span.end("success", None);
            st.metrics.inc(
                "queuebox_outbox_destination_messages_total",
                &[("destination", dest), ("outcome", "success")],
            );
            st.metrics.observe(
                "queuebox_outbox_processing_duration_seconds",
                &[],
                t0.elapsed(),
            );
            return Some(c);
        }
        Err(e) => {
            st.metrics.inc(
                "queuebox_outbox_destination_messages_total",
                &[("destination", dest), ("outcome", "failure")],
            );
            let secrets: Vec<&str> = st.secrets.iter().map(String::as_str).collect();
            let why = redact_error(&e.to_string(), &secrets);
            span.end("failure", Some(&why));
            let decision = after_publish_failure(st, row, &e);
            match decision {
                Decision::Retry(delay) => {
                    tracing::warn!(messageId = %row.id, topic = %row.topic, attempt = row.attempt, error = %why, delay_ms = delay.as_millis() as u64, "delivery failed; retrying");
                }
                Decision::Dead => {
                    tracing::warn!(messageId = %row.id, topic = %row.topic, attempt = row.attempt, error = %why, "delivery failed; no attempts left, the row is dead");
                }
            }
            write_failure(st, &c, decision, &why).await;
        }
    }
    st.metrics.observe(
        "queuebox_outbox_processing_duration_seconds",
        &[],
        t0.elapsed(),
    );
    None
}

/// The outbox row's W3C trace context (its `traceparent` / `tracestate` headers, written by
/// the inbox relay or the application), the parent of its publish spans.
fn row_trace(row: &OutboxRow) -> Option<queuebox_core::trace::TraceContext> {
    let headers = row
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)));
    queuebox_core::trace::TraceContext::from_headers(headers).0
}

/// Writes the outcome of a claimed row whose transform stopped it: dead at once (`Dead`,
/// or `Fail` with no attempts left) or back to pending after the backoff (`Fail`), with
/// the transform's `last_error`.
async fn write_stop(st: &AppState, stop: crate::transforms::Stop, c: &ClaimedOutbox) {
    let decision = if stop.dead {
        Decision::Dead
    } else {
        after_failure(st, &c.row)
    };
    write_failure(st, c, decision, &stop.last_error).await;
}

/// Writes a failed attempt's `decision` with its `last_error`: back to pending after the
/// delay (counted `failed`) or dead (counted `dead`). Publish and transform failures both.
async fn write_failure(st: &AppState, c: &ClaimedOutbox, decision: Decision, why: &str) {
    match decision {
        Decision::Retry(delay) => {
            let r = st.store.retry_outbox(&c.claim, delay, why).await;
            finish(st, c, r, "failed");
        }
        Decision::Dead => {
            let r = st.store.dead_outbox(&c.claim, why).await;
            finish(st, c, r, "dead");
        }
    }
}

/// What a failed delivery of `row` leads to: a retry after the backoff, or dead once its
/// `max_attempts` are spent. The one rule for publish failures and transform failures.
fn after_failure(st: &AppState, row: &OutboxRow) -> Decision {
    row_policy(st, row).decide_now(row.attempt.max(0) as u32)
}

/// What a failed publish of `row` leads to: [`after_failure`] (dead once the row's attempts
/// are spent: proto-docs/states.md#outbox), except with `outbox.retryUnreachableForever`: then a
/// destination that could not be reached never makes the row dead, because the message is
/// not at fault while a broker is down or restarting; the row keeps waiting on the capped
/// backoff until the destination is back (a rejection still makes it dead). The chaos
/// ledger: a RabbitMQ restart longer than the rows' schedule dead-lettered every row in flight.
fn after_publish_failure(
    st: &AppState,
    row: &OutboxRow,
    e: &crate::destinations::PublishError,
) -> Decision {
    let unreachable = st.cfg.outbox.retry_unreachable_forever
        && matches!(e, crate::destinations::PublishError::Unavailable(_));
    publish_failure_decision(
        &row_policy(st, row),
        row.attempt.max(0) as u32,
        unreachable,
        rand::random::<f64>(),
    )
}

fn publish_failure_decision(
    policy: &RetryPolicy,
    attempt: u32,
    unreachable: bool,
    u: f64,
) -> Decision {
    match policy.decide(attempt, u) {
        Decision::Dead if unreachable => Decision::Retry(policy.delay(attempt, u)),
        decision => decision,
    }
}

/// The row's retry policy: its own `max_attempts`, the relay's schedule.
fn row_policy(st: &AppState, row: &OutboxRow) -> RetryPolicy {
    RetryPolicy {
        max_attempts: row.max_attempts.max(0) as u32,
        base_delay: Duration::from_millis(st.cfg.outbox.retry_base_delay_ms),
        ..RetryPolicy::relay_default()
    }
}

fn finish(st: &AppState, c: &ClaimedOutbox, r: queuebox_core::Result<bool>, status: &'static str) {
    match r {
        Ok(true) => st
            .metrics
            .inc("queuebox_outbox_messages_total", &[("status", status)]),
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

#[cfg(test)]
mod publish_failure_tests {
    use super::*;

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(1000),
            ..RetryPolicy::relay_default()
        }
    }

    // `unreachable` below is "unreachable, with outbox.retryUnreachableForever on"; off (the
    // default), every failure takes the spent-attempts rule, which the second test pins.
    #[test]
    fn an_unreachable_destination_never_makes_a_row_dead_when_asked() {
        let p = policy(5);
        // Attempts spent: a rejection is dead, an unreachable destination waits the capped
        // backoff (1 s doubling, at most 60 s) and tries again.
        assert_eq!(publish_failure_decision(&p, 5, false, 0.0), Decision::Dead);
        assert_eq!(
            publish_failure_decision(&p, 5, true, 0.0),
            Decision::Retry(Duration::from_secs(32))
        );
        assert_eq!(
            publish_failure_decision(&p, 40, true, 0.0),
            Decision::Retry(Duration::from_secs(60))
        );
        // A row published with max_attempts 0 (dead on its first failure) is no exception.
        assert!(matches!(
            publish_failure_decision(&policy(0), 0, true, 0.5),
            Decision::Retry(_)
        ));
    }

    #[test]
    fn attempts_left_are_the_same_schedule_whatever_the_failure() {
        let p = policy(5);
        for attempt in 0..5 {
            for unreachable in [false, true] {
                assert_eq!(
                    publish_failure_decision(&p, attempt, unreachable, 0.3),
                    p.decide(attempt, 0.3)
                );
            }
        }
    }
}
