//! The Rust baseline of benchmarks/ffi_bench.sh: the core `Worker::run` with a no-op handler
//! over `rows` pull rows of `source`, timed from start until every row is processed.
//! Usage: bench_core <database url> <source> <rows> <batch> <concurrency> [run|next]
//! (batch 0: unset, the core's adaptive batch).
//! `run` (default) is `Worker::run`; `next` is the loop the wrappers run over the C ABI
//! (`next()` in one loop, each task handled and completed on its own), in pure Rust, so
//! that the difference to a wrapper is the boundary alone.
//! Prints one line: `rows_per_sec=<n> seconds=<s>`.

use std::time::{Duration, Instant};

use queuebox_core::{Outcome, Worker, WorkerOptions};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let (url, source, rows, batch, conc) = (
        &a[1],
        &a[2],
        a[3].parse::<u64>()?,
        a[4].parse::<u32>()?,
        a[5].parse::<u32>()?,
    );
    let mut opts = WorkerOptions::new(source.as_str());
    opts.batch_size = (batch > 0).then_some(batch);
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
    if a.get(6).map(String::as_str) == Some("next") {
        let mut done = Box::pin(stop);
        loop {
            tokio::select! {
                _ = &mut done => break,
                t = worker.next() => match t? {
                    Some(task) => {
                        tokio::spawn(async move {
                            let _ = task.complete().await;
                        });
                    }
                    None => break,
                },
            }
        }
        worker.shutdown().await;
    } else {
        worker
            .run(|_task| async { Ok(Outcome::Complete) }, stop)
            .await?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!("rows_per_sec={:.1} seconds={:.3}", rows as f64 / secs, secs);
    Ok(())
}
