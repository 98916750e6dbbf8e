//! docs/rust.md's "Typed payloads" program, compiled by `cargo test`
//! (core/tests/readme_quick_start.rs keeps the page's copy equal to this file): a pull worker
//! on source `images` whose handler takes its own `serde` type.
//!
//! `DATABASE_URL=postgres://… cargo run -p queuebox-core --example typed`

use queuebox_core::{typed, Outcome, Task, Worker, WorkerOptions};

#[derive(serde::Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let worker = Worker::connect(&url, WorkerOptions::new("images")).await?;
    // A payload that is not a `Resize` is dead at once, `last_error` naming the field.
    let handler = typed(|task: Task, job: Resize| async move {
        let sql = "UPDATE images SET width = $1 WHERE name = $2";
        task.execute(sql, &[i64::from(job.width).into(), job.image.into()])
            .await?;
        Ok(Outcome::Complete)
    });
    worker
        .run(handler, async {
            tokio::signal::ctrl_c().await.ok();
        })
        .await?;
    Ok(())
}
