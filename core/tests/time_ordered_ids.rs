//! Row ids are time-ordered UUIDv7 (migration 0008): whoever inserts the row (the relay's
//! ingest, the application's own SQL through the column default, or the core's publish
//! statement), later rows get larger ids, so the primary key's B-tree is written at its right
//! edge and a table with millions of finished rows stays cheap to update (benchmarks/history.md).

mod support;

use std::time::Duration;

use queuebox_core::app_tx::{publish_statement, OutboxMessage, Placeholder};
use queuebox_core::store::Backend;
use sqlx::PgPool;
use support::*;
use uuid::Uuid;

/// Asserts that `id` is an RFC 9562 version 7 UUID stamped within a minute of now.
fn assert_v7(id: Uuid) {
    assert_eq!(id.get_version_num(), 7, "{id} is not a UUIDv7");
    assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}: variant");
    let (secs, _) = id
        .get_timestamp()
        .expect("a v7 id carries its time")
        .to_unix();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) < 60, "{id}: stamped {secs}, now {now}");
}

/// The ids of `table` in arrival (`sequence`) order.
async fn ids_in_arrival_order(pool: &PgPool, table: &str) -> Vec<Uuid> {
    sqlx::query_scalar(&format!("SELECT id FROM {table} ORDER BY sequence"))
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Rows inserted in separate milliseconds: every id is v7 and sorts after every id of an
/// earlier millisecond (within one millisecond v7 ids are random, so only across).
fn assert_ordered_across_batches(batches: &[Vec<Uuid>]) {
    for b in batches.iter().flatten() {
        assert_v7(*b);
    }
    for pair in batches.windows(2) {
        let earlier_max = pair[0].iter().max().unwrap();
        let later_min = pair[1].iter().min().unwrap();
        assert!(
            earlier_max < later_min,
            "a later insert got a smaller id: {earlier_max} >= {later_min}"
        );
    }
}

#[tokio::test]
async fn inbox_and_outbox_defaults_are_time_ordered_v7() {
    let (store, _url) = fresh_store("idsv7").await;
    let pool = store.pool().clone();

    // Inbox rows through the column default, three inserts a few milliseconds apart.
    let mut batches = Vec::new();
    for b in 0..3 {
        insert_pull_rows(&pool, &format!("s{b}"), 50, |_| None).await;
        let all = ids_in_arrival_order(&pool, "inbox").await;
        batches.push(all[b * 50..].to_vec());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    assert_ordered_across_batches(&batches);

    // Outbox rows an application inserts with its own SQL, naming no id.
    let mut batches = Vec::new();
    for b in 0..3 {
        sqlx::query(
            "INSERT INTO outbox (topic, payload) SELECT 't', jsonb_build_object('n', g)
               FROM generate_series(1, 20) g",
        )
        .execute(&pool)
        .await
        .unwrap();
        let all = ids_in_arrival_order(&pool, "outbox").await;
        batches.push(all[b * 20..].to_vec());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    assert_ordered_across_batches(&batches);
    store.close().await;
}

#[tokio::test]
async fn publish_statements_make_time_ordered_v7_ids() {
    let message = OutboxMessage::new("t", serde_json::json!({"n": 1}));
    let first = publish_statement(
        &[message.clone(), message.clone()],
        Placeholder::Dollar,
        Backend::Postgres,
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    let second = publish_statement(&[message], Placeholder::Dollar, Backend::Postgres).unwrap();
    assert_eq!((first.ids.len(), second.ids.len()), (2, 1));
    assert_ordered_across_batches(&[first.ids, second.ids]);
}
