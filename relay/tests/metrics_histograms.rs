//! `/metrics` of the real `queuebox` binary after traffic: the whole scrape parses as
//! Prometheus text, and every timer is a histogram (cumulative `_bucket{le}` series ending in
//! `+Inf` = `_count`, `_sum`, and the `_max` gauge) under its documented name and
//! labels: ingest, inbox and outbox claims, outbox processing and publish. The publish
//! sample of a receiver that answers after 300 ms lands above the 0.25 s bucket. Real
//! PostgreSQL and a real HTTP receiver.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;

const SOURCES: &str = "
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: 'orders.created'
";

/// One sample line: name, labels (sorted), value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the text exposition; panics on a line that is neither a comment nor a sample.
fn parse(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            types.insert(name.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let labels = body
                    .split("\",")
                    .map(|kv| {
                        let (k, v) = kv.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name: {line}"
        );
        samples.push((name, labels, value));
    }
    (types, samples)
}

/// Checks one histogram series (`family` with `labels`) and returns its `(count, buckets)`.
fn histogram(
    types: &BTreeMap<String, String>,
    samples: &[Sample],
    family: &str,
    labels: &[(&str, &str)],
) -> (f64, Vec<(f64, f64)>) {
    assert_eq!(
        types.get(family).map(String::as_str),
        Some("histogram"),
        "{family}"
    );
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let value = |name: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && *l == want)
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("no {name}{want:?}"))
    };
    let count = value(&format!("{family}_count"));
    assert!(value(&format!("{family}_sum")) >= 0.0);
    assert!(value(&format!("{family}_max")) >= 0.0);
    assert_eq!(types.get(&format!("{family}_max")).unwrap(), "gauge");
    let mut buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(n, l, _)| {
            *n == format!("{family}_bucket") && {
                let mut l = l.clone();
                l.remove("le");
                l == want
            }
        })
        .map(|(_, l, v)| {
            let le = match l["le"].as_str() {
                "+Inf" => f64::INFINITY,
                le => le.parse().unwrap(),
            };
            (le, *v)
        })
        .collect();
    assert!(buckets.len() > 5, "{family}: {buckets:?}");
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "{family}: bounds ascend and counts are cumulative: {buckets:?}"
    );
    let inf = buckets.pop().unwrap();
    assert_eq!(inf, (f64::INFINITY, count), "{family}: +Inf is _count");
    (count, buckets)
}

#[tokio::test]
async fn timers_are_histograms_after_traffic() {
    let (url, _store) = fresh_db("metrics_histograms").await;
    let rx = Receiver::start().await;
    rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_millis(300));
    let relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;
    assert_eq!(
        relay.post("/inbox/orders", r#"{"id":"m-1"}"#, &[]).await.0,
        202
    );
    assert_eq!(relay.post("/inbox/orders", "not json", &[]).await.0, 400);
    eventually("the message is delivered", 20, || async {
        !rx.to("/hooks").is_empty()
    })
    .await;
    // The outcome is counted after the delivery answers; wait for it in the scrape.
    eventually("the publish is counted", 20, || async {
        relay
            .metric("queuebox_outbox_messages_total{status=\"sent\"}")
            .await
            == 1.0
    })
    .await;

    let (status, text) = relay.get("/metrics").await;
    assert_eq!(status, 200);
    let (types, samples) = parse(&text);

    let (count, _) = histogram(
        &types,
        &samples,
        "queuebox_inbox_ingest_duration_seconds",
        &[("source", "orders")],
    );
    assert_eq!(count, 2.0, "both requests, the refused one too");
    let (count, buckets) = histogram(
        &types,
        &samples,
        "queuebox_outbox_publish_duration_seconds",
        &[("destination_type", "http")],
    );
    assert_eq!(count, 1.0);
    let at = |le: f64| buckets.iter().find(|b| b.0 == le).unwrap().1;
    assert_eq!(
        at(0.25),
        0.0,
        "a 300 ms publish is above 0.25 s: {buckets:?}"
    );
    assert_eq!(at(60.0), 1.0, "{buckets:?}");
    let (count, _) = histogram(
        &types,
        &samples,
        "queuebox_outbox_processing_duration_seconds",
        &[],
    );
    assert_eq!(count, 1.0);
    for claim in [
        "queuebox_outbox_claim_duration_seconds",
        "queuebox_inbox_claim_duration_seconds",
    ] {
        let (count, _) = histogram(&types, &samples, claim, &[]);
        assert!(count >= 1.0, "{claim}");
    }
    // No summary is left.
    assert!(!types.values().any(|k| k == "summary"), "{types:?}");
    assert!(!text.contains("quantile="));
}
