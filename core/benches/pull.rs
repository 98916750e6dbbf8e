//! Pull-worker benchmark (a bench binary, not a timed test):
//!
//! 1. claim + complete throughput (rows/s) of the core [`Worker`] for batch 1/10/100 and
//!    1/4/16 concurrent handlers, against a baseline on the same database in the same run:
//!    a plain loop of `UPDATE … FOR UPDATE SKIP LOCKED` claims and per-row `UPDATE`
//!    completions (no lease, no fence, no aggregate rule, no renewal);
//! 2. insert → handler latency p50/p99 with LISTEN/NOTIFY on, against the same worker
//!    polling every 100 ms with LISTEN off.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench pull`
//! (`QB_BENCH_ROWS` sets the rows per throughput run; default 4000). Writes
//! benchmarks/results/pull.json.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::{Outcome, Worker, WorkerOptions};
use serde_json::json;
use sqlx::PgPool;

mod support;
use support::{drain, fresh_database};

async fn seed(pool: &PgPool, rows: usize) {
    sqlx::query("TRUNCATE inbox").execute(pool).await.unwrap();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $1) g",
    )
    .bind(rows as i64)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(pool)
        .await
        .unwrap();
}

async fn worker_run(url: &str, pool: &PgPool, rows: usize, batch: u32, conc: u32) -> f64 {
    seed(pool, rows).await;
    let w = Worker::connect(
        url,
        WorkerOptions {
            batch_size: Some(batch),
            concurrency: conc,
            poll_interval: Duration::from_millis(20),
            ..WorkerOptions::new("bench")
        },
    )
    .await
    .unwrap();
    let secs = drain(&w, rows, Arc::new(AtomicUsize::new(0))).await;
    let st = w.stats();
    if std::env::var("QB_BENCH_ONLY").is_ok() {
        println!(
            "claims {} rows {} rows/claim {:.1}",
            st.claims,
            st.claimed,
            st.claimed as f64 / st.claims.max(1) as f64
        );
    }
    let processed: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state = 'processed'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(processed as usize, rows, "every row processed");
    rows as f64 / secs
}

async fn baseline_run(url: &str, pool: &PgPool, rows: usize, batch: u32, conc: u32) -> f64 {
    seed(pool, rows).await;
    let bp = sqlx::postgres::PgPoolOptions::new()
        .max_connections(conc + 1)
        .connect(url)
        .await
        .unwrap();
    let start = Instant::now();
    let mut js = tokio::task::JoinSet::new();
    for _ in 0..conc {
        let bp = bp.clone();
        js.spawn(async move {
            loop {
                let ids: Vec<uuid::Uuid> = sqlx::query_scalar(
                    "UPDATE inbox SET state = 'processing' WHERE id IN (
                         SELECT id FROM inbox WHERE source = 'bench' AND state = 'pending'
                          ORDER BY sequence LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING id",
                )
                .bind(batch as i64)
                .fetch_all(&bp)
                .await
                .unwrap();
                if ids.is_empty() {
                    return;
                }
                for id in ids {
                    sqlx::query(
                        "UPDATE inbox SET state = 'processed', processed_at = now() WHERE id = $1",
                    )
                    .bind(id)
                    .execute(&bp)
                    .await
                    .unwrap();
                }
            }
        });
    }
    while js.join_next().await.is_some() {}
    rows as f64 / start.elapsed().as_secs_f64()
}

async fn latency(url: &str, pool: &PgPool, listen: bool, n: usize) -> (f64, f64) {
    sqlx::query("TRUNCATE inbox").execute(pool).await.unwrap();
    let poll = if listen {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(100)
    };
    let w = Worker::connect(
        url,
        WorkerOptions {
            listen,
            poll_interval: poll,
            ..WorkerOptions::new("lat")
        },
    )
    .await
    .unwrap();
    let sent: Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>> = Arc::default();
    let lat: Arc<std::sync::Mutex<Vec<f64>>> = Arc::default();
    let (s2, l2) = (sent.clone(), lat.clone());
    let stop = Arc::new(tokio::sync::Notify::new());
    let st2 = stop.clone();
    let run = tokio::spawn(async move {
        w.run(
            move |task| {
                let (s2, l2) = (s2.clone(), l2.clone());
                async move {
                    let at = Instant::now();
                    if let Some(t0) = s2.lock().unwrap().get(&task.message().idempotency_key) {
                        l2.lock().unwrap().push((at - *t0).as_secs_f64() * 1000.0);
                    }
                    Ok(Outcome::Complete)
                }
            },
            async move { st2.notified().await },
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..n {
        let key = format!("l{i}");
        sent.lock().unwrap().insert(key.clone(), Instant::now());
        sqlx::query("INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('lat', $1, $2, 'pull')")
            .bind(&key)
            .bind(json!({ "i": i }))
            .execute(pool)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(37)).await;
    }
    while lat.lock().unwrap().len() < n {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.notify_waiters();
    run.await.unwrap().unwrap();
    let mut v = lat.lock().unwrap().clone();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99))
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh)");
    let rows: usize = std::env::var("QB_BENCH_ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let (url, pool) = fresh_database(&admin, "qb_bench_pull").await;
    let mut results = Vec::new();
    println!(
        "{:>5} {:>5} {:>12} {:>12} {:>7}",
        "batch", "conc", "worker r/s", "baseline r/s", "ratio"
    );
    let only = std::env::var("QB_BENCH_ONLY").ok(); // e.g. "100x4"
    for batch in [1u32, 10, 100] {
        for conc in [1u32, 4, 16] {
            if only
                .as_deref()
                .is_some_and(|o| o != format!("{batch}x{conc}"))
            {
                continue;
            }
            let base = baseline_run(&url, &pool, rows, batch, conc).await;
            let qb = worker_run(&url, &pool, rows, batch, conc).await;
            println!(
                "{batch:>5} {conc:>5} {qb:>12.0} {base:>12.0} {:>7.2}",
                qb / base
            );
            results.push(json!({"batch": batch, "concurrency": conc, "rows": rows, "worker_rows_per_s": qb.round(), "baseline_rows_per_s": base.round(), "ratio": (qb / base * 100.0).round() / 100.0}));
        }
    }
    if only.is_some() {
        return;
    }
    let (l50, l99) = latency(&url, &pool, true, 200).await;
    let (p50, p99) = latency(&url, &pool, false, 200).await;
    println!("insert->handler latency ms: LISTEN/NOTIFY p50 {l50:.1} p99 {l99:.1}; poll 100 ms p50 {p50:.1} p99 {p99:.1}; p50 ratio {:.2}", l50 / p50);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let out = json!({
        "benchmark": "pull",
        "machine": {"cpus": cpus, "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()},
        "throughput": results,
        "latency_ms": {"notify": {"p50": l50, "p99": l99}, "poll_100ms": {"p50": p50, "p99": p99}, "p50_ratio_notify_vs_poll": l50 / p50},
    });
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/results/pull.json"
    );
    std::fs::write(path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {path}");
}
