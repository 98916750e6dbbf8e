//! History benchmark ("cost does not grow with history"; a bench binary, not a
//! timed test). One run, one database, one worker configuration (default `WorkerOptions`,
//! concurrency 8), three modes, each a median of rounds that drain freshly inserted pending
//! rows of one source:
//!
//! - `empty`: the inbox holds no finished rows (truncated before each round);
//! - `history`: after `QB_BENCH_HISTORY` (default 10,000,000) `processed` rows of the same
//!   source were inserted with one `INSERT … SELECT generate_series` and vacuumed;
//! - `pinned`: as `history`, while another session holds a transaction with an xid open for
//!   the whole round, so neither vacuum nor pruning nor index kill bits can remove what the
//!   round leaves dead.
//!
//! Per round it reports rows/s, dead tuples per message (`pg_stat_user_tables.n_dead_tup`
//! delta / rows; autovacuum is off on the table so it cannot reset the count mid-round),
//! buffers per row (`pg_statio_*` deltas: the whole table and its indexes, and the pending
//! index alone, which only the claim reads during a drain), and the claim statement's own
//! shared buffers from `EXPLAIN (ANALYZE, BUFFERS)` with the worker's parameters at the start,
//! middle and end of the round (run in a transaction that is rolled back, so it claims
//! nothing). pg_stat_statements would give the claim's buffers directly, but it needs
//! `shared_preload_libraries`, which the shared test cluster does not load.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench history`
//! (`QB_BENCH_ROWS` pending rows per round, default 30000; `QB_BENCH_ROUNDS`, default 3;
//! `QB_BENCH_HISTORY`, default 10000000). Writes benchmarks/results/history-<date>.json and
//! drops its database at the end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::store::names::Names;
use queuebox_core::store::sql::postgres as sql;
use queuebox_core::store::{candidate_limit, Backend};
use queuebox_core::{Worker, WorkerOptions};
use serde_json::{json, Value};
use sqlx::{Connection, PgPool};

mod support;
use support::{drain, env_or, fresh_database, median};

const DB: &str = "qb_bench_history";
const SOURCE: &str = "bench";
const CONCURRENCY: u32 = 8;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The counters a round is measured by, read from PostgreSQL's statistics views.
#[derive(Clone, Copy, Default)]
struct Counters {
    dead: i64,
    updated: i64,
    /// Heap and index buffers (hit + read) of the inbox and all its indexes.
    table_buffers: i64,
    /// Buffers (hit + read) of the pending partial index: during a drain only the claim reads it.
    pending_index_buffers: i64,
}

async fn counters(pool: &PgPool) -> Counters {
    let (dead, updated, table_buffers, pending_index_buffers): (i64, i64, i64, i64) =
        sqlx::query_as(
            "SELECT t.n_dead_tup, t.n_tup_upd,
                    s.heap_blks_hit + s.heap_blks_read + COALESCE(s.idx_blks_hit, 0) + COALESCE(s.idx_blks_read, 0),
                    (SELECT idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes
                      WHERE indexrelname = 'idx_inbox_pull_pending')
               FROM pg_stat_user_tables t JOIN pg_statio_user_tables s USING (relid)
              WHERE t.relname = 'inbox'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
    Counters {
        dead,
        updated,
        table_buffers,
        pending_index_buffers,
    }
}

/// Statistics reach the shared views asynchronously (a backend flushes at most once a second,
/// an idle one later): wait until the round's updates (a claim and a completion per row) are
/// all counted before reading the deltas.
async fn settled(pool: &PgPool, before: Counters, rows: usize) -> Counters {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = counters(pool).await;
        if now.updated - before.updated >= 2 * rows as i64 || Instant::now() > deadline {
            tokio::time::sleep(Duration::from_millis(1200)).await;
            return counters(pool).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The worker's claim with its parameters (default batch 10 and its candidate limit), under
/// `EXPLAIN (ANALYZE, BUFFERS)` in a transaction that is rolled back: the claim's shared
/// buffers (hit + read, the whole plan), the rows it would have claimed, and its time.
async fn explain_claim(pool: &PgPool, claim: &str) -> Value {
    let batch = WorkerOptions::new(SOURCE).batch();
    let mut tx = pool.begin().await.unwrap();
    let plan: Value =
        sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {claim}"))
            .bind(SOURCE)
            .bind(batch as i64)
            .bind(30_000f64)
            .bind(candidate_limit(batch))
            .bind(None::<i64>)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.rollback().await.unwrap();
    let top = &plan[0];
    let p = &top["Plan"];
    let n = |k: &str| p[k].as_i64().unwrap_or(0);
    json!({
        "shared_buffers": n("Shared Hit Blocks") + n("Shared Read Blocks"),
        "rows": p["Actual Rows"].as_f64().unwrap_or(0.0),
        "ms": top["Execution Time"].as_f64().unwrap_or(0.0),
    })
}

async fn seed(pool: &PgPool, tag: &str, rows: usize) {
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT $1, $2 || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $3) g",
    )
    .bind(SOURCE)
    .bind(format!("{tag}-"))
    .bind(rows as i64)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(pool)
        .await
        .unwrap();
}

/// One round: seed `rows` pending rows, drain them with the default worker at concurrency 8
/// (a `pinned` round holds a transaction with an xid open on another session throughout).
async fn round(url: &str, pool: &PgPool, claim: &str, tag: &str, rows: usize, pin: bool) -> Value {
    seed(pool, tag, rows).await;
    let mut pinned = None;
    if pin {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut c).await.unwrap();
        sqlx::query("SELECT txid_current()")
            .execute(&mut c)
            .await
            .unwrap();
        pinned = Some(c);
    }
    let claim_start = explain_claim(pool, claim).await;
    let before = counters(pool).await;
    let w = Worker::connect(
        url,
        WorkerOptions {
            concurrency: CONCURRENCY,
            ..WorkerOptions::new(SOURCE)
        },
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    // Half-way through, the claim is explained once more: the cost in the middle of a drain,
    // with half the round's rows already claimed and finished.
    let (d, p, c) = (done.clone(), pool.clone(), claim.to_string());
    let mid = tokio::spawn(async move {
        while d.load(Ordering::SeqCst) < rows / 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        explain_claim(&p, &c).await
    });
    let secs = drain(&w, rows, done).await;
    drop(w);
    let claim_mid = mid.await.unwrap();
    let after = settled(pool, before, rows).await;
    let claim_end = explain_claim(pool, claim).await;
    if let Some(c) = pinned {
        c.close().await.unwrap();
    }
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = $1 AND state <> 'processed'")
            .bind(SOURCE)
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(pending, 0, "every row of the round processed");
    let per_row = |x: i64| x as f64 / rows as f64;
    json!({
        "rows": rows,
        "seconds": secs,
        "rows_per_s": rows as f64 / secs,
        "dead_tuples_per_message": per_row(after.dead - before.dead),
        "row_versions_per_message": per_row(after.updated - before.updated),
        "table_buffers_per_row": per_row(after.table_buffers - before.table_buffers),
        "pending_index_buffers_per_row": per_row(after.pending_index_buffers - before.pending_index_buffers),
        "claim_explain": {"start": claim_start, "middle": claim_mid, "end": claim_end},
        "loadavg": loadavg(),
    })
}

/// A mode's rounds and their medians.
fn summary(mode: &str, rounds: Vec<Value>) -> Value {
    let med = |k: &str| median(rounds.iter().map(|r| r[k].as_f64().unwrap()).collect());
    let claim = |at: &str| {
        median(
            rounds
                .iter()
                .map(|r| r["claim_explain"][at]["shared_buffers"].as_f64().unwrap())
                .collect(),
        )
    };
    let s = json!({
        "mode": mode,
        "rows_per_s": med("rows_per_s"),
        "dead_tuples_per_message": med("dead_tuples_per_message"),
        "table_buffers_per_row": med("table_buffers_per_row"),
        "pending_index_buffers_per_row": med("pending_index_buffers_per_row"),
        "claim_shared_buffers": {"start": claim("start"), "middle": claim("middle"), "end": claim("end")},
        "rounds": rounds,
    });
    println!(
        "{mode:>8} {:>9.0} {:>9.2} {:>9.1} {:>9.2} {:>6.0} {:>6.0} {:>6.0}",
        s["rows_per_s"].as_f64().unwrap(),
        s["dead_tuples_per_message"].as_f64().unwrap(),
        s["table_buffers_per_row"].as_f64().unwrap(),
        s["pending_index_buffers_per_row"].as_f64().unwrap(),
        claim("start"),
        claim("middle"),
        claim("end"),
    );
    s
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh)");
    let rows = env_or("QB_BENCH_ROWS", 30_000);
    let rounds = env_or("QB_BENCH_ROUNDS", 3);
    let history = env_or("QB_BENCH_HISTORY", 10_000_000);
    let (url, pool) = fresh_database(&admin, DB).await;
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version::int8 FROM queuebox_schema_history ORDER BY 1")
            .fetch_all(&pool)
            .await
            .unwrap();
    // Autovacuum would reset n_dead_tup mid-round and run at random points of some rounds;
    // every round vacuums explicitly after seeding instead.
    sqlx::query("ALTER TABLE inbox SET (autovacuum_enabled = false)")
        .execute(&pool)
        .await
        .unwrap();
    let claim = Names::default().render(Backend::Postgres, sql::CLAIM);
    println!(
        "{rows} rows per round, {rounds} rounds, {history} finished rows, concurrency {CONCURRENCY}, migrations {versions:?}"
    );
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6}",
        "mode", "rows/s", "dead/msg", "buf/row", "pidx/row", "c.st", "c.mid", "c.end"
    );

    let mut empty = Vec::new();
    for r in 0..rounds {
        sqlx::query("TRUNCATE inbox").execute(&pool).await.unwrap();
        empty.push(round(&url, &pool, &claim, &format!("e{r}"), rows, false).await);
    }
    let empty = summary("empty", empty);

    sqlx::query("TRUNCATE inbox").execute(&pool).await.unwrap();
    let t = Instant::now();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption, state, processed_at)
         SELECT $1, 'h-' || g, jsonb_build_object('n', g), 'pull', 'processed', now()
           FROM generate_series(1, $2) g",
    )
    .bind(SOURCE)
    .bind(history as i64)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(&pool)
        .await
        .unwrap();
    let history_secs = t.elapsed().as_secs_f64();
    let (table_bytes, total_bytes): (i64, i64) =
        sqlx::query_as("SELECT pg_relation_size('inbox'), pg_total_relation_size('inbox')")
            .fetch_one(&pool)
            .await
            .unwrap();
    println!(
        "history: {history} rows in {history_secs:.0} s, table {} MB, with indexes {} MB",
        table_bytes >> 20,
        total_bytes >> 20
    );

    let mut with_history = Vec::new();
    for r in 0..rounds {
        with_history.push(round(&url, &pool, &claim, &format!("h{r}"), rows, false).await);
    }
    let with_history = summary("history", with_history);
    let mut pinned = Vec::new();
    for r in 0..rounds {
        pinned.push(round(&url, &pool, &claim, &format!("p{r}"), rows, true).await);
    }
    let pinned = summary("pinned", pinned);

    let rate = |s: &Value| s["rows_per_s"].as_f64().unwrap();
    let (b, c) = (
        rate(&with_history) / rate(&empty),
        rate(&pinned) / rate(&empty),
    );
    println!("history/empty {b:.2} (target >= 0.9), pinned/empty {c:.2} (target >= 0.8)");
    let date: String = sqlx::query_scalar("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
        .fetch_one(&pool)
        .await
        .unwrap();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let out = json!({
        "benchmark": "history",
        "machine": {"cpus": cpus, "loadavg_end": loadavg()},
        "postgres": sqlx::query_scalar::<_, String>("SELECT version()").fetch_one(&pool).await.unwrap(),
        "migrations": versions,
        "worker": {"options": "WorkerOptions::new defaults", "concurrency": CONCURRENCY},
        "rows_per_round": rows,
        "rounds": rounds,
        "history_rows": history,
        "history_insert_and_vacuum_s": history_secs,
        "inbox_bytes_with_history": {"table": table_bytes, "total": total_bytes},
        "ratio_history_vs_empty": b,
        "ratio_pinned_vs_empty": c,
        "modes": [empty, with_history, pinned],
    });
    drop(pool);
    sqlx::query(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
        .execute(&PgPool::connect(&admin).await.unwrap())
        .await
        .unwrap();
    let path = format!(
        "{}/../benchmarks/results/history-{date}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {path}");
}
