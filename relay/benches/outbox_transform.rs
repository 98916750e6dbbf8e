//! What a route transform costs the outbox relay: drain rows/s of the real
//! `queuebox` binary to a real HTTP receiver (axum, in this process), with and without a
//! typical reshaping transform on the route, interleaved in one run (rounds of each, the
//! order alternating, a fresh database per drain), reported as medians and their ratio.
//!
//! - `QB_BENCH_ROWS` (default 5000) rows per drain; `QB_BENCH_ROUNDS` (default 5) rounds.
//! - `QB_BENCH_OUT` (default `benchmarks/results/outbox-transform.json`).
//!
//! Needs the PostgreSQL of `scripts/postgres.sh` (`QUEUEBOX_TEST_DATABASE_URL`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::store::postgres::PgStore;
use serde_json::json;

/// A transform of the usual kind: pick fields, compute a total, add the
/// context variables.
const TRANSFORM: &str = r#"{"orderId": id, "customer": customer.name, "total": $sum(items.(price * qty)), "lines": $count(items), "attempt": $attempt, "topic": $topic, "at": $timestamp}"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Counts the requests that reach it; answers 200.
async fn spawn_receiver() -> (u16, Arc<AtomicU64>) {
    let got = Arc::new(AtomicU64::new(0));
    let counter = got.clone();
    let app = axum::Router::new().fallback(move || {
        let c = counter.clone();
        async move {
            c.fetch_add(1, Ordering::Relaxed);
            axum::http::StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, got)
}

/// One drain: a fresh database with `rows` rows, the relay started, the time until the
/// receiver has them all. Returns rows/s.
async fn drain(rows: u64, with_transform: bool) -> f64 {
    let db = queuebox_testkit::fresh_database("tbench").await;
    let store = PgStore::connect(&db, 2).await.unwrap();
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    sqlx::query(
        "INSERT INTO outbox (topic, payload)
         SELECT 'orders.created', jsonb_build_object('id', g, 'customer', jsonb_build_object('name', 'c' || g),
                'items', jsonb_build_array(jsonb_build_object('price', 2.5, 'qty', 2), jsonb_build_object('price', 4, 'qty', 1)))
           FROM generate_series(1, $1) g",
    )
    .bind(rows as i64)
    .execute(store.pool())
    .await
    .unwrap();
    let (rport, got) = spawn_receiver().await;
    let transform = if with_transform {
        format!("    transform:\n      expression: '{TRANSFORM}'\n")
    } else {
        String::new()
    };
    let yaml = format!(
        "server:\n  httpPort: {}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {db}\n  poolSize: 16\noutbox:\n  concurrency: 32\ninbox:\n  relay:\n    enabled: false\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{rport}\nroutes:\n  - topicPattern: '**'\n    destination: rx\n{transform}",
        free_port()
    );
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(cfg.path(), yaml).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_queuebox"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        cmd.env_remove(k);
    }
    let t0 = Instant::now();
    let mut child = cmd
        .arg("--config")
        .arg(cfg.path())
        .arg("run")
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The first delivery starts the clock, so start-up and migration are not counted.
    while got.load(Ordering::Relaxed) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "nothing delivered");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let t1 = Instant::now();
    let first = got.load(Ordering::Relaxed);
    while got.load(Ordering::Relaxed) < rows {
        assert!(t1.elapsed() < Duration::from_secs(300), "drain stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rate = (rows - first) as f64 / t1.elapsed().as_secs_f64();
    let _ = child.kill().await;
    store.close().await;
    queuebox_testkit::drop_database(&db).await;
    rate
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

#[tokio::main]
async fn main() {
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rows = env("QB_BENCH_ROWS", 5000);
    let rounds = env("QB_BENCH_ROUNDS", 5) as usize;
    let (mut plain, mut shaped) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Interleaved, and the order alternates, so drift favours neither.
        let first_with = round % 2 == 1;
        for with in [first_with, !first_with] {
            let r = drain(rows, with).await;
            println!("round {round} transform={with}: {r:.0} rows/s");
            if with {
                shaped.push(r)
            } else {
                plain.push(r)
            }
        }
    }
    let (p, t) = (median(&plain), median(&shaped));
    let out = json!({
        "benchmark": "outbox drain rows/s, route transform vs none (relay/benches/outbox_transform.rs)",
        "rows": rows,
        "rounds": rounds,
        "transform": TRANSFORM,
        "without_transform_rows_per_s": plain,
        "with_transform_rows_per_s": shaped,
        "median_without": p,
        "median_with": t,
        "ratio_with_over_without": t / p,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
    let path = std::env::var("QB_BENCH_OUT").unwrap_or_else(|_| {
        format!(
            "{}/../benchmarks/results/outbox-transform.json",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("written to {path}");
}
