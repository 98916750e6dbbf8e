//! The Rust baseline of benchmarks/ffi_bench.sh: the core `Worker::run` with a no-op handler
//! over `rows` pull rows of `source`, timed from start until every row is processed.
//! Usage: bench_core <database url> <source> <rows> <batch> <concurrency>
//! Prints one line: `rows_per_sec=<n> seconds=<s>`.

use std::time::{Duration, Instant};

use queuebox_core::{Outcome, Worker, WorkerOptions};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let (url, source, rows, batch, conc) = (&a[1], &a[2], a[3].parse::<u64>()?, a[4].parse::<u32>()?, a[5].parse::<u32>()?);
    let mut opts = WorkerOptions::new(source.as_str());
    opts.batch_size = batch;
    opts.concurrency = conc;
    opts.poll_interval = Duration::from_millis(50);
    let worker = Worker::connect(url, opts).await?;
    let started = Instant::now();
    let w = worker.clone();
    let stop = async move {
        while w.stats().completed < rows {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    worker.run(|_task| async { Ok(Outcome::Complete) }, stop).await?;
    let secs = started.elapsed().as_secs_f64();
    println!("rows_per_sec={:.1} seconds={:.3}", rows as f64 / secs, secs);
    Ok(())
}
