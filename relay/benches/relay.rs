//! Relay benchmark: HTTP ingest requests/s (fresh keys and duplicates) and outbox HTTP
//! delivery rows/s, each against a baseline measured in the same run:
//! - ingest baseline: a bare axum handler doing the same `INSERT ... ON CONFLICT DO NOTHING`;
//! - delivery baseline: a plain loop that selects rows, POSTs them and marks them sent,
//!   with the same concurrency and no lease protocol.
//!
//! Writes benchmarks/results/relay.json. Needs QUEUEBOX_TEST_DATABASE_URL's server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use queuebox_core::store::postgres::PgStore;
use serde_json::json;

const CLIENTS: usize = 32;
const SECONDS: u64 = 5;
const ROWS: usize = 3000;

fn server() -> String {
    let url = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:55432/queuebox".into());
    url.rsplit_once('/').unwrap().0.to_string()
}

async fn fresh_db(tag: &str) -> (String, PgStore) {
    let name = format!(
        "qb_bench_{tag}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let admin = PgStore::connect(&format!("{}/postgres", server()), 2)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(admin.pool())
        .await
        .unwrap();
    let url = format!("{}/{name}", server());
    let store = PgStore::connect(&url, 16).await.unwrap();
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    (url, store)
}

/// Closed-loop load: CLIENTS tasks POST for SECONDS; `key(i)` gives each request's id.
async fn load(url: String, key: Arc<dyn Fn(u64) -> String + Send + Sync>) -> (f64, u64) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(SECONDS);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (client, n, errors, url, key) = (
            client.clone(),
            n.clone(),
            errors.clone(),
            url.clone(),
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

fn relay_config(db: &str, port: u16, receiver: u16, outbox: bool) -> tempfile::NamedTempFile {
    let y = format!(
        "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {db}\n  poolSize: 16\noutbox:\n  enabled: {outbox}\n  pollIntervalMs: 20\n  concurrency: 16\n  batchSize: 100\ninbox:\n  relay:\n    enabled: false\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver}\nroutes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n    topic: orders\n"
    );
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), y).unwrap();
    f
}

async fn spawn_relay(cfg: &std::path::Path, port: u16) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_queuebox"));
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
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    use futures::StreamExt;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{receiver}/");
    let t0 = Instant::now();
    loop {
        let rows: Vec<(uuid::Uuid, serde_json::Value)> = sqlx::query_as(
            "SELECT id, payload FROM outbox WHERE state = 'pending' ORDER BY sequence LIMIT 100",
        )
        .fetch_all(store.pool())
        .await
        .unwrap();
        if rows.is_empty() {
            return ROWS as f64 / t0.elapsed().as_secs_f64();
        }
        futures::stream::iter(rows)
            .for_each_concurrent(16, |(id, payload)| {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    let ok = client
                        .post(&url)
                        .header("X-Message-Id", id.to_string())
                        .json_body(&payload)
                        .send()
                        .await
                        .map(|r| r.status().is_success())
                        .unwrap_or(false);
                    if ok {
                        sqlx::query("UPDATE outbox SET state = 'sent' WHERE id = $1")
                            .bind(id)
                            .execute(store.pool())
                            .await
                            .unwrap();
                    }
                }
            })
            .await;
    }
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

#[tokio::main]
async fn main() {
    // A receiver that answers 200 at once.
    let rx = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rx_port = rx.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(rx, axum::Router::new().fallback(|| async { "ok" }))
            .await
            .unwrap()
    });

    // Ingest: the relay (outbox off, relay off) vs a bare axum INSERT handler.
    let (db, _store) = fresh_db("ingest").await;
    let port = free_port();
    let cfg = relay_config(&db, port, rx_port, false);
    let mut relay = spawn_relay(cfg.path(), port).await;
    let url = format!("http://127.0.0.1:{port}/inbox/orders");
    let (relay_fresh, e1) = load(url.clone(), Arc::new(|i| format!("k{i}"))).await;
    let (relay_dup, e2) = load(url, Arc::new(|i| format!("k{}", i % 1000))).await;
    relay.kill().await.ok();

    let (db2, store2) = fresh_db("baseline").await;
    let _ = db2;
    let bl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bl_port = bl.local_addr().unwrap().port();
    let app = axum::Router::new()
        .route("/inbox/orders", axum::routing::post(baseline_insert))
        .with_state(store2.clone());
    tokio::spawn(async move { axum::serve(bl, app).await.unwrap() });
    let burl = format!("http://127.0.0.1:{bl_port}/inbox/orders");
    let (base_fresh, e3) = load(burl.clone(), Arc::new(|i| format!("k{i}"))).await;
    let (base_dup, e4) = load(burl, Arc::new(|i| format!("k{}", i % 1000))).await;

    // Delivery: the relay's outbox loop vs the plain loop, ROWS rows each.
    let (db3, store3) = fresh_db("deliver").await;
    insert_rows(&store3).await;
    let port = free_port();
    let cfg = relay_config(&db3, port, rx_port, true);
    let t_start = Instant::now();
    let mut relay = spawn_relay(cfg.path(), port).await;
    let startup = t_start.elapsed().as_secs_f64();
    let relay_rows = wait_sent(&store3).await;
    relay.kill().await.ok();
    let (_, store4) = fresh_db("deliverbase").await;
    insert_rows(&store4).await;
    let base_rows = baseline_delivery(&store4, rx_port).await;

    let out = json!({
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "settings": {"clients": CLIENTS, "seconds": SECONDS, "deliveryRows": ROWS, "outboxConcurrency": 16, "outboxBatchSize": 100},
        "ingest": {
            "freshKeys": {"relayRps": relay_fresh, "baselineRps": base_fresh, "ratio": relay_fresh / base_fresh, "errors": e1 + e3},
            "duplicates": {"relayRps": relay_dup, "baselineRps": base_dup, "ratio": relay_dup / base_dup, "errors": e2 + e4},
        },
        "delivery": {"relayRowsPerSec": relay_rows, "baselineRowsPerSec": base_rows, "ratio": relay_rows / base_rows, "relayStartupSecs": startup},
    });
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../benchmarks/results");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        format!("{dir}/relay.json"),
        serde_json::to_string_pretty(&out).unwrap(),
    )
    .unwrap();
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
