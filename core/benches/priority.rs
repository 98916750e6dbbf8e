//! Pull drain with a mix of priorities against the same drain without (the claim
//! must stay as cheap as before; target mix / none ≥ 0.9).
//!
//! Each round seeds `QB_BENCH_ROWS` pending pull rows of one source (default 20,000), runs
//! `VACUUM ANALYZE`, and drains them with the core `Worker` (`WorkerOptions::new` defaults,
//! concurrency 8, no-op handler), as `history.rs` does. Two modes, interleaved round by round
//! (none, mix, none, mix, …) so that load from elsewhere on the machine falls on both:
//! - **none**: every row at priority 0 (what every row was before priorities);
//! - **mix**: priorities -10, 0, 0, 0, 5, 10, 100 spread over the rows in arrival order, so
//!   the claim's scan order (-priority, scheduled_at, sequence) is far from arrival order.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench priority`
//! (`QB_BENCH_ROUNDS` rounds per mode, default 5). Prints the medians with min–max and writes
//! benchmarks/results/priority-drain-<date>.json.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::{Worker, WorkerOptions};
use serde_json::json;
use sqlx::PgPool;

mod support;
use support::{drain, env_or, fresh_database, median};

async fn seed(pool: &PgPool, rows: usize, mix: bool) {
    sqlx::query("TRUNCATE inbox").execute(pool).await.unwrap();
    // Deterministic spread: row g gets the (g * 7919 mod 7)-th priority of the list.
    let priority = if mix {
        "(ARRAY[-10, 0, 0, 0, 5, 10, 100])[1 + (g * 7919) % 7]::smallint"
    } else {
        "0::smallint"
    };
    sqlx::query(&format!(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption, priority)
         SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull', {priority}
           FROM generate_series(1, $1) g"
    ))
    .bind(rows as i64)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(pool)
        .await
        .unwrap();
}

async fn round(url: &str, pool: &PgPool, rows: usize, mix: bool) -> f64 {
    seed(pool, rows, mix).await;
    let w = Worker::connect(
        url,
        WorkerOptions {
            concurrency: 8,
            poll_interval: Duration::from_millis(20),
            ..WorkerOptions::new("bench")
        },
    )
    .await
    .unwrap();
    let secs = drain(&w, rows, Arc::new(AtomicUsize::new(0))).await;
    let processed: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state = 'processed'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(processed as usize, rows, "every row processed");
    rows as f64 / secs
}

fn summary(v: &[f64]) -> serde_json::Value {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(0.0, f64::max);
    json!({"median": median(v.to_vec()).round(), "min": min.round(), "max": max.round(),
           "rounds": v.iter().map(|r| r.round()).collect::<Vec<_>>()})
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh)");
    let rows = env_or("QB_BENCH_ROWS", 20_000);
    let rounds = env_or("QB_BENCH_ROUNDS", 5);
    let (url, pool) = fresh_database(&admin, "qb_bench_priority").await;
    // A warm-up round of each, not counted (first connections, plan caches, the OS cache).
    round(&url, &pool, rows / 4, false).await;
    round(&url, &pool, rows / 4, true).await;
    let (mut none, mut mix) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let a = round(&url, &pool, rows, false).await;
        let b = round(&url, &pool, rows, true).await;
        println!("round {r}: none {a:>8.0} rows/s, mix {b:>8.0} rows/s");
        none.push(a);
        mix.push(b);
    }
    let ratio = median(mix.clone()) / median(none.clone());
    let (sn, sm) = (summary(&none), summary(&mix));
    println!(
        "none median {} (min {}, max {}); mix median {} (min {}, max {}); mix / none {ratio:.3}",
        sn["median"], sn["min"], sn["max"], sm["median"], sm["min"], sm["max"]
    );
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let date = chrono::Utc::now().format("%Y-%m-%d");
    let out = json!({
        "benchmark": "priority-drain",
        "command": "cargo bench -p queuebox-core --bench priority",
        "rows_per_round": rows,
        "rounds_per_mode": rounds,
        "worker": {"concurrency": 8, "options": "WorkerOptions::new defaults"},
        "mix_priorities": [-10, 0, 0, 0, 5, 10, 100],
        "machine": {"cpus": cpus, "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()},
        "none_rows_per_s": sn,
        "mix_rows_per_s": sm,
        "mix_over_none_median": (ratio * 1000.0).round() / 1000.0,
        "target": ">= 0.9",
    });
    let path = format!(
        "{}/../benchmarks/results/priority-drain-{date}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {path}");
}
