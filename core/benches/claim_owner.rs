//! What dead-worker recovery costs the claim: the pull claim statement as it was
//! (no owner column written) against the claim that records the worker's owner key, in the
//! same run on the same table, alternating per round; plus the once-a-second dead-owner check
//! (`EXPIRE_DEAD_OWNERS`) with live owners holding rows, which is off the claim path.
//!
//! Each round times `QB_BENCH_CLAIMS` claims of batch 10 per variant (default 300) on a table of
//! pending rows while 8 live owner sessions hold 10 processing rows each (other workers);
//! every claimed batch is completed, untimed, so the processing set stays the size a worker
//! keeps. Figures are the median over `QB_BENCH_ROUNDS` rounds (default 7) of each round's
//! median latency.
//!
//! `QUEUEBOX_TEST_DATABASE_URL=… cargo bench -p queuebox-core --bench claim_owner`
//! writes benchmarks/results/claim_owner.json.

use std::time::{Duration, Instant};

use queuebox_core::store::candidate_limit;
use queuebox_core::store::postgres::sql;
use serde_json::json;
use sqlx::{Connection, PgConnection, PgPool, Row};
use uuid::Uuid;

mod support;
use support::{env_or, fresh_database, median};

const BATCH: u32 = 10;
const LIVE_OWNERS: usize = 8;

/// One claim with `statement`, binding `owner` as `$5` when given (the statement before the
/// owner column has only four parameters); completes what it claimed, untimed. Returns the
/// claim's latency in ms and the rows it claimed.
async fn claim_once(pool: &PgPool, statement: &str, owner: Option<i64>) -> (f64, usize) {
    let start = Instant::now();
    let q = sqlx::query(statement)
        .bind("bench")
        .bind(BATCH as i64)
        .bind(60_000f64)
        .bind(candidate_limit(BATCH));
    let q = match owner {
        Some(key) => q.bind(key),
        None => q,
    };
    let rows = q.fetch_all(pool).await.unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.get("id")).collect();
    let tokens: Vec<Uuid> = rows.iter().map(|r| r.get("claim_token")).collect();
    sqlx::query(sql::COMPLETE_MANY)
        .bind(&ids)
        .bind(&tokens)
        .execute(pool)
        .await
        .unwrap();
    (ms, rows.len())
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh)");
    let rounds = env_or("QB_BENCH_ROUNDS", 7);
    let claims = env_or("QB_BENCH_CLAIMS", 300);
    let name = "qb_bench_claim_owner";
    let (url, pool) = fresh_database(&admin, name).await;

    // The claim as it was before the owner column: the same statement without its assignment.
    let owner_set = ",\n       claim_owner = $5::int8";
    assert!(sql::CLAIM.contains(owner_set), "CLAIM changed shape");
    let before = sql::CLAIM.replace(owner_set, "");

    let rows = rounds * 2 * claims * BATCH as usize + 1000;
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $1) g",
    )
    .bind(rows as i64)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(&pool)
        .await
        .unwrap();

    // Other live workers: each holds its owner lock on a connection of its own and 10 rows.
    let mut sessions: Vec<PgConnection> = Vec::new();
    for i in 0..LIVE_OWNERS {
        let mut c = PgConnection::connect(&url).await.unwrap();
        let key = 1_000 + i as i64;
        let taken: bool = sqlx::query_scalar(sql::OWNER_LOCK)
            .bind(key)
            .fetch_one(&mut c)
            .await
            .unwrap();
        assert!(taken);
        let held = sqlx::query(sql::CLAIM)
            .bind("bench")
            .bind(BATCH as i64)
            .bind(60_000f64)
            .bind(candidate_limit(BATCH))
            .bind(Some(key))
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(held.len(), BATCH as usize);
        sessions.push(c);
    }

    let (mut before_ms, mut after_ms, mut expire_ms) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut b = Vec::with_capacity(claims);
        let mut a = Vec::with_capacity(claims);
        for half in 0..2 {
            let owner_first = (round + half) % 2 == 0;
            for _ in 0..claims {
                if owner_first {
                    let (ms, n) = claim_once(&pool, sql::CLAIM, Some(42)).await;
                    assert_eq!(n, BATCH as usize);
                    a.push(ms);
                } else {
                    let (ms, n) = claim_once(&pool, &before, None).await;
                    assert_eq!(n, BATCH as usize);
                    b.push(ms);
                }
            }
        }
        let mut e = Vec::with_capacity(claims);
        for _ in 0..claims {
            let start = Instant::now();
            let expired = sqlx::query(sql::EXPIRE_DEAD_OWNERS)
                .bind("bench")
                .execute(&pool)
                .await
                .unwrap()
                .rows_affected();
            e.push(start.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(expired, 0, "every owner is alive");
        }
        let (mb, ma, me) = (median(b), median(a), median(e));
        println!(
            "round {round}: claim before {mb:.3} ms, with owner {ma:.3} ms (x{:.3}); dead-owner check {me:.3} ms",
            ma / mb
        );
        before_ms.push(mb);
        after_ms.push(ma);
        expire_ms.push(me);
    }
    let (mb, ma, me) = (
        median(before_ms.clone()),
        median(after_ms.clone()),
        median(expire_ms.clone()),
    );
    println!("median of {rounds} rounds: claim before {mb:.3} ms, with owner {ma:.3} ms, ratio {:.3}; dead-owner check {me:.3} ms (once a second per worker)", ma / mb);

    // Recovery check on the same table: one owner's session ends, the next check expires its rows.
    let dead = sessions.pop().unwrap();
    dead.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let expired = sqlx::query(sql::EXPIRE_DEAD_OWNERS)
        .bind("bench")
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(expired, BATCH as u64, "a closed session's rows are expired");

    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let out = json!({
        "benchmark": "claim_owner",
        "what": "pull claim latency, batch 10, before (no owner column written) vs with the owner key, same run, alternating; plus the once-a-second dead-owner check with 8 live owners",
        "machine": {"cpus": cpus, "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()},
        "rounds": rounds,
        "claims_per_round_per_variant": claims,
        "batch": BATCH,
        "live_owners": LIVE_OWNERS,
        "claim_ms_median_of_round_medians": {"before": mb, "with_owner": ma, "ratio_with_owner_vs_before": ma / mb},
        "expire_dead_owners_ms_median_of_round_medians": me,
        "per_round": {"before": before_ms, "with_owner": after_ms, "expire_dead_owners": expire_ms},
    });
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/results/claim_owner.json"
    );
    std::fs::write(path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {path}");
    drop(sessions);
}
