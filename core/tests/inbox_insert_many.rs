//! `Store::insert_inbox_many` on PostgreSQL (one `INSERT_MANY` for a group of receipts, the
//! relay's ingest under load): every row gets the outcome `insert_inbox` would give it and is
//! stored as `insert_inbox` would store it; a repeat inside the group is a duplicate of its
//! first row; a row the database refuses fails alone; an outage fails every row and stores
//! none. A repeat of a key whose first insert is still uncommitted: `inbox_insert_race.rs`.

mod support;

use std::time::Duration;

use queuebox_core::trace::TraceContext;
use queuebox_core::{Error, InsertOutcome, NewInboxMessage, Store};
use serde_json::{json, Value};

/// Every column the insert writes, as text, for comparing two rows.
async fn stored(store: &queuebox_core::store::postgres::PgStore, source: &str, key: &str) -> Value {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('aggregate_id', aggregate_id, 'event_type', event_type,
                'payload', payload, 'headers', headers, 'correlation_id', correlation_id,
                'consumption', consumption, 'state', state, 'last_error', last_error,
                'held', scheduled_at > now() + interval '30 seconds',
                'traceparent', traceparent, 'tracestate', tracestate)
           FROM inbox WHERE source = $1 AND idempotency_key = $2",
    )
    .bind(source)
    .bind(key)
    .fetch_one(store.pool())
    .await
    .unwrap()
}

fn full(source: &str, key: &str) -> NewInboxMessage {
    let mut m = NewInboxMessage::new(source, key, json!({"key": key, "n": [1, 2]}))
        .pull()
        .aggregate("order-7");
    m.event_type = Some("order.created".into());
    m.headers = json!({"x-tenant": "t1"}).as_object().unwrap().clone();
    m.correlation_id = Some("corr-1".into());
    m.trace = Some(TraceContext {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        tracestate: Some("vendor=1".into()),
    });
    m
}

#[tokio::test]
async fn a_group_stores_each_row_as_a_single_insert_would_and_answers_each() {
    let (store, _) = support::fresh_store("insert_many").await;
    let before = store
        .insert_inbox(&NewInboxMessage::new("g", "stored-before", json!({})))
        .await
        .unwrap();
    let mut dead = NewInboxMessage::new("g", "dead", json!({"raw": "x"}));
    dead.dead_reason = Some("not JSON".into());
    let mut held = NewInboxMessage::new("g", "held", json!({}));
    held.delay = Some(Duration::from_secs(60));
    let group = vec![
        full("g", "a"),
        NewInboxMessage::new("g", "stored-before", json!({"again": true})),
        NewInboxMessage::new("g", "bad\u{0}key", json!({})),
        dead,
        NewInboxMessage::new("g", "b", json!({"first": true})),
        NewInboxMessage::new("g", "b", json!({"second": true})),
        held,
        NewInboxMessage::new("other", "a", json!({})),
    ];
    // INSERT statements on `inbox`, counted by a statement-level trigger: the group is stored
    // by one, not one per row (the one-by-one path gives the same answers, only slower).
    sqlx::raw_sql(
        "CREATE TABLE inbox_inserts (n int NOT NULL);
         CREATE FUNCTION count_inbox_insert() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO inbox_inserts VALUES (1); RETURN NULL; END $$;
         CREATE TRIGGER count_inbox_insert AFTER INSERT ON inbox
           FOR EACH STATEMENT EXECUTE FUNCTION count_inbox_insert();",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let out = store.insert_inbox_many(&group).await;
    let statements: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox_inserts")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(statements, 1, "the group's rows stored by one INSERT");
    sqlx::raw_sql("DROP TRIGGER count_inbox_insert ON inbox")
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(out.len(), group.len());
    let id = |i: usize| match &out[i] {
        Ok(InsertOutcome::Inserted(id)) => *id,
        other => panic!("row {i}: expected a new row, got {other:?}"),
    };
    let (a, dead_id, b, held_id, other) = (id(0), id(3), id(4), id(6), id(7));
    assert_eq!(
        out[1].as_ref().unwrap(),
        &InsertOutcome::Duplicate(before.id())
    );
    assert!(
        matches!(&out[2], Err(Error::InvalidInput(why)) if why.contains("idempotency_key")),
        "{:?}",
        out[2]
    );
    assert_eq!(out[5].as_ref().unwrap(), &InsertOutcome::Duplicate(b));
    let ids = [a, dead_id, b, held_id, other];
    assert_eq!(
        ids.iter().collect::<std::collections::HashSet<_>>().len(),
        5
    );

    // The same rows through insert_inbox, under another source: stored alike.
    for (key, m) in [
        ("a", full("single", "a")),
        ("dead", group[3].clone()),
        ("held", group[6].clone()),
    ] {
        let mut m = m;
        m.source = "single".into();
        store.insert_inbox(&m).await.unwrap();
        assert_eq!(
            stored(&store, "g", key).await,
            stored(&store, "single", key).await,
            "{key}"
        );
    }
    let b_payload: Value = sqlx::query_scalar(
        "SELECT payload FROM inbox WHERE source = 'g' AND idempotency_key = 'b'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(
        b_payload,
        json!({"first": true}),
        "the first occurrence is stored"
    );
    // `sequence` follows the group's order.
    let order: Vec<String> = sqlx::query_scalar(
        "SELECT idempotency_key FROM inbox WHERE source = 'g' AND idempotency_key <> 'stored-before' ORDER BY sequence",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(order, ["a", "dead", "b", "held"]);
}

#[tokio::test]
async fn a_row_the_database_refuses_fails_alone() {
    let (store, _) = support::fresh_store("insert_many_refused").await;
    // A rule of the user's schema that the core's own validation cannot know.
    sqlx::query("ALTER TABLE inbox ADD CONSTRAINT no_refused CHECK (idempotency_key <> 'refused')")
        .execute(store.pool())
        .await
        .unwrap();
    let group: Vec<_> = ["x", "refused", "y"]
        .iter()
        .map(|k| NewInboxMessage::new("r", *k, json!({})))
        .collect();
    let out = store.insert_inbox_many(&group).await;
    assert!(
        matches!(out[0], Ok(InsertOutcome::Inserted(_))),
        "{:?}",
        out[0]
    );
    assert!(
        matches!(&out[1], Err(Error::Database { code: Some(c), .. }) if c == "23514"),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(out[2], Ok(InsertOutcome::Inserted(_))),
        "{:?}",
        out[2]
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = 'r'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(n, 2);
}

#[tokio::test]
async fn an_outage_fails_every_row_and_stores_none() {
    let (store, url) = support::fresh_store("insert_many_outage").await;
    store.close().await;
    let group: Vec<_> = ["x", "y", "z"]
        .iter()
        .map(|k| NewInboxMessage::new("o", *k, json!({})))
        .collect();
    for o in store.insert_inbox_many(&group).await {
        assert!(matches!(&o, Err(e) if e.is_unavailable()), "{o:?}");
    }
    let check = sqlx::PgPool::connect(&url).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox")
        .fetch_one(&check)
        .await
        .unwrap();
    assert_eq!(n, 0);
}
