//! The Prometheus registry of the relay (docs/observability.md#metrics) on the Prometheus org's
//! `prometheus-client` crate: one registered family per documented name, its series created
//! at first use (a labelled series appears after its first use), and
//! the Prometheus text format 0.0.4 at `/metrics`.
//!
//! Timers are histograms with fixed buckets ([`queuebox_core::metrics::BUCKETS`]), not the
//! reference's summaries: bucket counts add up across replicas, quantiles over a window of
//! recent samples cannot. Each timer keeps its reference name and labels and its `_max`
//! gauge.
//!
//! Callers name a family by its exported name (`queuebox_outbox_messages_total`) and give
//! the labels; [`FAMILIES`] is the list of every family, its type and help.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use queuebox_core::metrics::{claims_lost, encode_text, timer, Component};

pub use queuebox_core::metrics::TEXT_CONTENT_TYPE;

type Labels = Vec<(&'static str, String)>;
type Counters = Family<Labels, Counter>;
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;
type Timers = Family<Labels, Histogram, fn() -> Histogram>;

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    /// A histogram and its `_max` gauge.
    Timer,
}

/// Every family the relay updates: exported name, type, help. `queuebox`,
/// `queuebox_uptime_seconds` and `queuebox_claims_lost_total` are read at each scrape
/// ([`Process`]).
const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "queuebox_outbox_messages_total",
        Kind::Counter,
        "Outbox outcomes: sent, failed (retry scheduled), dead",
    ),
    (
        "queuebox_outbox_messages_pending",
        Kind::Gauge,
        "Pending outbox rows",
    ),
    (
        "queuebox_outbox_oldest_pending_age_seconds",
        Kind::Gauge,
        "Age of the oldest pending outbox row",
    ),
    (
        "queuebox_inbox_oldest_pending_age_seconds",
        Kind::Gauge,
        "Age of the oldest pending push inbox row (the inbox relay's backlog)",
    ),
    (
        "queuebox_inbox_pull_oldest_pending_age_seconds",
        Kind::Gauge,
        "Age of the oldest pending pull inbox row (waiting for application workers)",
    ),
    (
        "queuebox_paused",
        Kind::Gauge,
        "1 while a source, destination or topic is paused (queuebox pause), 0 once resumed",
    ),
    (
        "queuebox_outbox_messages_reclaimed_total",
        Kind::Counter,
        "Outbox rows returned to pending after an expired claim",
    ),
    (
        "queuebox_inbox_messages_reclaimed_total",
        Kind::Counter,
        "Push inbox rows returned to pending after an expired claim",
    ),
    (
        "queuebox_outbox_process_errors_total",
        Kind::Counter,
        "Unexpected errors processing one outbox message",
    ),
    (
        "queuebox_outbox_mark_retries_total",
        Kind::Counter,
        "Sent marks tried again after the mark could not be written (no database connection)",
    ),
    (
        "queuebox_outbox_processing_duration_seconds",
        Kind::Timer,
        "Time to process one outbox message",
    ),
    (
        "queuebox_outbox_publish_duration_seconds",
        Kind::Timer,
        "Time to publish one outbox message",
    ),
    (
        "queuebox_outbox_claim_duration_seconds",
        Kind::Timer,
        "Time to claim one outbox batch",
    ),
    (
        "queuebox_inbox_claim_duration_seconds",
        Kind::Timer,
        "Time to claim one batch of push inbox rows",
    ),
    (
        "queuebox_inbox_insert_groups_total",
        Kind::Counter,
        "Groups of received messages stored together, one insert statement each on PostgreSQL (queuebox_inbox_messages_total / this = messages per statement)",
    ),
    (
        "queuebox_inbox_ingest_duration_seconds",
        Kind::Timer,
        "Time to answer one HTTP source request (read, check, store)",
    ),
    (
        "queuebox_outbox_destination_messages_total",
        Kind::Counter,
        "Publishes per destination and outcome",
    ),
    (
        "queuebox_outbox_batch_size",
        Kind::Gauge,
        "Rows the outbox relay's next claim asks for (outbox.batchSize, or the adapting size when it is unset)",
    ),
    (
        "queuebox_outbox_queue_depth",
        Kind::Gauge,
        "Messages being published to a destination now",
    ),
    (
        "queuebox_outbox_limit_wait_seconds",
        Kind::Timer,
        "Time outbox rows waited for their destination's rateLimit (inFlight, perSecond) before publishing; waiting is not an attempt",
    ),
    (
        "queuebox_outbox_limit_waiting",
        Kind::Gauge,
        "Outbox rows waiting for their destination's rateLimit now",
    ),
    (
        "queuebox_http_publish_responses_total",
        Kind::Counter,
        "HTTP destination responses by status class",
    ),
    (
        "queuebox_inbox_filtered_total",
        Kind::Counter,
        "Inbox messages a source's header filter dropped, by source",
    ),
    (
        "queuebox_repeated_warnings_total",
        Kind::Counter,
        "Warnings of a rate-limited kind (one line, then a summary per 10 s), every one counted, by kind",
    ),
    (
        "queuebox_inbox_headers_dropped_total",
        Kind::Counter,
        "Received HTTP header values not stored on an inbox row because they are not valid UTF-8, by source",
    ),
    (
        "queuebox_inbox_messages_total",
        Kind::Counter,
        "Inbox outcomes: new, duplicate, forwarded",
    ),
    (
        "queuebox_inbox_relay_errors_total",
        Kind::Counter,
        "Inbox relay failures",
    ),
    (
        "queuebox_inbox_rejections_total",
        Kind::Counter,
        "Rejected inbox messages by reason",
    ),
    (
        "queuebox_transform_failures_total",
        Kind::Counter,
        "Transform failures by stage (source, route, destination) and onError strategy",
    ),
    (
        "queuebox_cleanup_messages_deleted_total",
        Kind::Counter,
        "Rows deleted by retention",
    ),
    (
        "queuebox_cleanup_duration_seconds",
        Kind::Timer,
        "Duration of one retention run",
    ),
    (
        "queuebox_cleanup_last_run_timestamp",
        Kind::Gauge,
        "Unix seconds of the last retention run",
    ),
    (
        "queuebox_db_pool_connections",
        Kind::Gauge,
        "Database pool connections by state",
    ),
    (
        "queuebox_db_pool_connect_failing",
        Kind::Gauge,
        "1 while the database pool's last attempt to open a connection failed (its cause is in the log and in /health/ready)",
    ),
    (
        "queuebox_db_pool_starved",
        Kind::Gauge,
        "1 while the database pool cannot get connections: connecting fails and a statement got none within the last 10 s (/health/ready reports the database down)",
    ),
    (
        "queuebox_db_pool_acquire_failures_total",
        Kind::Counter,
        "Statements that got no database connection since start (timed out, failed fast while the database was unreachable, or past their request's deadline)",
    ),
];

/// Every metric the relay exports.
pub struct Metrics {
    registry: Registry,
    counters: HashMap<&'static str, Counters>,
    gauges: HashMap<&'static str, Gauges>,
    /// A timer's histogram and its `_max` gauge.
    timers: HashMap<&'static str, (Timers, Gauges)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn labels(l: &[(&'static str, &str)]) -> Labels {
    l.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

impl Metrics {
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            counters: HashMap::new(),
            gauges: HashMap::new(),
            timers: HashMap::new(),
        };
        m.registry.register_collector(Box::new(Process {
            started: Instant::now(),
        }));
        for (name, kind, help) in FAMILIES {
            match kind {
                Kind::Counter => {
                    let family = Counters::default();
                    // The encoder adds `_total` to a counter's name.
                    let base = name
                        .strip_suffix("_total")
                        .expect("a counter ends in _total");
                    m.registry.register(base, *help, family.clone());
                    m.counters.insert(name, family);
                }
                Kind::Gauge => {
                    let family = Gauges::default();
                    m.registry.register(*name, *help, family.clone());
                    m.gauges.insert(name, family);
                }
                Kind::Timer => {
                    let (histogram, max) = (Timers::new_with_constructor(timer), Gauges::default());
                    m.registry.register(*name, *help, histogram.clone());
                    m.registry.register(
                        format!("{name}_max"),
                        format!("Maximum of {name}"),
                        max.clone(),
                    );
                    m.timers.insert(name, (histogram, max));
                }
            }
        }
        m
    }

    pub fn inc(&self, name: &'static str, l: &[(&'static str, &str)]) {
        self.add(name, l, 1);
    }

    pub fn add(&self, name: &'static str, l: &[(&'static str, &str)], v: u64) {
        if let Some(family) = known(&self.counters, name) {
            family.get_or_create(&labels(l)).inc_by(v);
        }
    }

    pub fn set(&self, name: &'static str, l: &[(&'static str, &str)], v: f64) {
        if let Some(family) = known(&self.gauges, name) {
            family.get_or_create(&labels(l)).set(v);
        }
    }

    pub fn gauge_add(&self, name: &'static str, l: &[(&'static str, &str)], v: f64) {
        if let Some(family) = known(&self.gauges, name) {
            family.get_or_create(&labels(l)).inc_by(v);
        }
    }

    pub fn observe(&self, name: &'static str, l: &[(&'static str, &str)], d: Duration) {
        if let Some((histogram, max)) = known(&self.timers, name) {
            let (l, v) = (labels(l), d.as_secs_f64());
            histogram.get_or_create(&l).observe(v);
            raise(max.get_or_create(&l).inner(), v);
        }
    }

    /// The Prometheus text exposition (format 0.0.4, [`TEXT_CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        encode_text(&self.registry)
    }
}

/// The family registered as `name`. Every name a caller passes is in [`FAMILIES`]; one that
/// is not is a programming error, caught by the tests (debug builds) and logged in release
/// builds rather than taking the relay down over a metric.
fn known<'a, F>(families: &'a HashMap<&'static str, F>, name: &str) -> Option<&'a F> {
    let family = families.get(name);
    if family.is_none() {
        debug_assert!(false, "metric {name} is not in FAMILIES with this type");
        tracing::error!(metric = name, "metric is not registered; not counted");
    }
    family
}

/// Raises the `f64` gauge held in `bits` to `v` if `v` is larger.
fn raise(bits: &AtomicU64, v: f64) {
    let mut current = bits.load(Ordering::Relaxed);
    while f64::from_bits(current) < v {
        match bits.compare_exchange_weak(current, v.to_bits(), Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return,
            Err(now) => current = now,
        }
    }
}

/// The series read at each scrape: the build (`queuebox{version} 1`, registered as
/// `queuebox_info`), the uptime, and the core's process-wide lost-claim counters.
#[derive(Debug)]
struct Process {
    started: Instant,
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let info = ConstGauge::new(1i64);
        let mut family =
            encoder.encode_descriptor("queuebox", "Build information", None, info.metric_type())?;
        info.encode(family.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;

        let uptime = ConstGauge::new(self.started.elapsed().as_secs_f64());
        let family = encoder.encode_descriptor(
            "queuebox_uptime_seconds",
            "Seconds since the process started",
            None,
            uptime.metric_type(),
        )?;
        uptime.encode(family)?;

        let mut family = encoder.encode_descriptor(
            "queuebox_claims_lost",
            "Fenced terminal writes that found the claim lost",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for c in [Component::Outbox, Component::Inbox] {
            let labels = [("component", c.as_str())];
            ConstCounter::new(claims_lost(c)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_keeps_its_name_type_and_labels() {
        let m = Metrics::new();
        m.inc("queuebox_outbox_messages_total", &[("status", "sent")]);
        m.add(
            "queuebox_cleanup_messages_deleted_total",
            &[("table", "outbox")],
            4,
        );
        m.set("queuebox_outbox_messages_pending", &[], 3.0);
        m.gauge_add(
            "queuebox_outbox_queue_depth",
            &[("destination", "a\"b")],
            1.0,
        );
        m.observe(
            "queuebox_outbox_publish_duration_seconds",
            &[("destination_type", "http")],
            Duration::from_millis(300),
        );
        m.observe(
            "queuebox_outbox_publish_duration_seconds",
            &[("destination_type", "http")],
            Duration::from_millis(20),
        );
        let text = m.render();
        for line in [
            "# TYPE queuebox gauge",
            "queuebox{version=\"",
            "# TYPE queuebox_claims_lost_total counter",
            "queuebox_claims_lost_total{component=\"inbox\"} ",
            "# TYPE queuebox_outbox_messages_total counter",
            "queuebox_outbox_messages_total{status=\"sent\"} 1\n",
            "queuebox_cleanup_messages_deleted_total{table=\"outbox\"} 4\n",
            "queuebox_outbox_messages_pending 3",
            "queuebox_outbox_queue_depth{destination=\"a\\\"b\"} 1",
            "# TYPE queuebox_outbox_publish_duration_seconds histogram",
            "queuebox_outbox_publish_duration_seconds_bucket{destination_type=\"http\",le=\"0.25\"} 1\n",
            "queuebox_outbox_publish_duration_seconds_bucket{destination_type=\"http\",le=\"+Inf\"} 2\n",
            "queuebox_outbox_publish_duration_seconds_count{destination_type=\"http\"} 2\n",
            "# TYPE queuebox_outbox_publish_duration_seconds_max gauge",
            "queuebox_outbox_publish_duration_seconds_max{destination_type=\"http\"} 0.3\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
        // A labelled series appears only after its first use.
        assert!(!text.contains("queuebox_inbox_filtered_total{"), "{text}");
    }

    #[test]
    fn the_max_only_rises() {
        let bits = AtomicU64::new(0f64.to_bits());
        for v in [0.2, 0.5, 0.1] {
            raise(&bits, v);
        }
        assert_eq!(f64::from_bits(bits.load(Ordering::Relaxed)), 0.5);
    }
}
