//! The relay's metrics registry on the hot path: counter increments and timer observations
//! with labels, as the ingest and publish paths make them, on prometheus-client (the relay's
//! `src/metrics.rs`, compiled into this bench) against the hand-written registry it replaced
//! (`metrics_baseline.rs`), alternating in one run; and one `/metrics` render of a registry
//! with the series a busy relay has. Median of `QB_BENCH_ROUNDS` rounds (default 7) of
//! `QB_BENCH_OPS` operations (default 200,000) per round and case, on one thread and on
//! `QB_BENCH_THREADS` threads at once (default 4; wall time per message).
//!
//! `cargo bench -p queuebox --bench metrics`; writes `benchmarks/results/metrics-registry.json`
//! (`QB_BENCH_OUT` to change).

#[path = "metrics_baseline.rs"]
mod baseline;
// The relay's own module, of which the bench uses only what the hot path calls.
#[allow(dead_code, unused_imports)]
#[path = "../src/metrics.rs"]
mod metrics;

use std::hint::black_box;
use std::time::{Duration, Instant};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The calls one message makes on the ingest and outbox paths: an ingest observation, an
/// inbox outcome, a publish observation, a destination outcome and an outbox outcome.
macro_rules! per_message {
    ($m:expr, $i:expr) => {{
        let d = Duration::from_micros(($i % 5000) as u64);
        $m.observe(
            "queuebox_inbox_ingest_duration_seconds",
            &[("source", "orders")],
            d,
        );
        $m.inc("queuebox_inbox_messages_total", &[("status", "new")]);
        $m.observe(
            "queuebox_outbox_publish_duration_seconds",
            &[("destination_type", "http")],
            d,
        );
        $m.inc(
            "queuebox_outbox_destination_messages_total",
            &[("destination", "billing"), ("outcome", "success")],
        );
        $m.inc("queuebox_outbox_messages_total", &[("status", "sent")]);
    }};
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds = env("QB_BENCH_ROUNDS", 7);
    let ops = env("QB_BENCH_OPS", 200_000);
    let (new, old) = (metrics::Metrics::new(), baseline::Metrics::new());
    let (mut new_ns, mut old_ns, mut new_render, mut old_render) = (vec![], vec![], vec![], vec![]);
    let threads = env("QB_BENCH_THREADS", 4);
    let (mut new_par, mut old_par) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        for i in 0..ops {
            per_message!(old, i);
        }
        old_ns.push(t.elapsed().as_nanos() as f64 / ops as f64);
        let t = Instant::now();
        for i in 0..ops {
            per_message!(new, i);
        }
        new_ns.push(t.elapsed().as_nanos() as f64 / ops as f64);
        // The same calls from several threads at once, as the relay's runtime makes them:
        // wall time per message.
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for i in 0..ops / threads {
                        per_message!(old, i);
                    }
                });
            }
        });
        old_par.push(t.elapsed().as_nanos() as f64 / ops as f64);
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for i in 0..ops / threads {
                        per_message!(new, i);
                    }
                });
            }
        });
        new_par.push(t.elapsed().as_nanos() as f64 / ops as f64);
        let t = Instant::now();
        black_box(old.render());
        old_render.push(t.elapsed().as_nanos() as f64 / 1000.0);
        let t = Instant::now();
        black_box(new.render());
        new_render.push(t.elapsed().as_nanos() as f64 / 1000.0);
    }
    let (n, o) = (median(new_ns), median(old_ns));
    let (nr, or) = (median(new_render), median(old_render));
    let (np, op) = (median(new_par), median(old_par));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_string();
    println!(
        "per message (5 calls): prometheus-client {n:.0} ns, hand-written {o:.0} ns, ratio {:.2}",
        n / o
    );
    println!(
        "per message, {threads} threads: prometheus-client {np:.0} ns, hand-written {op:.0} ns, ratio {:.2}",
        np / op
    );
    println!(
        "render: prometheus-client {nr:.1} us, hand-written {or:.1} us, ratio {:.2}",
        nr / or
    );
    let json = serde_json::json!({
        "bench": "relay metrics registry (relay/benches/metrics.rs)",
        "rounds": rounds, "ops_per_round": ops, "loadavg_1m": load,
        "per_message_ns": {"prometheus_client": n, "hand_written": o, "ratio": n / o},
        "threads": threads,
        "per_message_ns_threads": {"prometheus_client": np, "hand_written": op, "ratio": np / op},
        "render_us": {"prometheus_client": nr, "hand_written": or, "ratio": nr / or},
    });
    let out = std::env::var("QB_BENCH_OUT").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../benchmarks/results/metrics-registry.json"
        )
        .into()
    });
    std::fs::write(&out, serde_json::to_string_pretty(&json).unwrap() + "\n").unwrap();
    println!("wrote {out}");
}
