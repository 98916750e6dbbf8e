//! The README's Rust quick start, compiled by `cargo test` (core/tests/readme_quick_start.rs
//! keeps the README's copy equal to this file): a pull worker on source `jobs` whose business
//! write commits with the row's completion.
//!
//! `DATABASE_URL=postgres://… cargo run -p queuebox-core --example quick_start`

use queuebox_core::{Outcome, Task, Worker, WorkerOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let worker = Worker::connect(&url, WorkerOptions::new("jobs")).await?;
    let handler = |task: Task| async move {
        // Commits together with the row's completion, or not at all.
        let id = task.message().id.to_string();
        task.execute("INSERT INTO jobs_done (id) VALUES ($1::uuid)", &[id.into()])
            .await?;
        Ok(Outcome::Complete) // an Err is retried with backoff, then dead
    };
    worker
        .run(handler, async {
            tokio::signal::ctrl_c().await.ok();
        })
        .await?;
    Ok(())
}
