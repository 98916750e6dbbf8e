//! Migration 14 (the `cancelled` state) runs outside a transaction, one statement at a time,
//! so an interrupted run leaves some statements done and the version unrecorded; the next
//! `migrate` starts the file again. This runs the file cut after every one of its statements
//! (and after all of them, history unwritten) on a copy of a database at version 13 holding
//! rows in every old state, then the runner, and checks each ends at the same schema: one
//! validated state constraint per table allowing 'cancelled', the retention indexes valid and
//! covering it, no temporary name left.

mod support;

use queuebox_core::migrate::{self, POSTGRES};
use queuebox_core::store::postgres::PgStore;
use sqlx::{Executor, PgPool};

#[tokio::test]
async fn migration_14_ends_at_the_same_schema_after_an_interruption_at_any_statement() {
    let base_url = queuebox_testkit::fresh_database("m14").await;
    let store = PgStore::connect(&base_url, 2).await.unwrap();
    migrate::postgres::run_to(&store, 13).await.unwrap();
    store
        .pool()
        .execute(
            "INSERT INTO outbox (topic, payload, state) VALUES
                 ('t', '{}', 'pending'), ('t', '{}', 'processing'), ('t', '{}', 'sent'), ('t', '{}', 'dead');
             INSERT INTO inbox (source, idempotency_key, payload, state)
                 SELECT 's', s, '{}', s FROM unnest(ARRAY['pending', 'processing', 'processed', 'dead']) s;",
        )
        .await
        .unwrap();
    store.close().await;

    let fourteen = POSTGRES.iter().find(|m| m.version == 14).unwrap();
    assert!(!fourteen.in_transaction());
    let statements = migrate::statements(fourteen.sql);
    let (server, base) = base_url.rsplit_once('/').unwrap();
    let admin = PgPool::connect(&queuebox_testkit::database_url())
        .await
        .unwrap();
    for cut in 0..=statements.len() {
        let name = format!("{base}_{cut}");
        admin
            .execute(format!("CREATE DATABASE {name} TEMPLATE {base}").as_str())
            .await
            .unwrap();
        let store = PgStore::connect(&format!("{server}/{name}"), 2)
            .await
            .unwrap();
        for s in &statements[..cut] {
            store.pool().execute(s.as_str()).await.unwrap();
        }
        migrate::postgres::run(&store)
            .await
            .unwrap_or_else(|e| panic!("cut after {cut} statements: {e}"));
        let schema: (i64, i64, i64) = sqlx::query_as(
            "SELECT
               (SELECT count(*) FROM pg_constraint
                 WHERE conname IN ('ck_inbox_state', 'ck_outbox_state') AND convalidated
                   AND pg_get_constraintdef(oid) LIKE '%cancelled%'),
               (SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                 WHERE c.relname IN ('idx_inbox_terminal_created', 'idx_outbox_terminal_updated')
                   AND i.indisvalid AND pg_get_expr(i.indpred, i.indrelid) LIKE '%cancelled%'),
               (SELECT count(*) FROM pg_constraint WHERE conname LIKE '%_v14')
                 + (SELECT count(*) FROM pg_class WHERE relname LIKE '%_v14')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(schema, (2, 2, 0), "cut after {cut} statements");
        // The new state is allowed, anything else still refused.
        store
            .pool()
            .execute("UPDATE outbox SET state = 'cancelled' WHERE state = 'pending'")
            .await
            .unwrap();
        let bogus = store
            .pool()
            .execute("UPDATE inbox SET state = 'bogus' WHERE state = 'pending'")
            .await;
        assert!(bogus.is_err(), "cut after {cut}: the constraint is there");
        store.close().await;
        admin
            .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
            .await
            .unwrap();
    }
}
