//! Every statement of the PostgreSQL backend (`store::postgres::sql::statements()`) is
//! prepared on a real, migrated database: each parses, names only existing tables and
//! columns, and its parameters resolve to types. The behaviours themselves are the store
//! contract suite's (`store_contract.rs`).

mod support;

use queuebox_core::store::postgres::sql;

#[tokio::test]
async fn every_postgres_statement_prepares_on_a_migrated_database() {
    let (store, _) = support::fresh_store("statements").await;
    let all = sql::statements();
    assert!(
        all.len() >= 35,
        "statements() lists the backend's statements"
    );
    let mut failed = Vec::new();
    let names = queuebox_core::store::names::Names::default();
    for (name, template) in &all {
        let text = names.render(queuebox_core::store::Backend::Postgres, template);
        if let Err(e) = sqlx::Executor::prepare(store.pool(), text.as_str()).await {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "statements that do not prepare:\n{}",
        failed.join("\n")
    );
}

#[test]
fn statement_names_are_unique() {
    let names: std::collections::BTreeSet<_> = sql::statements().iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), sql::statements().len());
}

/// The batched fences stay linear in their claims whatever the statistics say (`fence_many`
/// in `sql.rs`). On a table last analysed while nothing was claimed, the planner used to
/// estimate one `processing` row and plan a 500-row completion as a nested loop whose join
/// filter compared every row with every claim (52 ms against 6.5): the custom plan, which a
/// prepared statement gets for its first five executions on each connection (and an unnamed
/// one always), must find the rows by key or by hash instead.
#[tokio::test]
async fn a_batched_completion_is_linear_on_a_table_analysed_with_nothing_claimed() {
    let (store, _) = support::fresh_store("completeplan").await;
    let pool = store.pool();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT 's', 'k' || g, '{}'::jsonb, 'pull' FROM generate_series(1, 30000) g",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE inbox").execute(pool).await.unwrap();
    let claimed: Vec<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
                lease_expires_at = clock_timestamp() + interval '1 minute'
          WHERE id IN (SELECT id FROM inbox ORDER BY sequence LIMIT 500)
         RETURNING id, claim_token",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let (ids, tokens): (Vec<_>, Vec<_>) = claimed.into_iter().unzip();
    let names = queuebox_core::store::names::Names::default();
    let complete = names.render(queuebox_core::store::Backend::Postgres, sql::COMPLETE_MANY);
    let mut tx = pool.begin().await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, COSTS OFF) {complete}"))
        .bind(&ids)
        .bind(&tokens)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("rows=500 loops=1"),
        "all 500 completed:\n{plan}"
    );
    assert!(
        !plan.contains("Join Filter"),
        "a join filter compares every row with every claim:\n{plan}"
    );
}
