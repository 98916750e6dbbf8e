//! What the paused-source check costs the pull claim: the claim statement as shipped (with
//! `NOT EXISTS (SELECT 1 FROM queuebox_paused …)` on both scans) against the same statement
//! with the check cut out, on one database, interleaved round by round so that load from
//! elsewhere on the machine falls on both.
//!
//! Each round seeds `QB_BENCH_ROWS` pending pull rows of one source (default 20,000) behind
//! 10 rows of a paused source (so the paused table is not empty), runs `VACUUM ANALYZE`, then
//! times `QB_BENCH_CLAIMS` claims of a batch of 10 (default 2,000) per statement, each in a
//! transaction rolled back, so every claim sees the same queue: the claim's own cost, without
//! the handler or the completion a drain adds.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench pause_claim`
//! (`QB_BENCH_ROUNDS` rounds, default 5). Prints claims/s per round, the medians and the
//! ratio with / without.

use std::time::Instant;

use queuebox_core::store::names::Names;
use queuebox_core::store::sql::postgres as sql;
use queuebox_core::store::{candidate_limit, Backend};
use sqlx::PgPool;

mod support;
use support::{env_or, fresh_database, median};

const CHECK: &str =
    "\n        AND NOT EXISTS (SELECT 1 FROM queuebox_paused p WHERE p.kind = 'source' AND p.name = $1)";

async fn seed(pool: &PgPool, rows: usize) {
    sqlx::query("TRUNCATE inbox").execute(pool).await.unwrap();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT CASE WHEN g <= 10 THEN 'held' ELSE 'bench' END, 'k' || g, jsonb_build_object('n', g), 'pull'
           FROM generate_series(1, $1) g",
    )
    .bind(rows as i64 + 10)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO queuebox_paused (kind, name) VALUES ('source', 'held') ON CONFLICT DO NOTHING",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(pool)
        .await
        .unwrap();
}

/// Claims per second of `statement` over `claims` rolled-back claims of 10.
async fn time(pool: &PgPool, statement: &str, claims: usize) -> f64 {
    let t0 = Instant::now();
    for _ in 0..claims {
        let mut tx = pool.begin().await.unwrap();
        let rows = sqlx::query(statement)
            .bind("bench")
            .bind(10i64)
            .bind(30_000f64)
            .bind(candidate_limit(10))
            .bind(None::<i64>)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        assert_eq!(rows.len(), 10);
        tx.rollback().await.unwrap();
    }
    claims as f64 / t0.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh)");
    let rows = env_or("QB_BENCH_ROWS", 20_000);
    let rounds = env_or("QB_BENCH_ROUNDS", 5);
    let claims = env_or("QB_BENCH_CLAIMS", 2_000);
    let (_url, pool) = fresh_database(&admin, "qb_bench_pause").await;
    let with = Names::default().render(Backend::Postgres, sql::CLAIM);
    let without = with.replace(CHECK, "");
    assert_eq!(
        with.matches(CHECK).count(),
        2,
        "the claim's paused check changed: update CHECK"
    );
    seed(&pool, rows).await;
    // Warm-up, not counted (connections, plans, the OS cache).
    time(&pool, &with, claims / 4).await;
    time(&pool, &without, claims / 4).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        seed(&pool, rows).await;
        let x = time(&pool, &without, claims).await;
        let y = time(&pool, &with, claims).await;
        println!("round {r}: without {x:>8.0} claims/s, with {y:>8.0} claims/s");
        a.push(x);
        b.push(y);
    }
    let (ma, mb) = (median(a), median(b));
    println!(
        "median without {ma:.0} claims/s, with {mb:.0} claims/s; with / without {:.3}",
        mb / ma
    );
}
