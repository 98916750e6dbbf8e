//! Enqueueing pull rows in the application's own transaction (`queuebox_core::enqueue`)
//! and pull priorities, against a real PostgreSQL: commit and rollback, duplicates
//! (also two transactions racing on one key), many rows in one statement, field-named
//! errors, the claim order by priority, an aggregate's order whatever the priorities, a
//! row's own max attempts, and the migration's SQL function from plain SQL.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::store::postgres::PgStore;
use queuebox_core::{
    enqueue, enqueue_many, EnqueueMessage, Error, InsertOutcome, Outcome, RetryPolicy, Store,
    Worker, WorkerOptions,
};
use serde_json::json;
use sqlx::PgPool;
use support::*;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

/// The idempotency keys `store` claims for `source`, `batch` at a time, until a claim is
/// empty; each claim's rows completed before the next (so an aggregate's next row is free).
async fn drain_keys(store: &PgStore, source: &str, batch: u32) -> Vec<Vec<String>> {
    let mut claims = Vec::new();
    loop {
        let rows = store.claim_pull(source, batch, LEASE).await.unwrap();
        if rows.is_empty() {
            return claims;
        }
        for r in &rows {
            assert!(store.complete_pull(&r.claim).await.unwrap());
        }
        claims.push(
            rows.iter()
                .map(|r| r.message.idempotency_key.clone())
                .collect(),
        );
    }
}

async fn count(pool: &PgPool, source: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = $1")
        .bind(source)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_enqueued_row_is_claimable_after_commit_and_a_rollback_leaves_none() {
    let (store, _) = fresh_store("enq_commit").await;
    let pool = store.pool().clone();

    let mut tx = pool.begin().await.unwrap();
    let out = enqueue(
        &mut tx,
        &EnqueueMessage::new("jobs", json!({"n": 1})).idempotency_key("a"),
    )
    .await
    .unwrap();
    let InsertOutcome::Inserted(id) = out else {
        panic!("{out:?}")
    };
    // Not visible to a worker before the commit.
    assert!(store
        .claim_pull("jobs", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    tx.commit().await.unwrap();
    let claimed = store.claim_pull("jobs", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].message.id, id);
    assert_eq!(claimed[0].message.payload, json!({"n": 1}));

    let mut tx = pool.begin().await.unwrap();
    enqueue(&mut tx, &EnqueueMessage::new("jobs", json!({"n": 2})))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(count(&pool, "jobs").await, 1, "the rolled-back row is gone");
    assert!(store
        .claim_pull("jobs", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_repeat_key_returns_the_stored_rows_id_as_a_duplicate() {
    let (store, _) = fresh_store("enq_dup").await;
    let pool = store.pool().clone();
    let msg = EnqueueMessage::new("jobs", json!({"v": 1})).idempotency_key("welcome-42");

    let mut tx = pool.begin().await.unwrap();
    let first = enqueue(&mut tx, &msg).await.unwrap();
    tx.commit().await.unwrap();
    assert!(!first.is_duplicate());

    // Another transaction, and a key with spaces around it (keys are trimmed).
    let mut tx = pool.begin().await.unwrap();
    let again = enqueue(
        &mut tx,
        &EnqueueMessage::new("jobs", json!({"v": 2})).idempotency_key(" welcome-42 "),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(again, InsertOutcome::Duplicate(first.id()));
    assert_eq!(count(&pool, "jobs").await, 1);

    // The same key in another source is another row; no key is a new row every time.
    let mut tx = pool.begin().await.unwrap();
    let out = enqueue_many(
        &mut tx,
        &[
            EnqueueMessage::new("other", json!({})).idempotency_key("welcome-42"),
            EnqueueMessage::new("jobs", json!({})),
            EnqueueMessage::new("jobs", json!({})),
        ],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(out.iter().all(|o| !o.is_duplicate()), "{out:?}");
    let key: String = sqlx::query_scalar("SELECT idempotency_key FROM inbox WHERE id = $1")
        .bind(out[1].id())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        key,
        out[1].id().to_string(),
        "a missing key is the row's id"
    );
}

/// Two real transactions enqueue one key: the second waits for the first's row lock in the
/// unique index, and when the first commits it must return that row's id as a duplicate, not
/// fail and not miss it (its statement's snapshot predates the commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_transactions_racing_on_one_key_store_one_row_and_the_loser_gets_its_id() {
    let (store, _) = fresh_store("enq_race").await;
    let pool = store.pool().clone();
    let msg = EnqueueMessage::new("jobs", json!({})).idempotency_key("race");

    let mut first = pool.begin().await.unwrap();
    let won = enqueue(&mut first, &msg).await.unwrap();
    assert!(!won.is_duplicate());

    let second = {
        let (pool, msg) = (pool.clone(), msg.clone());
        tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            // Inside the function the INSERT waits here for `first`.
            let out = enqueue(&mut tx, &msg).await;
            tx.commit().await.unwrap();
            out
        })
    };
    // Wait until the second transaction is blocked on the first's key.
    let started = Instant::now();
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the second enqueue never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.commit().await.unwrap();
    let lost = second.await.unwrap().expect("no error for the loser");
    assert_eq!(lost, InsertOutcome::Duplicate(won.id()));
    assert_eq!(count(&pool, "jobs").await, 1);
}

#[tokio::test]
async fn many_messages_are_one_statement_with_one_outcome_each_in_order() {
    let (store, _) = fresh_store("enq_many").await;
    let pool = store.pool().clone();
    let msgs: Vec<EnqueueMessage> = (0..5)
        .map(|i| {
            EnqueueMessage::new("jobs", json!({"i": i}))
                .idempotency_key(format!("k{}", i % 4))
                .aggregate_id("acct-1")
                .header("x-tenant", "t1")
        })
        .collect();
    let mut tx = pool.begin().await.unwrap();
    let out = enqueue_many(&mut tx, &msgs).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(out.len(), 5);
    assert!(out[..4].iter().all(|o| !o.is_duplicate()));
    // The fifth repeats the first's key within the same call.
    assert_eq!(out[4], InsertOutcome::Duplicate(out[0].id()));
    // Stored in the caller's order (an aggregate's order is `sequence`).
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT idempotency_key FROM inbox ORDER BY sequence")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(keys, ["k0", "k1", "k2", "k3"]);
    let (consumption, headers): (String, serde_json::Value) =
        sqlx::query_as("SELECT consumption, headers FROM inbox WHERE id = $1")
            .bind(out[1].id())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(consumption, "pull");
    assert_eq!(headers, json!({"x-tenant": "t1"}));
}

#[tokio::test]
async fn bad_input_names_the_message_and_field_and_stores_nothing() {
    let (store, _) = fresh_store("enq_bad").await;
    let pool = store.pool().clone();
    let mut tx = pool.begin().await.unwrap();
    let msgs = [
        EnqueueMessage::new("jobs", json!({})),
        EnqueueMessage::new("jobs", json!({})),
        EnqueueMessage::new("jobs", json!({})).priority(i16::MIN),
    ];
    let e = enqueue_many(&mut tx, &msgs).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("messages[2].priority must be between"),
        "{e}"
    );
    let e = enqueue(
        &mut tx,
        &EnqueueMessage::new("jobs", json!({})).header("bad name", "1"),
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("messages[0].headers.bad name"),
        "{e}"
    );
    tx.commit().await.unwrap();
    assert_eq!(count(&pool, "jobs").await, 0);
}

#[tokio::test]
async fn a_higher_priority_is_claimed_first_across_claims() {
    let (store, _) = fresh_store("enq_prio").await;
    let pool = store.pool().clone();
    let prios: [(&str, i16); 7] = [
        ("a0", 0),
        ("b5", 5),
        ("c-1", -1),
        ("d5", 5),
        ("e10", 10),
        ("f0", 0),
        ("g-32767", -32767),
    ];
    let mut tx = pool.begin().await.unwrap();
    let msgs: Vec<EnqueueMessage> = prios
        .iter()
        .map(|(k, p)| {
            EnqueueMessage::new("jobs", json!({}))
                .idempotency_key(*k)
                .priority(*p)
        })
        .collect();
    enqueue_many(&mut tx, &msgs).await.unwrap();
    tx.commit().await.unwrap();
    let want = ["e10", "b5", "d5", "a0", "f0", "c-1", "g-32767"];
    // One claim of all, in claim order.
    let all = drain_keys(&store, "jobs", 10).await;
    assert_eq!(all, vec![want.to_vec()]);

    // Two at a time: every full claim makes the next start where it stopped (CLAIM_FROM).
    sqlx::query("DELETE FROM inbox")
        .execute(&pool)
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    enqueue_many(&mut tx, &msgs).await.unwrap();
    tx.commit().await.unwrap();
    let pairs: Vec<String> = drain_keys(&store, "jobs", 2)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(pairs, want);
}

#[tokio::test]
async fn an_aggregate_keeps_its_order_whatever_the_priorities() {
    let (store, _) = fresh_store("enq_agg").await;
    let pool = store.pool().clone();
    let mut tx = pool.begin().await.unwrap();
    enqueue_many(
        &mut tx,
        &[
            EnqueueMessage::new("jobs", json!({}))
                .idempotency_key("acct1-first-low")
                .aggregate_id("acct-1")
                .priority(-10),
            EnqueueMessage::new("jobs", json!({}))
                .idempotency_key("other-mid")
                .priority(5),
            EnqueueMessage::new("jobs", json!({}))
                .idempotency_key("acct1-second-high")
                .aggregate_id("acct-1")
                .priority(100),
        ],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // The high-priority row of acct-1 waits for the earlier low-priority one.
    let claims = drain_keys(&store, "jobs", 10).await;
    assert_eq!(
        claims,
        vec![
            vec!["other-mid".to_string(), "acct1-first-low".to_string()],
            vec!["acct1-second-high".to_string()],
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rows_own_max_attempts_decides_when_it_is_dead() {
    let (store, url) = fresh_store("enq_max").await;
    let pool = store.pool().clone();
    let mut tx = pool.begin().await.unwrap();
    enqueue_many(
        &mut tx,
        &[
            EnqueueMessage::new("jobs", json!({}))
                .idempotency_key("once")
                .max_attempts(1),
            EnqueueMessage::new("jobs", json!({})).idempotency_key("policy"),
        ],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(20),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
            jitter: 0.0,
            ..RetryPolicy::default()
        },
        ..WorkerOptions::new("jobs")
    };
    let worker = Worker::connect(&url, opts).await.unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let run = {
        let (w, stop) = (worker.clone(), stop.clone());
        tokio::spawn(async move {
            w.run(
                |_task| async {
                    Ok(Outcome::Retry {
                        after: None,
                        reason: "boom".into(),
                    })
                },
                async move { stop.notified().await },
            )
            .await
        })
    };
    let started = Instant::now();
    while count_state(&pool, "dead").await < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "not dead in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.notify_one();
    run.await.unwrap().unwrap();
    assert_eq!(row_state(&pool, "once").await.1, 1, "dead after its own 1");
    assert_eq!(
        row_state(&pool, "policy").await.1,
        3,
        "dead after the policy's 3"
    );
}

#[tokio::test]
async fn the_sql_function_enqueues_from_plain_sql() {
    let (store, _) = fresh_store("enq_sql").await;
    let pool = store.pool().clone();
    let (id, dup): (Uuid, bool) = sqlx::query_as(
        "SELECT * FROM queuebox_enqueue('emails', 'welcome-42', '{\"user\": 42}', priority => 10, delay_ms => 0)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!dup);
    let again: (Uuid, bool) =
        sqlx::query_as("SELECT * FROM queuebox_enqueue('emails', 'welcome-42', '{}')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(again, (id, true));
    let (priority, consumption): (i16, String) =
        sqlx::query_as("SELECT priority, consumption FROM inbox WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((priority, consumption.as_str()), (10, "pull"));
    // A NULL key: a new row each time, keyed by its id.
    let (id2, dup2): (Uuid, bool) =
        sqlx::query_as("SELECT * FROM queuebox_enqueue('emails', NULL, '[1]')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!dup2 && id2 != id);
    for (call, field) in [
        (
            "queuebox_enqueue('emails', 'k', '{}', priority => 40000)",
            "priority",
        ),
        ("queuebox_enqueue('', 'k', '{}')", "source"),
        ("queuebox_enqueue('emails', 'k', 'null')", "payload"),
        (
            "queuebox_enqueue('emails', 'k', '{}', headers => '{\"a\": 1}')",
            "headers",
        ),
        (
            "queuebox_enqueue('emails', 'k', '{}', max_attempts => 0)",
            "max_attempts",
        ),
    ] {
        let e = sqlx::query(&format!("SELECT * FROM {call}"))
            .execute(&pool)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("messages[0].{field}")), "{call}: {e}");
    }
    let claimed = store.claim_pull("emails", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0].message.id, id, "priority 10 first");
}
