//! The baseline of `benches/metrics.rs`: the relay's hand-written registry as it was before
//! prometheus-client (relay/src/metrics.rs at 3e17868), kept verbatim but for this comment so
//! that the cost of the replacement is measured against it in the same run.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuebox_core::metrics::{claims_lost, Component};

type Labels = Vec<(&'static str, String)>;

/// The upper bounds (seconds) of every timer's buckets: Prometheus' default buckets, which
/// span a local insert (ms) to a slow publish (s), plus 30 s and 60 s for the longest
/// destination timeouts and retention runs. `+Inf` is implied.
pub const BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// One timer series: a count per bucket (not cumulative; summed when rendered), the total
/// count and sum, and the largest sample.
#[derive(Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
    max: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if let Some(i) = BUCKETS.iter().position(|le| v <= *le) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }
}

/// Every metric the relay exports.
pub struct Metrics {
    started: Instant,
    counters: Mutex<BTreeMap<(&'static str, Labels), f64>>,
    gauges: Mutex<BTreeMap<(&'static str, Labels), f64>>,
    histograms: Mutex<BTreeMap<(&'static str, Labels), Histogram>>,
}

const HELP: &[(&str, &str, &str)] = &[
    ("queuebox", "gauge", "Build information"),
    (
        "queuebox_uptime_seconds",
        "gauge",
        "Seconds since the process started",
    ),
    (
        "queuebox_outbox_messages_total",
        "counter",
        "Outbox outcomes: sent, failed (retry scheduled), dead",
    ),
    (
        "queuebox_outbox_messages_pending",
        "gauge",
        "Pending outbox rows",
    ),
    (
        "queuebox_outbox_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending outbox row",
    ),
    (
        "queuebox_inbox_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending push inbox row (the inbox relay's backlog)",
    ),
    (
        "queuebox_inbox_pull_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending pull inbox row (waiting for application workers)",
    ),
    (
        "queuebox_outbox_messages_reclaimed_total",
        "counter",
        "Outbox rows returned to pending after an expired claim",
    ),
    (
        "queuebox_inbox_messages_reclaimed_total",
        "counter",
        "Push inbox rows returned to pending after an expired claim",
    ),
    (
        "queuebox_claims_lost_total",
        "counter",
        "Fenced terminal writes that found the claim lost",
    ),
    (
        "queuebox_outbox_process_errors_total",
        "counter",
        "Unexpected errors processing one outbox message",
    ),
    (
        "queuebox_outbox_processing_duration_seconds",
        "histogram",
        "Time to process one outbox message",
    ),
    (
        "queuebox_outbox_publish_duration_seconds",
        "histogram",
        "Time to publish one outbox message",
    ),
    (
        "queuebox_outbox_claim_duration_seconds",
        "histogram",
        "Time to claim one outbox batch",
    ),
    (
        "queuebox_inbox_claim_duration_seconds",
        "histogram",
        "Time to claim one batch of push inbox rows",
    ),
    (
        "queuebox_inbox_ingest_duration_seconds",
        "histogram",
        "Time to answer one HTTP source request (read, check, store)",
    ),
    (
        "queuebox_outbox_destination_messages_total",
        "counter",
        "Publishes per destination and outcome",
    ),
    (
        "queuebox_outbox_queue_depth",
        "gauge",
        "Messages being published to a destination now",
    ),
    (
        "queuebox_http_publish_responses_total",
        "counter",
        "HTTP destination responses by status class",
    ),
    (
        "queuebox_inbox_filtered_total",
        "counter",
        "Inbox messages a source's header filter dropped, by source",
    ),
    (
        "queuebox_inbox_messages_total",
        "counter",
        "Inbox outcomes: new, duplicate, forwarded",
    ),
    (
        "queuebox_inbox_relay_errors_total",
        "counter",
        "Inbox relay failures",
    ),
    (
        "queuebox_inbox_rejections_total",
        "counter",
        "Rejected inbox messages by reason",
    ),
    (
        "queuebox_transform_failures_total",
        "counter",
        "Transform failures by stage (source, route, destination) and onError strategy",
    ),
    (
        "queuebox_cleanup_messages_deleted_total",
        "counter",
        "Rows deleted by retention",
    ),
    (
        "queuebox_cleanup_duration_seconds",
        "histogram",
        "Duration of one retention run",
    ),
    (
        "queuebox_cleanup_last_run_timestamp",
        "gauge",
        "Unix seconds of the last retention run",
    ),
    (
        "queuebox_db_pool_connections",
        "gauge",
        "Database pool connections by state",
    ),
];

fn labels(l: &[(&'static str, &str)]) -> Labels {
    l.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            started: Instant::now(),
            counters: Mutex::default(),
            gauges: Mutex::default(),
            histograms: Mutex::default(),
        }
    }

    pub fn inc(&self, name: &'static str, l: &[(&'static str, &str)]) {
        self.add(name, l, 1.0);
    }

    pub fn add(&self, name: &'static str, l: &[(&'static str, &str)], v: f64) {
        *self
            .counters
            .lock()
            .expect("metrics")
            .entry((name, labels(l)))
            .or_default() += v;
    }

    pub fn set(&self, name: &'static str, l: &[(&'static str, &str)], v: f64) {
        self.gauges
            .lock()
            .expect("metrics")
            .insert((name, labels(l)), v);
    }

    pub fn gauge_add(&self, name: &'static str, l: &[(&'static str, &str)], v: f64) {
        *self
            .gauges
            .lock()
            .expect("metrics")
            .entry((name, labels(l)))
            .or_default() += v;
    }

    pub fn observe(&self, name: &'static str, l: &[(&'static str, &str)], d: Duration) {
        self.histograms
            .lock()
            .expect("metrics")
            .entry((name, labels(l)))
            .or_default()
            .observe(d.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut series: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let fmt_labels = |l: &Labels, extra: Option<(&str, &str)>| {
            let mut parts: Vec<String> = l
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            if let Some((k, v)) = extra {
                parts.push(format!("{k}=\"{v}\""));
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", parts.join(","))
            }
        };
        series.entry("queuebox").or_default().push(format!(
            "queuebox{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ));
        series
            .entry("queuebox_uptime_seconds")
            .or_default()
            .push(format!(
                "queuebox_uptime_seconds {}",
                self.started.elapsed().as_secs_f64()
            ));
        for c in [Component::Outbox, Component::Inbox] {
            series
                .entry("queuebox_claims_lost_total")
                .or_default()
                .push(format!(
                    "queuebox_claims_lost_total{{component=\"{}\"}} {}",
                    c.as_str(),
                    claims_lost(c)
                ));
        }
        for ((name, l), v) in self.counters.lock().expect("metrics").iter() {
            series
                .entry(name)
                .or_default()
                .push(format!("{name}{} {v}", fmt_labels(l, None)));
        }
        for ((name, l), v) in self.gauges.lock().expect("metrics").iter() {
            series
                .entry(name)
                .or_default()
                .push(format!("{name}{} {v}", fmt_labels(l, None)));
        }
        let mut maxes: Vec<(String, String)> = Vec::new();
        for ((name, l), s) in self.histograms.lock().expect("metrics").iter() {
            let out = series.entry(name).or_default();
            let mut cumulative = 0;
            for (le, n) in BUCKETS.iter().zip(s.buckets) {
                cumulative += n;
                out.push(format!(
                    "{name}_bucket{} {cumulative}",
                    fmt_labels(l, Some(("le", &le.to_string())))
                ));
            }
            out.push(format!(
                "{name}_bucket{} {}",
                fmt_labels(l, Some(("le", "+Inf"))),
                s.count
            ));
            out.push(format!("{name}_count{} {}", fmt_labels(l, None), s.count));
            out.push(format!("{name}_sum{} {}", fmt_labels(l, None), s.sum));
            maxes.push((
                format!("{name}_max"),
                format!("{name}_max{} {}", fmt_labels(l, None), s.max),
            ));
        }
        let mut text = String::new();
        for (name, lines) in &series {
            let (kind, help) = HELP
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, k, h)| (*k, *h))
                .unwrap_or(("untyped", ""));
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for l in lines {
                let _ = writeln!(text, "{l}");
            }
            let max_name = format!("{name}_max");
            let max_lines: Vec<_> = maxes.iter().filter(|(n, _)| *n == max_name).collect();
            if !max_lines.is_empty() {
                let _ = writeln!(
                    text,
                    "# HELP {max_name} Maximum of {name}\n# TYPE {max_name} gauge"
                );
                for (_, l) in max_lines {
                    let _ = writeln!(text, "{l}");
                }
            }
        }
        text
    }
}
