//! Outbox publish → delivery latency of the real `queuebox` binary to a real HTTP receiver
//! (axum, in this process): a row is inserted (autocommit) every `QB_BENCH_GAP_MS` (default
//! 20) and the latency is from the INSERT's return to the receiver's arrival, both on this
//! process's clock. Compared in the same run, per `outbox.pollIntervalMs` (100, the default,
//! and 1000):
//! - `listen`: migration 0004's trigger notifies `queuebox_outbox` and the relay wakes on it;
//! - `poll`: the same binary and configuration with the trigger dropped, so only polling
//!   finds the rows.
//!
//! Three rounds of `QB_BENCH_LATENCY_ROWS` (default 200) rows each, interleaved; the report
//! gives each round's p50/p99 and their medians. Writes `QB_BENCH_OUT` (default
//! benchmarks/results/outbox-latency.json). Needs the PostgreSQL of `scripts/postgres.sh`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use queuebox_core::store::postgres::PgStore;
use serde_json::json;

const ROUNDS: usize = 3;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// When each row (by its payload's `n`) reached the receiver.
type Arrivals = Arc<Mutex<HashMap<i64, Instant>>>;

async fn receive(State(got): State<Arrivals>, body: Bytes) -> StatusCode {
    let at = Instant::now();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) {
        if let Some(n) = v["n"].as_i64() {
            got.lock().unwrap().insert(n, at);
        }
    }
    StatusCode::OK
}

async fn spawn_receiver(got: Arrivals) -> u16 {
    let app = axum::Router::new().fallback(receive).with_state(got);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One round: a fresh database, the relay, `rows` single-row inserts; returns latencies (ms).
async fn round(bin: &str, listen: bool, poll_ms: u64) -> Vec<f64> {
    let rows = env_num("QB_BENCH_LATENCY_ROWS", 200) as i64;
    let gap = Duration::from_millis(env_num("QB_BENCH_GAP_MS", 20));
    let url = queuebox_testkit::fresh_database("olat").await;
    let store = PgStore::connect(&url, 2).await.unwrap();
    let got: Arrivals = Default::default();
    let receiver = spawn_receiver(got.clone()).await;
    let port = free_port();
    let y = format!(
        "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {url}\n  poolSize: 8\noutbox:\n  pollIntervalMs: {poll_ms}\ninbox:\n  relay:\n    enabled: false\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver}\nroutes:\n  - topicPattern: '**'\n    destination: rx\n"
    );
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(cfg.path(), y).unwrap();
    // The binary migrates its own database (a build refuses a schema newer than it knows).
    let mut migrate = tokio::process::Command::new(bin);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        migrate.env_remove(k);
    }
    let migrated = migrate
        .arg("--config")
        .arg(cfg.path())
        .arg("migrate")
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(migrated.success(), "{bin} migrate failed");
    if !listen {
        sqlx::query("DROP TRIGGER trg_outbox_notify ON outbox")
            .execute(store.pool())
            .await
            .unwrap();
    }
    let mut cmd = tokio::process::Command::new(bin);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        cmd.env_remove(k);
    }
    let mut relay = cmd
        .arg("--config")
        .arg(cfg.path())
        .arg("run")
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut published = HashMap::new();
    let mut tick = tokio::time::interval(gap);
    for n in 0..rows {
        tick.tick().await;
        sqlx::query(
            "INSERT INTO outbox (topic, payload) VALUES ('t', jsonb_build_object('n', $1::bigint))",
        )
        .bind(n)
        .execute(store.pool())
        .await
        .unwrap();
        published.insert(n, Instant::now());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.lock().unwrap().len() < rows as usize && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.kill().await.unwrap();
    let _ = relay.wait().await;
    store.close().await;
    queuebox_testkit::drop_database(&url).await;
    let got = got.lock().unwrap();
    assert_eq!(got.len(), rows as usize, "every row delivered within 30 s");
    let mut ms: Vec<f64> = published
        .iter()
        .map(|(n, t)| {
            got[n]
                .checked_duration_since(*t)
                .unwrap_or_default()
                .as_secs_f64()
                * 1000.0
        })
        .collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ms
}

#[tokio::main]
async fn main() {
    let bin =
        std::env::var("QB_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_queuebox").into());
    let modes: Vec<(&str, bool, u64)> = vec![
        ("listen", true, 100),
        ("poll", false, 100),
        ("listen", true, 1000),
        ("poll", false, 1000),
    ];
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); modes.len()];
    for _ in 0..ROUNDS {
        for (i, (_, listen, poll)) in modes.iter().enumerate() {
            let ms = round(&bin, *listen, *poll).await;
            results[i].push((percentile(&ms, 0.5), percentile(&ms, 0.99)));
        }
    }
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    let mut out_modes = Vec::new();
    for (i, (mode, _, poll)) in modes.iter().enumerate() {
        let p50 = median(results[i].iter().map(|r| r.0).collect());
        let p99 = median(results[i].iter().map(|r| r.1).collect());
        let m = json!({"mode": mode, "pollIntervalMs": poll, "p50Ms": r2(p50), "p99Ms": r2(p99),
            "rounds": results[i].iter().map(|(a, b)| json!({"p50Ms": r2(*a), "p99Ms": r2(*b)})).collect::<Vec<_>>()});
        eprintln!("{m}");
        out_modes.push(m);
    }
    // listen over poll, per poll interval (same run).
    let mut ratios = Vec::new();
    for pair in out_modes.chunks(2) {
        ratios.push(json!({
            "pollIntervalMs": pair[0]["pollIntervalMs"],
            "p50ListenOverPoll": r2(pair[0]["p50Ms"].as_f64().unwrap() / pair[1]["p50Ms"].as_f64().unwrap()),
            "p99ListenOverPoll": r2(pair[0]["p99Ms"].as_f64().unwrap() / pair[1]["p99Ms"].as_f64().unwrap()),
        }));
    }
    let out = json!({
        "benchmark": "outbox publish -> HTTP delivery latency: LISTEN wake-up vs polling",
        "settings": {"rowsPerRound": env_num("QB_BENCH_LATENCY_ROWS", 200), "gapMs": env_num("QB_BENCH_GAP_MS", 20),
                     "rounds": ROUNDS, "statistic": "median of the rounds' percentiles",
                     "publish": "single-row autocommit INSERT; latency from its return to the receiver's arrival",
                     "poll": "the same binary with migration 0004's trigger dropped", "binary": bin},
        "modes": out_modes,
        "ratios": ratios,
    });
    let path = std::env::var("QB_BENCH_OUT").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../benchmarks/results/outbox-latency.json"
        )
        .into()
    });
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    eprintln!("wrote {path}");
}
