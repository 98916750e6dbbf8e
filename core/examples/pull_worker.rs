//! The example pull worker of the README's main job: inserts sample rows for source
//! `orders` (consumption pull), handles each one in its own transaction (a business write
//! into `example_orders` that commits with the completion), prints what it processed, and
//! stops when the sample is done.
//!
//! `cargo run -p queuebox-core --example pull_worker -- postgres://…`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::{NewInboxMessage, Outcome, Worker, WorkerOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("QUEUEBOX_DATABASE_URL").ok())
        .ok_or("usage: pull_worker <database-url>")?;
    let worker = Worker::connect(
        &url,
        WorkerOptions {
            batch_size: Some(10),
            concurrency: 4,
            poll_interval: Duration::from_millis(200),
            ..WorkerOptions::new("orders")
        },
    )
    .await?;

    let sample = 12usize;
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let mut tx = worker.store().begin().await?;
    tx.execute("CREATE TABLE IF NOT EXISTS example_orders (order_id TEXT PRIMARY KEY, total NUMERIC NOT NULL, inbox_id UUID NOT NULL)", &[]).await?;
    tx.commit().await?;
    for i in 0..sample {
        let payload = serde_json::json!({ "orderId": format!("{run_id}-{i}"), "total": 10 + i, "customer": format!("c{}", i % 3) });
        let msg = NewInboxMessage::new("orders", format!("order-{run_id}-{i}"), payload)
            .pull()
            .aggregate(format!("c{}", i % 3));
        worker.store().insert_inbox(&msg).await?;
        // Sent twice on purpose: the second is a duplicate and is stored once.
        worker.store().insert_inbox(&msg).await?;
    }
    println!("inserted {sample} sample messages (each sent twice) for source `orders`");

    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let (d, f) = (done.clone(), finished.clone());
    let handler = move |task: queuebox_core::Task| {
        let (d, f) = (d.clone(), f.clone());
        async move {
            let m = task.message();
            let order = m.payload["orderId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            task.execute(
                "INSERT INTO example_orders (order_id, total, inbox_id) VALUES ($1, $2, $3::uuid)",
                &[
                    order.as_str().into(),
                    m.payload["total"].as_i64().unwrap_or(0).into(),
                    m.id.to_string().into(),
                ],
            )
            .await?;
            println!(
                "processed {} (customer {}, attempt {}) -> example_orders",
                order,
                m.aggregate_id.as_deref().unwrap_or("-"),
                m.attempt
            );
            if d.fetch_add(1, Ordering::SeqCst) + 1 == sample {
                f.notify_one();
            }
            Ok(Outcome::Complete)
        }
    };
    worker
        .run(handler, async move { finished.notified().await })
        .await?;
    let s = worker.stats();
    println!(
        "done: {} completed, {} retried, {} dead, {} claims lost",
        s.completed, s.retried, s.dead, s.claims_lost
    );
    Ok(())
}
