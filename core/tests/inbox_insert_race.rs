//! The PostgreSQL inbox insert answers a duplicate in the same statement that tries the
//! insert (`sql::INSERT`: the existing row's id read in the statement's snapshot). When the
//! first row of a key commits while the repeat waits on it, that snapshot cannot see the row;
//! the repeat must still be a duplicate carrying the stored id (the `LOOKUP_ID` fallback),
//! never an error and never a second row. The same holds for a repeat inside a group of rows
//! (`insert_inbox_many`, whose duplicates' ids are read after its statement committed).

mod support;

use std::time::Duration;

use queuebox_core::store::postgres::PgStore;
use queuebox_core::{InsertOutcome, NewInboxMessage, Store};
use serde_json::json;
use uuid::Uuid;

/// The first insert of `race`/`k1`, not yet committed.
async fn uncommitted_first(store: &PgStore) -> (sqlx::Transaction<'static, sqlx::Postgres>, Uuid) {
    let mut tx = store.pool().begin().await.unwrap();
    let first: Uuid = sqlx::query_scalar(
        "INSERT INTO inbox (source, idempotency_key, payload) VALUES ('race', 'k1', '{}') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    (tx, first)
}

#[tokio::test]
async fn a_repeat_waiting_on_an_uncommitted_first_insert_is_a_duplicate_with_its_id() {
    let (store, _) = support::fresh_store("insert_race").await;
    let (tx, first) = uncommitted_first(&store).await;
    // The repeat takes its snapshot now and waits on the first row's unique index entry.
    let repeat = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .insert_inbox(&NewInboxMessage::new("race", "k1", json!({"n": 2})))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !repeat.is_finished(),
        "the repeat waits for the first insert"
    );
    tx.commit().await.unwrap();
    let outcome = repeat.await.unwrap().expect("a duplicate, not an error");
    assert_eq!(outcome, InsertOutcome::Duplicate(first));
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM inbox WHERE source = 'race' AND idempotency_key = 'k1'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(rows, 1);
    // A plain repeat after the commit is answered by the insert statement itself.
    assert_eq!(
        store
            .insert_inbox(&NewInboxMessage::new("race", "k1", json!({"n": 3})))
            .await
            .unwrap(),
        InsertOutcome::Duplicate(first)
    );
}

#[tokio::test]
async fn a_repeat_in_a_group_waiting_on_an_uncommitted_first_insert_is_a_duplicate_with_its_id() {
    let (store, _) = support::fresh_store("insert_many_race").await;
    let (tx, first) = uncommitted_first(&store).await;
    let group = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .insert_inbox_many(&[
                    NewInboxMessage::new("race", "k0", json!({})),
                    NewInboxMessage::new("race", "k1", json!({"n": 2})),
                ])
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!group.is_finished(), "the group waits for the first insert");
    tx.commit().await.unwrap();
    let out = group.await.unwrap();
    assert!(
        matches!(out[0], Ok(InsertOutcome::Inserted(_))),
        "{:?}",
        out[0]
    );
    assert_eq!(out[1].as_ref().unwrap(), &InsertOutcome::Duplicate(first));
}
