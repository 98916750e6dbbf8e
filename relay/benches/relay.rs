//! Relay benchmark: HTTP ingest requests/s (fresh keys and duplicates) and outbox HTTP
//! delivery rows/s, each against a baseline measured in the same run:
//! - ingest baseline: a bare axum handler doing the same `INSERT ... ON CONFLICT DO NOTHING`;
//! - delivery baseline: a plain loop that selects rows, POSTs them and marks them sent,
//!   with the same concurrency and no lease protocol; and its ceiling, the same POSTs from
//!   memory with no database.
//!
//! The whole push path (POST → receiver) is measured against a naive loop and a ceiling too,
//! in `relay_push/`.
//!
//! Ingest runs in rounds (`QB_RELAY_BENCH_ROUNDS`, default 5): each round measures every
//! variant on a fresh database, the variants' order rotating from round to round so that a
//! burst of load from elsewhere on the machine does not always land on the same one; the
//! result is the median of the rounds with their range. `QB_RELAY_BENCH_BEFORE=<path>` adds
//! an earlier `queuebox` binary as a third variant of the same rounds (before / after in one
//! run). Another variant, `relay2`, runs two relay processes on one database with the
//! clients split between them (the relay's figures with 2 replicas; `QB_RELAY_BENCH_REPLICAS=0`
//! leaves it out). `QB_RELAY_BENCH_SECONDS` sets each load's length (default 5),
//! `QB_RELAY_BENCH_DELIVERY=0` skips the delivery part.
//!
//! Writes benchmarks/results/relay-<UTC date>.json (`QB_RELAY_BENCH_OUT` names another file
//! there). Needs QUEUEBOX_TEST_DATABASE_URL's server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use queuebox_core::store::postgres::PgStore;
use serde_json::json;

#[path = "relay_push/mod.rs"]
mod push;

const CLIENTS: usize = 32;
const ROWS: usize = 3000;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seconds() -> u64 {
    env_num("QB_RELAY_BENCH_SECONDS", 5)
}

async fn fresh_db(tag: &str) -> (String, PgStore) {
    let url = queuebox_testkit::fresh_database(&format!("bench_{tag}")).await;
    let store = PgStore::connect(&url, 16).await.unwrap();
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    (url, store)
}

async fn drop_db(url: &str, store: PgStore) {
    store.close().await;
    queuebox_testkit::drop_database(url).await;
}

/// Closed-loop load: CLIENTS tasks POST for `seconds()`, spread over `urls` (the replicas);
/// `key(i)` gives each request's id.
async fn load(urls: Vec<String>, key: Arc<dyn Fn(u64) -> String + Send + Sync>) -> (f64, u64) {
    let seconds = seconds();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(seconds);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (client, n, errors, url, key) = (
            client.clone(),
            n.clone(),
            errors.clone(),
            urls[c % urls.len()].clone(),
            key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let i = n.fetch_add(1, Ordering::Relaxed);
                let body = format!(r#"{{"id":"{}","type":"created","amount":12.5}}"#, key(i));
                match client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                {
                    Ok(r) if r.status().as_u16() == 202 || r.status().as_u16() == 200 => {}
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (
        n.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
    )
}

async fn baseline_insert(State(store): State<PgStore>, body: Bytes) -> StatusCode {
    let v: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return StatusCode::BAD_REQUEST,
    };
    let key = v["id"].as_str().unwrap_or("").to_string();
    let r = sqlx::query("INSERT INTO inbox (source, idempotency_key, payload, headers) VALUES ('orders', $1, $2, '{}') ON CONFLICT ON CONSTRAINT uq_inbox_source_idempotency DO NOTHING")
        .bind(key)
        .bind(v)
        .execute(store.pool())
        .await;
    match r {
        Ok(r) if r.rows_affected() == 1 => StatusCode::ACCEPTED,
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `outbox`: the outbox relay runs; `push`: the inbox relay runs too (the whole push path).
fn relay_config(
    db: &str,
    port: u16,
    receiver: u16,
    outbox: bool,
    push: bool,
) -> tempfile::NamedTempFile {
    let y = format!(
        "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {db}\n  poolSize: 16\noutbox:\n  enabled: {outbox}\n  pollIntervalMs: 20\n  concurrency: 16\n  batchSize: 100\ninbox:\n  relay:\n    enabled: {push}\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver}\nroutes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n    topic: orders\n"
    );
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), y).unwrap();
    f
}

async fn spawn_relay(cfg: &std::path::Path, port: u16) -> tokio::process::Child {
    spawn_relay_bin(env!("CARGO_BIN_EXE_queuebox"), cfg, port).await
}

async fn spawn_relay_bin(bin: &str, cfg: &std::path::Path, port: u16) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(bin);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("QUEUEBOX_")) {
        cmd.env_remove(k);
    }
    let child = cmd
        .arg("--config")
        .arg(cfg)
        .arg("run")
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    child
}

async fn insert_rows(store: &PgStore) {
    sqlx::query("INSERT INTO outbox (topic, payload) SELECT 'orders', jsonb_build_object('n', g) FROM generate_series(1, $1) g")
        .bind(ROWS as i32)
        .execute(store.pool())
        .await
        .unwrap();
}

async fn wait_sent(store: &PgStore) -> f64 {
    let t0 = Instant::now();
    loop {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        if n as usize >= ROWS {
            return ROWS as f64 / t0.elapsed().as_secs_f64();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The delivery baseline: select a batch, POST concurrently, mark sent; no claims or leases.
async fn baseline_delivery(store: &PgStore, receiver: u16) -> f64 {
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{receiver}/");
    let t0 = Instant::now();
    while naive_pass(store, &client, &url, "outbox", "sent").await > 0 {}
    ROWS as f64 / t0.elapsed().as_secs_f64()
}

/// The delivery ceiling: the same rows POSTed from memory, 16 at a time, with no database:
/// what the receiver and this machine's HTTP stack allow, which no durable relay can beat.
async fn ceiling_delivery(receiver: u16) -> f64 {
    use futures::StreamExt;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{receiver}/");
    let t0 = Instant::now();
    futures::stream::iter(0..ROWS)
        .for_each_concurrent(16, |n| {
            let (client, url) = (&client, &url);
            async move {
                let r = client
                    .post(url)
                    .header("X-Message-Id", uuid::Uuid::new_v4().to_string())
                    .json_body(&json!({ "n": n }))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success());
            }
        })
        .await;
    ROWS as f64 / t0.elapsed().as_secs_f64()
}

/// One pass of a naive forwarder (the delivery baseline, and the push path's in
/// `relay_push`): up to 100 pending rows of `table` in sequence order, each POSTed to `url`,
/// 16 at a time, and set to `done` once the receiver answered 2xx. Returns how many rows it
/// selected.
async fn naive_pass(
    store: &PgStore,
    client: &reqwest::Client,
    url: &str,
    table: &str,
    done: &str,
) -> usize {
    use futures::StreamExt;
    let rows: Vec<(uuid::Uuid, serde_json::Value)> = sqlx::query_as(&format!(
        "SELECT id, payload FROM {table} WHERE state = 'pending' ORDER BY sequence LIMIT 100"
    ))
    .fetch_all(store.pool())
    .await
    .unwrap();
    let n = rows.len();
    let mark = format!("UPDATE {table} SET state = '{done}' WHERE id = $1");
    futures::stream::iter(rows)
        .for_each_concurrent(16, |(id, payload)| {
            let mark = &mark;
            async move {
                let ok = client
                    .post(url)
                    .header("X-Message-Id", id.to_string())
                    .json_body(&payload)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ok {
                    sqlx::query(mark)
                        .bind(id)
                        .execute(store.pool())
                        .await
                        .unwrap();
                }
            }
        })
        .await;
    n
}

trait JsonBody {
    fn json_body(self, v: &serde_json::Value) -> Self;
}
impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, v: &serde_json::Value) -> Self {
        self.header("content-type", "application/json")
            .body(serde_json::to_vec(v).unwrap())
    }
}

/// One ingest variant: a relay binary, the bare handler in this process (the load
/// generator's own runtime, as in the first measurement), or the bare handler in a process
/// of its own (this executable again, see [`serve_baseline`]), like the relay.
#[derive(Clone)]
enum Variant {
    Relay {
        name: &'static str,
        bin: String,
    },
    /// Two relay processes on one database, the clients split between them.
    Replicas {
        name: &'static str,
        bin: String,
    },
    Baseline,
    BaselineProcess,
}

impl Variant {
    fn name(&self) -> &'static str {
        match self {
            Variant::Relay { name, .. } | Variant::Replicas { name, .. } => name,
            Variant::Baseline => "baseline",
            Variant::BaselineProcess => "baselineProcess",
        }
    }
}

/// CPU seconds (user + system) the processes have used so far, from /proc; `None` for
/// none (the in-process baseline).
fn cpu_secs(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        total += fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    }
    Some(total / 100.0)
}

/// The bare handler alone, on `QB_RELAY_BENCH_BASELINE_SERVE=<port> <database url>`.
async fn serve_baseline(spec: &str) {
    let (port, url) = spec.split_once(' ').unwrap();
    let store = PgStore::connect(url, 16).await.unwrap();
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap()))
        .await
        .unwrap();
    let app = axum::Router::new()
        .route("/inbox/orders", axum::routing::post(baseline_insert))
        .with_state(store);
    axum::serve(l, app).await.unwrap();
}

struct Measured {
    fresh: f64,
    dup: f64,
    errors: u64,
    /// The server process's CPU per request (µs), fresh keys and duplicates; not for the
    /// in-process baseline.
    cpu_us: Option<(f64, f64)>,
}

/// One round of one variant on a fresh database.
async fn ingest_round(v: &Variant, rx_port: u16) -> Measured {
    let (db, store) = fresh_db("ingest").await;
    let (urls, pids, stop): (Vec<String>, Vec<u32>, Box<dyn FnOnce()>) = match v {
        Variant::Relay { bin, .. } | Variant::Replicas { bin, .. } => {
            let n = if matches!(v, Variant::Replicas { .. }) {
                2
            } else {
                1
            };
            let (mut urls, mut pids, mut held) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..n {
                let port = free_port();
                let cfg = relay_config(&db, port, rx_port, false, false);
                let relay = spawn_relay_bin(bin, cfg.path(), port).await;
                urls.push(format!("http://127.0.0.1:{port}/inbox/orders"));
                pids.extend(relay.id());
                held.push((relay, cfg));
            }
            let stop = move || {
                for (mut relay, _cfg) in held {
                    let _ = relay.start_kill();
                }
            };
            (urls, pids, Box::new(stop))
        }
        Variant::BaselineProcess => {
            let (child, port) = serve_here("QB_RELAY_BENCH_BASELINE_SERVE", &db).await;
            let pids = child.id().into_iter().collect();
            let stop = move || {
                let mut child = child;
                let _ = child.start_kill();
            };
            (
                vec![format!("http://127.0.0.1:{port}/inbox/orders")],
                pids,
                Box::new(stop),
            )
        }
        Variant::Baseline => {
            let bl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let bl_port = bl.local_addr().unwrap().port();
            let app = axum::Router::new()
                .route("/inbox/orders", axum::routing::post(baseline_insert))
                .with_state(store.clone());
            let server = tokio::spawn(async move { axum::serve(bl, app).await.unwrap() });
            (
                vec![format!("http://127.0.0.1:{bl_port}/inbox/orders")],
                Vec::new(),
                Box::new(move || server.abort()),
            )
        }
    };
    let c0 = cpu_secs(&pids);
    let (fresh, e1) = load(urls.clone(), Arc::new(|i| format!("k{i}"))).await;
    let c1 = cpu_secs(&pids);
    let (dup, e2) = load(urls, Arc::new(|i| format!("k{}", i % 1000))).await;
    let c2 = cpu_secs(&pids);
    stop();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop_db(&db, store).await;
    let secs = seconds() as f64;
    let cpu_us = match (c0, c1, c2) {
        (Some(a), Some(b), Some(c)) => {
            Some(((b - a) * 1e6 / (fresh * secs), (c - b) * 1e6 / (dup * secs)))
        }
        _ => None,
    };
    Measured {
        fresh,
        dup,
        errors: e1 + e2,
        cpu_us,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn stats(v: &[f64]) -> serde_json::Value {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    json!({"median": median(v), "min": min, "max": max, "rounds": v})
}

/// Where the results go: `QB_RELAY_BENCH_OUT` (a file name inside benchmarks/results, or
/// an absolute path), by default benchmarks/results/relay-<date>.json. Panics on a relative
/// path with a directory in it, which would land under relay/.
fn out_path() -> std::path::PathBuf {
    let dir = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/results"
    ));
    match std::env::var("QB_RELAY_BENCH_OUT") {
        Err(_) => dir.join(format!("relay-{}.json", chrono::Utc::now().format("%Y-%m-%d"))),
        Ok(v) if std::path::Path::new(&v).is_absolute() => v.into(),
        Ok(v) if !v.contains('/') => dir.join(v),
        Ok(v) => panic!("QB_RELAY_BENCH_OUT={v}: give a file name (written to benchmarks/results) or an absolute path"),
    }
}

#[tokio::main]
async fn main() {
    if let Ok(spec) = std::env::var("QB_RELAY_BENCH_BASELINE_SERVE") {
        return serve_baseline(&spec).await;
    }
    if let Ok(spec) = std::env::var("QB_RELAY_BENCH_CEILING_SERVE") {
        return push::serve_ceiling(&spec).await;
    }
    // Resolved (and checked) before minutes of measuring, not when the results are written.
    let path = out_path();
    // A receiver that answers 200 at once and counts what it received.
    let rx = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rx_port = rx.local_addr().unwrap().port();
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        let count = move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { "ok" }
        };
        axum::serve(rx, axum::Router::new().fallback(count))
            .await
            .unwrap()
    });

    // Ingest: the relay (outbox off, relay off) vs a bare axum INSERT handler, in rounds.
    let rounds = env_num("QB_RELAY_BENCH_ROUNDS", 5).max(1) as usize;
    let mut variants = vec![
        Variant::Relay {
            name: "relay",
            bin: env!("CARGO_BIN_EXE_queuebox").to_string(),
        },
        Variant::Baseline,
        Variant::BaselineProcess,
    ];
    if env_num("QB_RELAY_BENCH_REPLICAS", 1) == 1 {
        variants.push(Variant::Replicas {
            name: "relay2",
            bin: env!("CARGO_BIN_EXE_queuebox").to_string(),
        });
    }
    if let Ok(bin) = std::env::var("QB_RELAY_BENCH_BEFORE") {
        variants.push(Variant::Relay {
            name: "before",
            bin,
        });
    }
    let mut fresh: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut dup: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut cpu_fresh: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut cpu_dup: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut errors = 0;
    for round in 0..rounds {
        for k in 0..variants.len() {
            let v = &variants[(round + k) % variants.len()];
            let m = ingest_round(v, rx_port).await;
            eprintln!(
                "round {round} {:>15}: fresh {:7.0} req/s, duplicates {:7.0} req/s, errors {}, server CPU µs/request {:?}",
                v.name(),
                m.fresh,
                m.dup,
                m.errors,
                m.cpu_us
            );
            fresh.entry(v.name()).or_default().push(m.fresh);
            dup.entry(v.name()).or_default().push(m.dup);
            if let Some((f, d)) = m.cpu_us {
                cpu_fresh.entry(v.name()).or_default().push(f);
                cpu_dup.entry(v.name()).or_default().push(d);
            }
            errors += m.errors;
        }
    }
    // Per-round ratios (same round, close in time) as well as the ratio of the medians.
    let ratios = |m: &BTreeMap<&str, Vec<f64>>, a: &str, b: &str| {
        let r: Vec<f64> = m[a].iter().zip(&m[b]).map(|(x, y)| x / y).collect();
        json!({"ofMedians": median(&m[a]) / median(&m[b]), "perRound": stats(&r)})
    };
    let mut ingest = json!({ "errors": errors });
    for (part, m, cpu) in [
        ("freshKeys", &fresh, &cpu_fresh),
        ("duplicates", &dup, &cpu_dup),
    ] {
        let mut p = json!({});
        for (name, v) in m {
            p["rps"][name] = stats(v);
        }
        for (name, v) in cpu {
            p["serverCpuMicrosPerRequest"][name] = stats(v);
        }
        p["relayOverBaseline"] = ratios(m, "relay", "baseline");
        p["relayOverBaselineProcess"] = ratios(m, "relay", "baselineProcess");
        if m.contains_key("relay2") {
            p["twoReplicasOverOne"] = ratios(m, "relay2", "relay");
            p["twoReplicasOverBaseline"] = ratios(m, "relay2", "baseline");
        }
        if m.contains_key("before") {
            p["beforeOverBaseline"] = ratios(m, "before", "baseline");
            p["beforeOverBaselineProcess"] = ratios(m, "before", "baselineProcess");
            p["relayOverBefore"] = ratios(m, "relay", "before");
        }
        ingest[part] = p;
    }

    // Delivery: the relay's outbox loop vs the plain loop, ROWS rows each (one round).
    let delivery = if env_num("QB_RELAY_BENCH_DELIVERY", 1) == 0 {
        serde_json::Value::Null
    } else {
        let (db3, store3) = fresh_db("deliver").await;
        insert_rows(&store3).await;
        let port = free_port();
        let cfg = relay_config(&db3, port, rx_port, true, false);
        let t_start = Instant::now();
        let mut relay = spawn_relay(cfg.path(), port).await;
        let startup = t_start.elapsed().as_secs_f64();
        let relay_rows = wait_sent(&store3).await;
        relay.kill().await.ok();
        drop_db(&db3, store3).await;
        let (db4, store4) = fresh_db("deliverbase").await;
        insert_rows(&store4).await;
        let base_rows = baseline_delivery(&store4, rx_port).await;
        drop_db(&db4, store4).await;
        let ceiling_rows = ceiling_delivery(rx_port).await;
        json!({"relayRowsPerSec": relay_rows, "baselineRowsPerSec": base_rows, "ceilingRowsPerSec": ceiling_rows, "ratio": relay_rows / base_rows, "relayOverCeiling": relay_rows / ceiling_rows, "relayStartupSecs": startup})
    };

    let push = if env_num("QB_RELAY_BENCH_PUSH", 1) == 0 {
        serde_json::Value::Null
    } else {
        push::compare(rx_port, &received, rounds).await
    };

    let out = json!({
        "date": chrono::Utc::now().to_rfc3339(),
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "settings": {"clients": CLIENTS, "seconds": seconds(), "rounds": rounds, "variants": variants.iter().map(Variant::name).collect::<Vec<_>>(), "deliveryRows": ROWS, "outboxConcurrency": 16, "outboxBatchSize": 100},
        "ingest": ingest,
        "delivery": delivery,
        "pushPath": push,
    });
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = serde_json::to_string_pretty(&out).unwrap();
    std::fs::write(&path, &text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    println!("{text}");
}

/// Runs this bench executable again as a server on a free port (`var` = "<port> <arg>",
/// which `main` reads: the bare handler or the push path's ceiling), once it accepts
/// connections; killed when dropped.
async fn serve_here(var: &str, arg: &str) -> (tokio::process::Child, u16) {
    let port = free_port();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env(var, format!("{port} {arg}"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    (child, port)
}

/// Waits up to 30 s for a server to accept connections on `port` (a spawned relay or
/// baseline process).
async fn wait_for_port(port: u16) {
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
