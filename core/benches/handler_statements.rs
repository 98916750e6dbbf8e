//! Handler-statement benchmark (a bench binary, not a timed test): what a handler's
//! `task.execute` costs per row since parameters keep one type per position (the statement
//! cache keyed by parameter types, numbers that are not 64-bit integers bound as `numeric`).
//!
//! A worker drains `QB_BENCH_ROWS` pull rows (default 4000; batch default, 4 handlers); each
//! handler inserts one row `INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)` into a
//! `numeric` column and completes. Three handlers, rounds interleaved, medians with min–max:
//! - `int`: every total an integer, through `task.execute` (one parameter signature);
//! - `mixed`: totals alternate 3 and 4.25, through `task.execute` (two signatures: `int8`
//!   and `numeric`, each its own prepared statement);
//! - `sqlx`: the same insert through the task's sqlx transaction, the total bound as text
//!   and cast to `numeric` in SQL: the baseline without QueueBox's parameter mapping.
//!
//! The file also builds against the core before that change (c7664be), so the `int` cell of
//! the two builds can be compared through their `sqlx` baselines.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench handler_statements`
//! writes benchmarks/results/handler-statements.json (`QB_BENCH_OUT` another path).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::store::postgres::PgStoreTx;
use queuebox_core::store::SqlValue;
use queuebox_core::{Outcome, Task, Worker, WorkerOptions};
use serde_json::{json, Value};
use sqlx::PgPool;

mod support;
use support::{env_or, fresh_database, median};

const INSERT: &str = "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)";
/// The baseline binds the total's JSON text, cast in SQL: a fixed type, no mapping.
const INSERT_SQLX: &str = "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2::numeric)";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Int,
    Mixed,
    Sqlx,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Int => "int",
            Mode::Mixed => "mixed",
            Mode::Sqlx => "sqlx",
        }
    }
}

async fn seed(pool: &PgPool, rows: usize, mode: Mode) {
    sqlx::query("TRUNCATE inbox, orders_seen")
        .execute(pool)
        .await
        .unwrap();
    let total = match mode {
        Mode::Int => "to_jsonb(3)",
        _ => "CASE WHEN g % 2 = 0 THEN to_jsonb(3) ELSE to_jsonb(4.25) END",
    };
    sqlx::query(&format!(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT 'bench', 'k' || g, jsonb_build_object('total', {total}), 'pull'
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

async fn handle(task: &Task, mode: Mode) -> queuebox_core::Result<()> {
    let m = task.message();
    let total = &m.payload["total"];
    if mode == Mode::Sqlx {
        let mut tx = task.tx().await?;
        let pg = tx
            .as_any_mut()
            .downcast_mut::<PgStoreTx>()
            .expect("a PostgreSQL task");
        sqlx::query(INSERT_SQLX)
            .bind(m.id.to_string())
            .bind(total.to_string())
            .execute(&mut **pg.inner())
            .await
            .unwrap();
        return Ok(());
    }
    task.execute(
        INSERT,
        &[SqlValue::Text(m.id.to_string()), SqlValue::from_json(total)],
    )
    .await
    .map(|_| ())
}

/// Rows per second of one drain in `mode`.
async fn run(url: &str, pool: &PgPool, rows: usize, mode: Mode) -> f64 {
    seed(pool, rows, mode).await;
    let w = Worker::connect(
        url,
        WorkerOptions {
            concurrency: 4,
            poll_interval: Duration::from_millis(20),
            ..WorkerOptions::new("bench")
        },
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(tokio::sync::Notify::new());
    let (d, a) = (done.clone(), all.clone());
    let start = Instant::now();
    w.run(
        move |task: Task| {
            let (d, a) = (d.clone(), a.clone());
            async move {
                handle(&task, mode).await?;
                if d.fetch_add(1, Ordering::SeqCst) + 1 == rows {
                    a.notify_one();
                }
                Ok(Outcome::Complete)
            }
        },
        async move { all.notified().await },
    )
    .await
    .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM orders_seen")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(stored as usize, rows, "{}: every row stored", mode.name());
    rows as f64 / secs
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh start)");
    let rows = env_or("QB_BENCH_ROWS", 4000);
    let rounds = env_or("QB_BENCH_ROUNDS", 3);
    let (url, pool) = fresh_database(&admin, "qb_bench_handler_statements").await;
    sqlx::query("CREATE TABLE orders_seen (id uuid PRIMARY KEY, total numeric NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let modes = [Mode::Int, Mode::Mixed, Mode::Sqlx];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            let r = run(&url, &pool, rows, *mode).await;
            println!("round {round} {:>5}: {r:.0} rows/s", mode.name());
            rates[i].push(r);
        }
    }
    let cell = |v: &Vec<f64>| {
        json!({
            "median": median(v.clone()).round(),
            "min": v.iter().cloned().fold(f64::MAX, f64::min).round(),
            "max": v.iter().cloned().fold(0.0, f64::max).round(),
            "rounds": v,
        })
    };
    // Ratios per round (same round, same machine state), then their median.
    let ratio =
        |a: usize, b: usize| median(rates[a].iter().zip(&rates[b]).map(|(x, y)| x / y).collect());
    let out: Value = json!({
        "bench": "handler_statements",
        "rows": rows,
        "rounds": rounds,
        "concurrency": 4,
        "int": cell(&rates[0]),
        "mixed": cell(&rates[1]),
        "sqlx": cell(&rates[2]),
        "int_over_sqlx": (ratio(0, 2) * 100.0).round() / 100.0,
        "mixed_over_int": (ratio(1, 0) * 100.0).round() / 100.0,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
    let path = std::env::var("QB_BENCH_OUT").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../benchmarks/results/handler-statements.json"
        )
        .into()
    });
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {path}");
}
