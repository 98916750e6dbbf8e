//! The README's Rust quick start, built in a new cargo project outside the repository that
//! depends on the packaged queuebox-core (tests/install/crate/run.sh):
//!   quickstart migrate URL   applies the schema (the migrations embedded in the crate)
//!   quickstart work URL      handles one row of source "orders", then stops
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::backend::{connect, DatabaseSettings};
use queuebox_core::{Outcome, Worker, WorkerOptions};
use tokio::sync::Notify;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, url) = (args[1].as_str(), args[2].as_str());
    if mode == "migrate" {
        let report = connect(&DatabaseSettings::new(url))
            .await?
            .migrate()
            .await?;
        println!("migrated: {:?}", report.applied);
        return Ok(());
    }
    let handled = Arc::new(Notify::new());
    let stop = handled.clone();
    let worker = Worker::connect(url, WorkerOptions::new("orders")).await?;
    let run = worker.run(
        move |task| {
            let handled = handled.clone();
            async move {
                // Business write in the same transaction as the completion: both commit or neither.
                let total = task.message().payload["total"].to_string();
                task.execute(
                    "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2::numeric)",
                    &[task.message().id.to_string().into(), total.into()],
                )
                .await?;
                handled.notify_one();
                Ok(Outcome::Complete)
            }
        },
        async move {
            stop.notified().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        },
    );
    tokio::time::timeout(Duration::from_secs(60), run).await??;
    Ok(())
}
