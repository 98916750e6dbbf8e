//! The application's own transaction (`queuebox_core::app_tx`) against a real PostgreSQL:
//! a pull row completed and an outbox row published with sqlx inside a transaction the
//! application opened from its own pool, the lease rules around it, and input validation.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::app_tx::{self, publish_statement, OutboxMessage, Placeholder};
use queuebox_core::metrics::{self, Component};
use queuebox_core::store::Backend;
use queuebox_core::{Error, Outcome, RetryPolicy, Worker, WorkerOptions};
use serde_json::json;
use sqlx::PgPool;
use support::*;
use uuid::Uuid;

fn opts(source: &str) -> WorkerOptions {
    WorkerOptions {
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            jitter: 0.0,
            ..RetryPolicy::default()
        },
        ..WorkerOptions::new(source)
    }
}

async fn with_business_table(prefix: &str) -> (PgPool, String) {
    let (store, url) = fresh_store(prefix).await;
    let pool = store.pool().clone();
    sqlx::query("CREATE TABLE business (id TEXT PRIMARY KEY, by_worker TEXT)")
        .execute(&pool)
        .await
        .unwrap();
    (pool, url)
}

async fn business_ids(pool: &PgPool) -> Vec<(String, Option<String>)> {
    sqlx::query_as("SELECT id, by_worker FROM business ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn wait_for(timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < timeout, "not done within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_business_write_and_the_completion_commit_in_the_applications_transaction() {
    let (pool, url) = with_business_table("apptx_commit").await;
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    let worker = Worker::connect(&url, opts("s")).await.unwrap();
    let app_pool = pool.clone();
    let stop = Arc::new(tokio::sync::Notify::new());
    let run = {
        let (w, stop) = (worker.clone(), stop.clone());
        tokio::spawn(async move {
            w.run(
                move |task| {
                    let pool = app_pool.clone();
                    async move {
                        // The application's own pool and transaction.
                        let mut tx = pool.begin().await?;
                        sqlx::query("INSERT INTO business (id) VALUES ($1)")
                            .bind(&task.message().idempotency_key)
                            .execute(&mut *tx)
                            .await?;
                        app_tx::complete_in(&mut tx, &task).await?;
                        tx.commit().await?;
                        Ok(Outcome::Complete)
                    }
                },
                async move { stop.notified().await },
            )
            .await
        })
    };
    wait_for(Duration::from_secs(30), || worker.stats().completed == 3).await;
    stop.notify_one();
    run.await.unwrap().unwrap();
    assert_eq!(count_state(&pool, "processed").await, 3);
    assert_eq!(business_ids(&pool).await.len(), 3);
    // Had the worker also run its own COMPLETE after the application's commit, the fence
    // (token cleared by the commit) would have matched nothing and counted a lost claim.
    let s = worker.stats();
    assert_eq!((s.completed, s.claims_lost), (3, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_error_rolls_back_the_applications_transaction_and_the_row_is_retried() {
    let (pool, url) = with_business_table("apptx_fail").await;
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let worker = Worker::connect(&url, opts("s")).await.unwrap();
    let app_pool = pool.clone();
    let stop = Arc::new(tokio::sync::Notify::new());
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = {
        let (w, stop, attempts) = (worker.clone(), stop.clone(), attempts.clone());
        tokio::spawn(async move {
            w.run(
                move |task| {
                    let (pool, attempts) = (app_pool.clone(), attempts.clone());
                    async move {
                        attempts.lock().unwrap().push(task.message().attempt);
                        let mut tx = pool.begin().await?;
                        sqlx::query("INSERT INTO business (id) VALUES ($1)")
                            .bind(&task.message().idempotency_key)
                            .execute(&mut *tx)
                            .await?;
                        app_tx::complete_in(&mut tx, &task).await?;
                        if task.message().attempt < 2 {
                            // The transaction is dropped uncommitted: it rolls back.
                            return Err(
                                format!("payment declined #{}", task.message().attempt).into()
                            );
                        }
                        tx.commit().await?;
                        Ok(Outcome::Complete)
                    }
                },
                async move { stop.notified().await },
            )
            .await
        })
    };
    wait_for(Duration::from_secs(30), || worker.stats().completed == 1).await;
    stop.notify_one();
    run.await.unwrap().unwrap();
    assert_eq!(*attempts.lock().unwrap(), vec![0, 1, 2]);
    let (state, attempt, last_error) = row_state(&pool, "k0").await;
    assert_eq!((state.as_str(), attempt), ("processed", 2));
    assert_eq!(last_error.as_deref(), Some("payment declined #1"));
    assert_eq!(
        business_ids(&pool).await.len(),
        1,
        "only the last attempt's write committed"
    );
    let s = worker.stats();
    assert_eq!((s.retried, s.completed, s.claims_lost), (2, 1, 0));

    // One failure, looked at right after it: attempt 1 and the handler's text.
    insert_pull_rows_with_key(&pool, "s", "once").await;
    let worker = Worker::connect(&url, opts("s")).await.unwrap(); // run() shut the first down
    let t = worker.next().await.unwrap().unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO business (id) VALUES ('once')")
        .execute(&mut *tx)
        .await
        .unwrap();
    app_tx::complete_in(&mut tx, &t).await.unwrap();
    tx.rollback().await.unwrap();
    t.fail("stock service down").await.unwrap();
    let (state, attempt, last_error) = row_state(&pool, "once").await;
    assert_eq!((state.as_str(), attempt), ("pending", 1));
    assert_eq!(last_error.as_deref(), Some("stock service down"));
    assert!(!business_ids(&pool).await.iter().any(|(id, _)| id == "once"));
    worker.shutdown().await;
}

async fn insert_pull_rows_with_key(pool: &PgPool, source: &str, key: &str) {
    sqlx::query("INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ($1, $2, '{}', 'pull')")
        .bind(source)
        .bind(key)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_fails_the_applications_completion_with_claim_lost_and_the_write_rolls_back() {
    let (pool, url) = with_business_table("apptx_lost").await;
    insert_pull_rows(&pool, "s", 1, |_| None).await;
    let a = Worker::connect(&url, opts("s")).await.unwrap();
    let b = Worker::connect(&url, opts("s")).await.unwrap();
    let task_a = a.next().await.unwrap().unwrap();

    // A's handler is slow: its lease runs out on the database clock and B claims the row.
    let mut tx_a = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO business (id, by_worker) VALUES ('k0', 'a')")
        .execute(&mut *tx_a)
        .await
        .unwrap();
    sqlx::query("UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 millisecond'")
        .execute(&pool)
        .await
        .unwrap();
    let task_b = tokio::time::timeout(Duration::from_secs(5), b.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(task_a.message().id, task_b.message().id);

    let lost_before = metrics::claims_lost(Component::Pull);
    let err = app_tx::complete_in(&mut tx_a, &task_a).await.unwrap_err();
    assert!(matches!(err, Error::ClaimLost { .. }), "got {err:?}");
    drop(tx_a); // the application's `?` drops (rolls back) its transaction
    assert!(metrics::claims_lost(Component::Pull) > lost_before);
    assert_eq!(a.stats().claims_lost, 1);
    // The handler's error path after the loss answers ClaimLost again, counted once.
    assert!(matches!(
        task_a.fail("x").await,
        Err(Error::ClaimLost { .. })
    ));
    assert_eq!(a.stats().claims_lost, 1);

    let mut tx_b = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO business (id, by_worker) VALUES ('k0', 'b')")
        .execute(&mut *tx_b)
        .await
        .unwrap();
    app_tx::complete_in(&mut tx_b, &task_b).await.unwrap();
    tx_b.commit().await.unwrap();
    task_b.complete().await.unwrap();
    assert_eq!(
        business_ids(&pool).await,
        vec![("k0".to_string(), Some("b".to_string()))],
        "A's write rolled back, B's committed"
    );
    let (state, attempt, _) = row_state(&pool, "k0").await;
    assert_eq!((state.as_str(), attempt), ("processed", 0));
    assert_eq!(b.stats().claims_lost, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_neither_blocks_on_nor_mistakes_a_row_the_application_completed() {
    let (pool, url) = with_business_table("apptx_renew").await;
    insert_pull_rows(&pool, "s", 2, |_| None).await;
    // Renewal every 200 ms; a lease of 600 ms runs out if one round is held up for it.
    let w = Worker::connect(
        &url,
        WorkerOptions {
            lease: Duration::from_millis(600),
            batch_size: Some(2),
            concurrency: 2,
            ..opts("s")
        },
    )
    .await
    .unwrap();
    let t1 = w.next().await.unwrap().unwrap();
    let t2 = w.next().await.unwrap().unwrap();
    let mut tx = pool.begin().await.unwrap();
    app_tx::complete_in(&mut tx, &t1).await.unwrap();
    // The application holds t1's row lock for five leases before committing. A renewal
    // round that still included t1 would wait on that lock, and t2's lease would run out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t2_live: bool =
        sqlx::query_scalar("SELECT lease_expires_at > clock_timestamp() FROM inbox WHERE id = $1")
            .bind(t2.message().id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(t2_live, "t2's lease was renewed while t1's row was locked");
    assert!(!t1.cancelled().is_cancelled() && !t2.cancelled().is_cancelled());
    tx.commit().await.unwrap();
    // A few more rounds after the commit: the completed row is not reported lost.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!t1.cancelled().is_cancelled());
    t1.complete().await.unwrap();
    t2.complete().await.unwrap();
    assert_eq!(count_state(&pool, "processed").await, 2);
    let s = w.stats();
    assert_eq!((s.completed, s.claims_lost), (2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_task_one_transaction() {
    let (pool, url) = with_business_table("apptx_onetx").await;
    insert_pull_rows(&pool, "s", 2, |_| None).await;
    let w = Worker::connect(&url, opts("s")).await.unwrap();
    let t = w.next().await.unwrap().unwrap();
    t.execute("INSERT INTO business (id) VALUES ('own')", &[])
        .await
        .unwrap();
    let e = t.completion_statement(Placeholder::Dollar).unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(ref m) if m.contains("own transaction")),
        "{e}"
    );
    t.complete().await.unwrap();
    let t = w.next().await.unwrap().unwrap();
    t.completion_statement(Placeholder::Dollar).unwrap();
    let e = t.execute("SELECT 1", &[]).await.unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(ref m) if m.contains("application's transaction")),
        "{e}"
    );
    t.abandon().await;
    w.shutdown().await;
}

async fn outbox_row(pool: &PgPool, id: Uuid) -> Option<serde_json::Value> {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('topic', topic, 'key', key, 'aggregate_type', aggregate_type,
                'payload', payload, 'headers', headers, 'state', state, 'max_attempts', max_attempts,
                'delay_s', round(extract(epoch FROM scheduled_at - created_at)))
           FROM outbox WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_committed_publish_is_a_pending_row_and_a_rolled_back_one_leaves_nothing() {
    let (store, _) = fresh_store("apptx_publish").await;
    let pool = store.pool().clone();

    let mut tx = pool.begin().await.unwrap();
    let gone = app_tx::publish(
        &mut tx,
        &OutboxMessage::new("orders.created", json!({"n": 1})),
    )
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(outbox_row(&pool, gone).await, None);

    let mut tx = pool.begin().await.unwrap();
    let id = app_tx::publish(
        &mut tx,
        &OutboxMessage::new("orders.created", json!({"order": 7, "note": "100%"}))
            .key("order-7")
            .header("traceparent", "00-abc-01")
            .aggregate_type("order")
            .max_attempts(9)
            .delay(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let plain = app_tx::publish(&mut tx, &OutboxMessage::new("t", json!("just a string")))
        .await
        .unwrap();
    assert_eq!(outbox_row(&pool, id).await, None, "invisible before commit");
    tx.commit().await.unwrap();
    assert_eq!(
        outbox_row(&pool, id).await.unwrap(),
        json!({"topic": "orders.created", "key": "order-7", "aggregate_type": "order",
               "payload": {"order": 7, "note": "100%"}, "headers": {"traceparent": "00-abc-01"},
               "state": "pending", "max_attempts": 9, "delay_s": 60})
    );
    assert_eq!(
        outbox_row(&pool, plain).await.unwrap(),
        json!({"topic": "t", "key": null, "aggregate_type": null, "payload": "just a string",
               "headers": {}, "state": "pending", "max_attempts": 5, "delay_s": 0})
    );
    let at = chrono::Utc::now() + chrono::Duration::hours(2);
    let mut tx = pool.begin().await.unwrap();
    let later = app_tx::publish(
        &mut tx,
        &OutboxMessage::new("t", json!({})).scheduled_at(at),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let stored: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT scheduled_at FROM outbox WHERE id = $1")
            .bind(later)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!((stored - at).num_milliseconds().abs() < 1);
}

#[tokio::test]
async fn publish_many_writes_ten_thousand_rows_in_one_statement_in_order() {
    let (store, _) = fresh_store("apptx_many").await;
    let pool = store.pool().clone();
    let messages: Vec<OutboxMessage> = (0..10_000)
        .map(|i| OutboxMessage::new("bulk", json!({ "i": i })).key(format!("k{}", i % 7)))
        .collect();
    let mut tx = pool.begin().await.unwrap();
    // An earlier statement of the same transaction, to show command ids tell statements apart.
    app_tx::publish(&mut tx, &OutboxMessage::new("first", json!({})))
        .await
        .unwrap();
    let ids = app_tx::publish_many(&mut tx, &messages).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids.len(), 10_000);
    // Rows written by one statement share its command id (cmin); the earlier one differs.
    let (rows, commands, in_order): (i64, i64, bool) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT cmin::text),
                bool_and(payload->>'i' = (rn - 1)::text)
           FROM (SELECT payload, cmin, row_number() OVER (ORDER BY sequence) AS rn
                   FROM outbox WHERE topic = 'bulk') r",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((rows, commands, in_order), (10_000, 1, true));
    let first_cmin: String =
        sqlx::query_scalar("SELECT cmin::text FROM outbox WHERE topic = 'first'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let bulk_cmin: String =
        sqlx::query_scalar("SELECT cmin::text FROM outbox WHERE topic = 'bulk' LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_ne!(first_cmin, bulk_cmin);
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 10_000, "the returned ids are the rows' ids");
}

fn json_error(messages: serde_json::Value) -> String {
    let parsed = app_tx::messages_from_json(&messages);
    let e = match parsed {
        Err(e) => e,
        Ok(m) => publish_statement(&m, Placeholder::Dollar, Backend::Postgres).unwrap_err(),
    };
    assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
    e.to_string()
}

#[test]
fn bad_messages_are_refused_naming_the_message_and_the_field() {
    let ok = json!({"topic": "t", "payload": {}});
    let cases = [
        (
            json!([ok, ok, ok, {"topic": "", "payload": {}}]),
            "messages[3].topic is empty",
        ),
        (json!([{"payload": {}}]), "messages[0].topic is required"),
        (json!([{"topic": "t"}]), "messages[0].payload is required"),
        (
            json!([{"topic": "t", "payload": null}]),
            "messages[0].payload is required",
        ),
        (
            json!([{"topic": "x".repeat(256), "payload": 1}]),
            "messages[0].topic has 256 characters",
        ),
        (
            json!([ok, {"topic": "t", "payload": 1, "key": "a\nb"}]),
            "messages[1].key holds the control character",
        ),
        (
            json!([{"topic": "t", "payload": 1, "headers": {"X-Message-Id": "spoof"}}]),
            "messages[0].headers.X-Message-Id",
        ),
        (
            json!([{"topic": "t", "payload": 1, "headers": {"content-length": "3"}}]),
            "messages[0].headers.content-length",
        ),
        (
            json!([{"topic": "t", "payload": 1, "headers": {"x-a": "b\r\nc: d"}}]),
            "messages[0].headers.x-a",
        ),
        (
            json!([{"topic": "t", "payload": 1, "headers": {"x-a": 5}}]),
            "messages[0].headers.x-a must be a string",
        ),
        (
            json!([{"topic": "t", "payload": 1, "max_attempts": 0}]),
            "messages[0].max_attempts must be between 1",
        ),
        (
            json!([{"topic": "t", "payload": 1, "delay_ms": -5}]),
            "messages[0].delay_ms must be a whole number",
        ),
        (
            json!([{"topic": "t", "payload": 1, "delay_ms": 5, "scheduled_at": "2030-01-01T00:00:00Z"}]),
            "messages[0]: give delay_ms or scheduled_at, not both",
        ),
        (
            json!([{"topic": "t", "payload": 1, "scheduled_at": "tomorrow"}]),
            "messages[0].scheduled_at is not an RFC 3339 time",
        ),
        (
            json!([{"topic": "t", "payload": 1, "delay": 5}]),
            "messages[0].delay is not a field of a message",
        ),
        (
            json!([{"topic": "t", "payload": {"a": "\u{0}"}}]),
            "messages[0].payload holds the character U+0000",
        ),
        (json!([]), "messages must hold at least one message"),
        (json!({"topic": "t"}), "messages must be a JSON array"),
    ];
    for (input, expected) in cases {
        let e = json_error(input.clone());
        assert!(
            e.contains(expected),
            "{input}: expected {expected:?} in {e:?}"
        );
    }
    let e = "qmark".parse::<Placeholder>().unwrap_err().to_string();
    assert!(e.contains("placeholder") && e.contains("qmark"), "{e}");
}

#[tokio::test]
async fn bad_input_through_the_sqlx_entry_point_writes_nothing() {
    let (store, _) = fresh_store("apptx_bad").await;
    let pool = store.pool().clone();
    let mut tx = pool.begin().await.unwrap();
    let e = app_tx::publish_many(
        &mut tx,
        &[
            OutboxMessage::new("t", json!({})),
            OutboxMessage::new("t", json!({})).header("x-source", "forged"),
        ],
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("messages[1].headers.x-source"),
        "{e}"
    );
    tx.commit().await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "nothing of a refused batch is written");
}

#[tokio::test]
async fn queuebox_publish_writes_a_row_from_plain_sql_and_from_a_trigger() {
    let (store, _) = fresh_store("apptx_sqlfn").await;
    let pool = store.pool().clone();
    let id: Uuid = sqlx::query_scalar(
        "SELECT queuebox_publish('orders.created', '{\"order\": 7}', key => 'order-7',
                headers => '{\"traceparent\": \"00-abc-01\"}', max_attempts => 3,
                delay_ms => 60000, aggregate_type => 'order')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        outbox_row(&pool, id).await.unwrap(),
        json!({"topic": "orders.created", "key": "order-7", "aggregate_type": "order",
               "payload": {"order": 7}, "headers": {"traceparent": "00-abc-01"},
               "state": "pending", "max_attempts": 3, "delay_s": 60})
    );
    let plain: Uuid = sqlx::query_scalar("SELECT queuebox_publish('t', '[1, 2]')")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        outbox_row(&pool, plain).await.unwrap(),
        json!({"topic": "t", "key": null, "aggregate_type": null, "payload": [1, 2],
               "headers": {}, "state": "pending", "max_attempts": 5, "delay_s": 0})
    );

    // A trigger publishes in the writing transaction: committed with it, or not at all.
    sqlx::raw_sql(
        "CREATE TABLE orders (id INT PRIMARY KEY);
         CREATE FUNCTION orders_publish() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             PERFORM queuebox_publish('orders.created', jsonb_build_object('id', NEW.id), key => NEW.id::text);
             RETURN NEW;
         END $$;
         CREATE TRIGGER orders_publish AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION orders_publish();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO orders VALUES (1)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    sqlx::query("INSERT INTO orders VALUES (2)")
        .execute(&pool)
        .await
        .unwrap();
    let keys: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT key FROM outbox WHERE aggregate_type IS NULL AND topic = 'orders.created'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(keys, vec![Some("2".to_string())]);

    for (call, expected) in [
        ("SELECT queuebox_publish('', '{}')", "topic is required"),
        ("SELECT queuebox_publish(NULL, '{}')", "topic is required"),
        (
            "SELECT queuebox_publish('t', 'null')",
            "payload is required",
        ),
        (
            "SELECT queuebox_publish('t', '{}', headers => '[1]')",
            "headers must be a JSON object of strings",
        ),
        (
            "SELECT queuebox_publish('t', '{}', headers => '{\"a\": 1}')",
            "headers must be a JSON object of strings",
        ),
        (
            "SELECT queuebox_publish('t', '{}', max_attempts => 0)",
            "max_attempts must be at least 1",
        ),
        (
            "SELECT queuebox_publish('t', '{}', delay_ms => -1)",
            "delay_ms must be 0 or more",
        ),
    ] {
        let e = sqlx::query(call)
            .execute(&pool)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{call}: {e}");
    }
}

#[tokio::test]
async fn an_outbox_insert_notifies_queuebox_outbox_once_per_statement_on_commit_only() {
    let (store, url) = fresh_store("apptx_notify").await;
    let pool = store.pool().clone();
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener.listen("queuebox_outbox").await.unwrap();
    let quiet = Duration::from_millis(400);

    let mut tx = pool.begin().await.unwrap();
    app_tx::publish(&mut tx, &OutboxMessage::new("t", json!({})))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(
        tokio::time::timeout(quiet, listener.recv()).await.is_err(),
        "a rolled-back insert notifies nobody"
    );

    let messages: Vec<OutboxMessage> = (0..50)
        .map(|i| OutboxMessage::new("t", json!({ "i": i })))
        .collect();
    let mut tx = pool.begin().await.unwrap();
    app_tx::publish_many(&mut tx, &messages).await.unwrap();
    tx.commit().await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a committed insert notifies")
        .unwrap();
    assert_eq!(n.channel(), "queuebox_outbox");
    assert!(
        tokio::time::timeout(quiet, listener.recv()).await.is_err(),
        "fifty rows of one statement notify once"
    );

    sqlx::query("SELECT queuebox_publish('t', '{}')")
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("queuebox_publish notifies too")
        .unwrap();
}
