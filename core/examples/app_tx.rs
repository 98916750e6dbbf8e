//! docs/rust.md's "Your transaction, your driver" program: an outbox row published and a
//! pull row completed inside transactions the application opened from its own sqlx pool.
//! Built with the crate's examples; core/tests/readme_quick_start.rs checks that the README
//! shows exactly this program (everything below this header).
//!
//! `cargo run -p queuebox-core --example app_tx` (DATABASE_URL, tables `orders` and
//! `payments_seen`).

use queuebox_core::app_tx::{self, OutboxMessage};
use queuebox_core::{Outcome, Worker, WorkerOptions};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let pool = sqlx::PgPool::connect(&url).await?; // the application's own pool

    // Produce: the order and its event commit together, or neither does.
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO orders (id, total) VALUES ($1, $2)")
        .bind(7_i64)
        .bind(42.5_f64)
        .execute(&mut *tx)
        .await?;
    let event = OutboxMessage::new("orders.created", json!({ "order": 7 })).key("order-7");
    let id = app_tx::publish(&mut tx, &event).await?; // the row's id, sent as X-Message-Id
    tx.commit().await?;
    println!("published {id}");

    // Consume: the business write and the completion of the pull row share one commit.
    let worker = Worker::connect(&url, WorkerOptions::new("payments")).await?;
    let handler = move |task: queuebox_core::Task| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await?;
            sqlx::query("INSERT INTO payments_seen (id) VALUES ($1)")
                .bind(task.message().id)
                .execute(&mut *tx)
                .await?;
            // ClaimLost when the lease ran out: `?` drops (rolls back) the transaction.
            app_tx::complete_in(&mut tx, &task).await?;
            tx.commit().await?;
            Ok(Outcome::Complete) // an Err instead rolls back and retries the row
        }
    };
    let stop = async {
        tokio::signal::ctrl_c().await.ok();
    };
    worker.run(handler, stop).await?;
    Ok(())
}
