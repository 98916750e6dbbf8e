//! The pull claim runs on connections of its own that plan it once (`store/postgres/
//! claim_pool.rs`): PostgreSQL kept choosing a custom plan for the prepared claim, which
//! planned every claim again (0.53 ms a claim). Checked from the database: the
//! session's prepared claim statement counts generic plans only, and the store's main pool,
//! where the application's statements run, keeps PostgreSQL's default.

mod support;

use std::time::Duration;

use queuebox_core::store::names::Names;
use queuebox_core::store::postgres::PgStore;
use queuebox_core::Store;
use sqlx::PgPool;

/// (generic, custom) plans of the prepared claim statements on the `n` connections of
/// `pool`, held together so that each query sees another session.
async fn claim_plans(pool: &PgPool, n: usize) -> (i64, i64) {
    let mut held = Vec::new();
    let (mut generic, mut custom) = (0, 0);
    for _ in 0..n {
        let mut conn = pool.acquire().await.unwrap();
        let (g, c): (i64, i64) = sqlx::query_as(
            "SELECT coalesce(sum(generic_plans), 0)::int8, coalesce(sum(custom_plans), 0)::int8
               FROM pg_prepared_statements WHERE statement LIKE '%WITH cand AS%'",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        (generic, custom) = (generic + g, custom + c);
        held.push(conn);
    }
    (generic, custom)
}

async fn show_plan_cache_mode(pool: &PgPool) -> String {
    sqlx::query_scalar("SHOW plan_cache_mode")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Eight claims of one row each (full claims, so both CLAIM and CLAIM_FROM run).
async fn claim_eight(store: &PgStore) {
    for _ in 0..8 {
        let rows = store
            .claim_pull("s", 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
    }
}

#[tokio::test]
async fn a_store_that_opened_its_pool_plans_the_claim_once_per_connection() {
    let (_, url) = support::fresh_store("claim_pool").await;
    // As the worker and the relay open it: connect, then the configured names.
    let store = PgStore::connect(&url, 4)
        .await
        .unwrap()
        .renamed(Names::default());
    support::insert_pull_rows(store.pool(), "s", 20, |_| None).await;
    claim_eight(&store).await;

    // Both claim connections (the pool opens at most two).
    let (generic, custom) = claim_plans(store.claim_pool(), 2).await;
    assert_eq!(custom, 0, "the claim was planned per execution");
    assert!(generic >= 8, "{generic} generic plans for 8 claims");
    assert_eq!(
        show_plan_cache_mode(store.claim_pool()).await,
        "force_generic_plan"
    );
    assert_eq!(
        show_plan_cache_mode(store.pool()).await,
        "auto",
        "the main pool, where the application's statements run, keeps the default"
    );
}

#[tokio::test]
async fn a_store_on_the_applications_pool_claims_on_that_pool_unchanged() {
    let (_, url) = support::fresh_store("claim_pool_app").await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let store = PgStore::from_pool(pool.clone());
    support::insert_pull_rows(&pool, "s", 20, |_| None).await;
    claim_eight(&store).await;
    assert_eq!(show_plan_cache_mode(store.claim_pool()).await, "auto");
    let (_, custom) = claim_plans(&pool, 1).await;
    assert!(
        custom > 0,
        "PostgreSQL's own choice on the application's pool"
    );
}
