//! Typed payloads in the Rust worker (`queuebox_core::typed`, `Task::payload`), against a real
//! PostgreSQL: a payload that decodes reaches the handler as the handler's type; one that does
//! not is dead-lettered at once (no retry), its `last_error` naming the type and the field,
//! and never reaches the handler.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuebox_core::{enqueue_many, typed, EnqueueMessage, Outcome, Task, Worker, WorkerOptions};
use serde::Deserialize;
use serde_json::json;
use support::*;

#[derive(Debug, Deserialize, PartialEq)]
struct Line {
    sku: String,
    qty: i64,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Order {
    id: u64,
    lines: Vec<Line>,
}

#[tokio::test]
async fn a_payload_that_is_not_the_handlers_type_is_dead_at_once_naming_the_field() {
    let (store, url) = fresh_store("typed").await;
    let pool = store.pool().clone();
    let mut tx = pool.begin().await.unwrap();
    let rows = [
        ("good", json!({"id": 7, "lines": [{"sku": "a", "qty": 2}]})),
        (
            "fraction",
            json!({"id": 8, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1.5}]}),
        ),
        ("missing", json!({"lines": []})),
        ("not-an-object", json!("hello")),
    ];
    let messages: Vec<_> = rows
        .iter()
        .map(|(key, payload)| EnqueueMessage::new("orders", payload.clone()).idempotency_key(*key))
        .collect();
    enqueue_many(&mut tx, &messages).await.unwrap();
    tx.commit().await.unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(20),
        ..WorkerOptions::new("orders")
    };
    let worker = Worker::connect(&url, opts).await.unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let run = {
        let (w, stop, seen) = (worker.clone(), stop.clone(), seen.clone());
        tokio::spawn(async move {
            w.run(
                typed(move |_task: Task, order: Order| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push(order);
                        Ok(Outcome::Complete)
                    }
                }),
                async move { stop.notified().await },
            )
            .await
        })
    };
    let started = Instant::now();
    while count_state(&pool, "processed").await + count_state(&pool, "dead").await < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "rows not finished in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.notify_one();
    run.await.unwrap().unwrap();

    assert_eq!(
        *seen.lock().unwrap(),
        vec![Order {
            id: 7,
            lines: vec![Line {
                sku: "a".into(),
                qty: 2
            }]
        }],
        "only the payload that is an Order reached the handler, decoded"
    );
    assert_eq!(row_state(&pool, "good").await.0, "processed");
    let order = std::any::type_name::<Order>();
    for (key, wanted) in [
        ("fraction", format!("payload is not a valid {order}: field lines[1].qty: invalid type: floating point `1.5`, expected i64")),
        ("missing", format!("payload is not a valid {order}: missing field `id`")),
        ("not-an-object", format!("payload is not a valid {order}: invalid type: string \"hello\", expected struct Order")),
    ] {
        let (state, attempt, last_error) = row_state(&pool, key).await;
        // Dead at once: no failed attempt counted, no retry (as in every wrapper).
        assert_eq!((state.as_str(), attempt), ("dead", 0), "{key}: dead at once");
        assert_eq!(last_error.as_deref(), Some(wanted.as_str()), "{key}");
    }
}
