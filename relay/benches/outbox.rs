//! Outbox relay benchmark: drain rows/s of the real `queuebox` binary over a sweep of
//! distinct keys × `outbox.batchSize`, to a real HTTP receiver (axum, in this process), with
//! PostgreSQL statements (transactions) and database CPU per row. Every cell runs each binary
//! three times, interleaved, and reports the median.
//!
//! - `QB_BENCH_BINS=label=<path>,label=<path>`: older `queuebox` binaries measured in the
//!   same run as this build (`CARGO_BIN_EXE_queuebox`, label `after`), interleaved, so the
//!   ratios (each binary's rate over the first one's) share the machine's state. Without it
//!   only this build is measured; a binary labelled `after` replaces this build.
//! - `QB_BENCH_ROWS` (default 5000) rows per drain; a drain stops after `QB_BENCH_SECONDS`
//!   (default 12) and its rate is the rows sent in that time (the slow cells of an old build
//!   would otherwise take minutes).
//! - `QB_BENCH_KEYS` (default `0,10,100,5000`) and `QB_BENCH_BATCHES` (default `10,100,500`):
//!   the sweep.
//! - `QB_BENCH_OUT` (default `benchmarks/results/outbox-sweep.json`).
//!
//! Needs the PostgreSQL of `scripts/postgres.sh` (`QUEUEBOX_TEST_DATABASE_URL`); each cell
//! gets a fresh database. Database CPU is the user + system time of the relay's server
//! backends (`/proc/<pid>/stat`, so the benchmark must run on the database's machine);
//! transactions come from `pg_stat_database.xact_commit`, minus the benchmark's own polls.

use std::time::{Duration, Instant};

use queuebox_core::store::postgres::PgStore;
use serde_json::json;

const CONCURRENCY: u32 = 32;
const ROUNDS: usize = 3;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn server() -> String {
    let url = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:55432/queuebox".into());
    url.rsplit_once('/').unwrap().0.to_string()
}

async fn fresh_db(tag: &str) -> (String, PgStore) {
    let url = queuebox_testkit::fresh_database(&format!("obench_{tag}")).await;
    let store = PgStore::connect(&url, 2).await.unwrap();
    let (_, name) = url.rsplit_once('/').unwrap();
    (name.to_string(), store)
}

async fn drop_db(name: &str) {
    queuebox_testkit::drop_database(&format!("{}/{name}", server())).await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The receiver: answers 200 to every POST, as fast as it can.
async fn spawn_receiver() -> u16 {
    let app = axum::Router::new().fallback(|| async { axum::http::StatusCode::OK });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

fn relay_config(db: &str, port: u16, receiver: u16, batch: u32) -> tempfile::NamedTempFile {
    // Outbox defaults except batchSize and concurrency; the inbox relay is off.
    let y = format!(
        "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {db}\n  poolSize: 16\noutbox:\n  concurrency: {CONCURRENCY}\n  batchSize: {batch}\ninbox:\n  relay:\n    enabled: false\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver}\nroutes:\n  - topicPattern: '**'\n    destination: rx\n"
    );
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), y).unwrap();
    f
}

async fn spawn_relay(bin: &str, cfg: &std::path::Path) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(bin);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        cmd.env_remove(k);
    }
    cmd.arg("--config")
        .arg(cfg)
        .arg("run")
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Rows spread round-robin over `keys` keys (0 = no key: unordered rows).
async fn insert_rows(store: &PgStore, rows: u64, keys: u64) {
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 'orders', CASE WHEN $2 = 0 THEN NULL ELSE 'k' || (g % $2) END, jsonb_build_object('n', g)
           FROM generate_series(1, $1) g",
    )
    .bind(rows as i64)
    .bind(keys as i64)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query("ANALYZE outbox")
        .execute(store.pool())
        .await
        .unwrap();
}

async fn xact_commit(admin: &PgStore, db: &str) -> i64 {
    sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
        .bind(db)
        .fetch_one(admin.pool())
        .await
        .unwrap()
}

/// User + system CPU seconds of the server backends connected to `db`, except `skip`.
async fn backend_cpu(admin: &PgStore, db: &str, skip: &[i32]) -> f64 {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
    )
    .bind(db)
    .fetch_all(admin.pool())
    .await
    .unwrap();
    let tick = 100.0; // USER_HZ on Linux
    pids.into_iter()
        .filter(|p| !skip.contains(p))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .map(|s| {
            // Fields after the ")" of the command: utime and stime are the 12th and 13th.
            let rest: Vec<&str> = s.rsplit_once(')').unwrap().1.split_whitespace().collect();
            (rest[11].parse::<f64>().unwrap() + rest[12].parse::<f64>().unwrap()) / tick
        })
        .sum()
}

#[derive(Clone, Copy, Debug)]
struct Drain {
    rows_per_s: f64,
    sent: i64,
    xacts_per_row: f64,
    db_cpu_us_per_row: f64,
}

/// One drain of `rows` rows over `keys` keys by `bin` with `batch`.
async fn drain(bin: &str, receiver: u16, keys: u64, batch: u32) -> Drain {
    let rows = env_num("QB_BENCH_ROWS", 5000);
    let limit = Duration::from_secs(env_num("QB_BENCH_SECONDS", 12));
    let (db, store) = fresh_db("sweep").await;
    let admin = PgStore::connect(&format!("{}/postgres", server()), 2)
        .await
        .unwrap();
    let port = free_port();
    let cfg = relay_config(&format!("{}/{db}", server()), port, receiver, batch);
    // Each binary migrates its own database: an older build refuses a newer schema.
    let mut migrate = tokio::process::Command::new(bin);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        migrate.env_remove(k);
    }
    let migrated = migrate
        .arg("--config")
        .arg(cfg.path())
        .arg("migrate")
        .env("RUST_LOG", "error")
        .status()
        .await
        .unwrap();
    assert!(migrated.success(), "{bin} migrate failed");
    insert_rows(&store, rows, keys).await;
    let mine: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
    )
    .bind(&db)
    .fetch_all(admin.pool())
    .await
    .unwrap();
    // The stats of our own setup statements are flushed by the time the relay is up.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let x0 = xact_commit(&admin, &db).await;
    let mut relay = spawn_relay(bin, cfg.path()).await;
    let t0 = Instant::now();
    let mut polls = 0i64;
    let mut sent: i64;
    let mut cpu = 0.0;
    loop {
        sent = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        polls += 1;
        if sent as u64 >= rows || t0.elapsed() >= limit {
            break;
        }
        // Sampled while the relay runs: its backends are gone once it exits.
        cpu = backend_cpu(&admin, &db, &mine).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu_end = backend_cpu(&admin, &db, &mine).await;
    cpu = cpu.max(cpu_end);
    relay.kill().await.unwrap();
    let _ = relay.wait().await;
    store.close().await;
    // Exiting backends flush their statistics.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let x1 = xact_commit(&admin, &db).await;
    drop_db(&db).await;
    let n = sent.max(1) as f64;
    Drain {
        rows_per_s: sent as f64 / elapsed,
        sent,
        xacts_per_row: (x1 - x0 - polls).max(0) as f64 / n,
        db_cpu_us_per_row: cpu * 1e6 / n,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let mut bins: Vec<(String, String)> = std::env::var("QB_BENCH_BINS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|b| b.split_once('='))
        .map(|(l, p)| (l.to_string(), p.to_string()))
        .collect();
    if !bins.iter().any(|(l, _)| l == "after") {
        bins.push(("after".into(), env!("CARGO_BIN_EXE_queuebox").into()));
    }
    let receiver = spawn_receiver().await;
    let list = |name: &str, default: &str| -> Vec<u64> {
        std::env::var(name)
            .unwrap_or_else(|_| default.into())
            .split(',')
            .map(|v| v.trim().parse().expect("a list of numbers"))
            .collect()
    };
    let keys_sweep = list("QB_BENCH_KEYS", "0,10,100,5000");
    let batch_sweep: Vec<u32> = list("QB_BENCH_BATCHES", "10,100,500")
        .into_iter()
        .map(|b| b as u32)
        .collect();
    let mut cells = Vec::new();
    for &keys in &keys_sweep {
        for &batch in &batch_sweep {
            let mut runs: Vec<(usize, Drain)> = Vec::new();
            for _ in 0..ROUNDS {
                for (i, (_, bin)) in bins.iter().enumerate() {
                    runs.push((i, drain(bin, receiver, keys, batch).await));
                }
            }
            let mut cell = json!({"keys": keys, "batchSize": batch});
            let mut rates = Vec::new();
            for (i, (label, _)) in bins.iter().enumerate() {
                let mine: Vec<Drain> = runs
                    .iter()
                    .filter(|(j, _)| *j == i)
                    .map(|(_, d)| *d)
                    .collect();
                let rate = median(mine.iter().map(|d| d.rows_per_s).collect());
                rates.push(rate);
                cell[label.as_str()] = json!({
                    "rowsPerSecond": rate.round(),
                    "xactsPerRow": (median(mine.iter().map(|d| d.xacts_per_row).collect()) * 100.0).round() / 100.0,
                    "dbCpuMicrosPerRow": median(mine.iter().map(|d| d.db_cpu_us_per_row).collect()).round(),
                    "rounds": mine.iter().map(|d| json!({"rowsPerSecond": d.rows_per_s.round(), "sent": d.sent,
                        "xactsPerRow": (d.xacts_per_row * 100.0).round() / 100.0, "dbCpuMicrosPerRow": d.db_cpu_us_per_row.round()})).collect::<Vec<_>>(),
                });
            }
            for (i, (label, _)) in bins.iter().enumerate().skip(1) {
                cell[format!("{label}Over{}", bins[0].0)] =
                    json!((rates[i] / rates[0] * 100.0).round() / 100.0);
            }
            eprintln!("{cell}");
            cells.push(cell);
        }
    }
    let out = json!({
        "benchmark": "outbox relay drain: keys x batchSize sweep",
        "settings": {"rows": env_num("QB_BENCH_ROWS", 5000), "secondsLimit": env_num("QB_BENCH_SECONDS", 12),
                     "concurrency": CONCURRENCY, "rounds": ROUNDS, "statistic": "median",
                     "destination": "HTTP, axum receiver answering 200 in the benchmark process",
                     "keys0": "keys = 0 means rows without a key"},
        "binaries": bins.iter().map(|(l, b)| json!({"label": l, "path": b})).collect::<Vec<_>>(),
        "cells": cells,
    });
    let path = std::env::var("QB_BENCH_OUT").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../benchmarks/results/outbox-sweep.json"
        )
        .into()
    });
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    eprintln!("wrote {path}");
}
