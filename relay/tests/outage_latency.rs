//! With the database stopped, every POST is answered within
//! `database.connectionTimeoutMs` plus a small margin however many wait (it took up to
//! twice the timeout: each insert group waited out the one before it). The real `queuebox`
//! binary on a throwaway cluster of its own, stopped with `pg_ctl`; 50, then 200 concurrent
//! POSTs; the latency distribution is printed. While the relay knows the database is down (a
//! connect was refused) it answers at once: the median is under a second, not the timeout.
//! Nothing answered 503 was stored, and once the database is back every message is stored
//! exactly once when its sender retries.

mod common;

use std::time::{Duration, Instant};

use common::*;
use queuebox_core::store::postgres::PgStore;

const TIMEOUT_MS: u64 = 5000;
/// What an answer may take beyond `connectionTimeoutMs`.
const MARGIN: Duration = Duration::from_millis(1000);

const SOURCES: &str = "routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
";

/// Sends `n` POSTs at once (distinct keys `{tag}-{i}`); returns each (status, latency).
async fn burst(relay: &Relay, tag: &str, n: usize) -> Vec<(u16, Duration)> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let start = tokio::sync::Barrier::new(n);
    let start = std::sync::Arc::new(start);
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, url, start) = (client.clone(), relay.url("/inbox/orders"), start.clone());
        let body = format!(r#"{{"id":"{tag}-{i}"}}"#);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let t0 = Instant::now();
            let status = match client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .timeout(Duration::from_secs(30))
                .send()
                .await
            {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            };
            (status, t0.elapsed())
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// The slowest and the median answer.
fn distribution(label: &str, got: &[(u16, Duration)]) -> (Duration, Duration) {
    let mut ms: Vec<f64> = got.iter().map(|(_, d)| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for (s, _) in got {
        *statuses.entry(*s).or_default() += 1;
    }
    eprintln!(
        "{label}: n={} statuses={statuses:?} min={:.0} ms median={:.0} ms p99={:.0} ms max={:.0} ms",
        ms.len(),
        at(0.0),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    let mut d: Vec<Duration> = got.iter().map(|(_, d)| *d).collect();
    d.sort();
    (d[d.len() - 1], d[d.len() / 2])
}

#[tokio::test]
async fn every_post_is_answered_within_the_connection_timeout_while_the_database_is_down() {
    let cluster = Cluster::new(free_port(), "outage-latency");
    cluster.script_async("start").await;
    let rx = Receiver::start().await;
    let yaml = base_config(&cluster.url(), &rx.url()).replace(
        "  startupTimeoutMs: 60000\n",
        &format!("  startupTimeoutMs: 60000\n  connectionTimeoutMs: {TIMEOUT_MS}\n"),
    );
    let relay = Relay::start(&format!("{yaml}{SOURCES}")).await;
    let (s, b) = relay.post("/inbox/orders", r#"{"id":"before"}"#, &[]).await;
    assert_eq!(s, 202, "{b}");

    cluster.script_async("stop").await;
    let bound = Duration::from_millis(TIMEOUT_MS) + MARGIN;
    let mut failures = Vec::new();
    for (tag, n) in [("w50", 50), ("w200", 200)] {
        let got = burst(&relay, tag, n).await;
        let (max, median) = distribution(&format!("{n} concurrent POSTs, database stopped"), &got);
        if let Some((s, _)) = got.iter().find(|(s, _)| *s != 503) {
            failures.push(format!("{tag}: a POST answered {s}, not 503"));
        }
        let late = got.iter().filter(|(_, d)| *d > bound).count();
        if late > 0 {
            failures.push(format!(
                "{tag}: {late} of {n} answers took longer than connectionTimeoutMs + {MARGIN:?} ({bound:?}); the slowest {max:?}"
            ));
        }
        if median > Duration::from_secs(1) {
            failures.push(format!(
                "{tag}: the median answer took {median:?}: not at once although the database is known to be down"
            ));
        }
    }

    // Back: the senders retry, and each message is stored once.
    cluster.script_async("start").await;
    eventually("ingest recovers", 30, || async {
        relay
            .post("/inbox/orders", r#"{"id":"after"}"#, &[])
            .await
            .0
            == 202
    })
    .await;
    let store = PgStore::connect(&cluster.url(), 2).await.unwrap();
    let stored_503 = scalar_i64(
        &store,
        "SELECT count(*) FROM inbox WHERE idempotency_key LIKE 'w%'",
    )
    .await;
    assert_eq!(stored_503, 0, "a message answered 503 was stored");
    for (tag, n) in [("w50", 50), ("w200", 200)] {
        let got = burst(&relay, tag, n).await;
        assert!(got.iter().all(|(s, _)| *s == 202), "{tag} retried: {got:?}");
    }
    let stored = scalar_i64(
        &store,
        "SELECT count(DISTINCT idempotency_key) FROM inbox WHERE idempotency_key LIKE 'w%'",
    )
    .await;
    let rows = scalar_i64(
        &store,
        "SELECT count(*) FROM inbox WHERE idempotency_key LIKE 'w%'",
    )
    .await;
    assert_eq!((stored, rows), (250, 250));
    store.close().await;
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
