//! Test support: a fresh, migrated PostgreSQL database per test (on the test kit's fresh
//! database, `queuebox_testkit`), and rows to work on.
#![allow(dead_code)]

use std::sync::Arc;

use queuebox_core::migrate;
use queuebox_core::store::postgres::PgStore;
use sqlx::PgPool;

/// A store on a new, migrated database, plus its URL.
pub async fn fresh_store(prefix: &str) -> (Arc<PgStore>, String) {
    let url = queuebox_testkit::fresh_database(prefix).await;
    let store = PgStore::connect(&url, 20).await.expect("connect");
    migrate::postgres::run(&store).await.expect("migrate");
    (Arc::new(store), url)
}

/// Inserts `n` pull rows for `source`; `aggregate(i)` gives each row's aggregate id.
pub async fn insert_pull_rows(
    pool: &PgPool,
    source: &str,
    n: usize,
    aggregate: impl Fn(usize) -> Option<String>,
) {
    let mut tx = pool.begin().await.unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let keys: Vec<String> = chunk.iter().map(|i| format!("k{i}")).collect();
        let aggs: Vec<Option<String>> = chunk.iter().map(|i| aggregate(*i)).collect();
        let payloads: Vec<serde_json::Value> = chunk
            .iter()
            .map(|i| serde_json::json!({ "n": i }))
            .collect();
        sqlx::query(
            "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption)
             SELECT $1, k, a, p, 'pull' FROM unnest($2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS t(k, a, p, o) ORDER BY o",
        )
        .bind(source)
        .bind(&keys)
        .bind(&aggs)
        .bind(&payloads)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// (state, attempt, last_error) of the row with idempotency key `key`.
pub async fn row_state(pool: &PgPool, key: &str) -> (String, i32, Option<String>) {
    sqlx::query_as("SELECT state, attempt, last_error FROM inbox WHERE idempotency_key = $1")
        .bind(key)
        .fetch_one(pool)
        .await
        .unwrap()
}

pub async fn count_state(pool: &PgPool, state: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state = $1")
        .bind(state)
        .fetch_one(pool)
        .await
        .unwrap()
}
