//! How many rows a worker without an explicit batch holds, seen in the database: slow
//! handlers keep it near its handler count, so other workers (or a crashed worker's
//! recovery) are not left waiting behind its prefetch, while fast handlers still claim the
//! whole adaptive batch (`worker::prefetch`).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::{Outcome, Worker, WorkerOptions};
use sqlx::PgPool;
use support::*;

fn opts(concurrency: u32) -> WorkerOptions {
    WorkerOptions {
        concurrency,
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_secs(10),
        shutdown_grace: Duration::from_secs(5),
        ..WorkerOptions::new("s")
    }
}

/// Runs a worker whose handler sleeps `handler` over `rows` rows and samples the rows in
/// `processing` until all are processed: (time since start, count) pairs.
async fn drain_sampling(
    pool: &PgPool,
    url: &str,
    rows: usize,
    concurrency: u32,
    handler: Duration,
) -> Vec<(Duration, i64)> {
    insert_pull_rows(pool, "s", rows, |_| None).await;
    let w = Worker::connect(url, opts(concurrency)).await.unwrap();
    assert_eq!(w.options().batch_size, None);
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let run = tokio::spawn(async move {
        w.run(
            move |_task| async move {
                if !handler.is_zero() {
                    tokio::time::sleep(handler).await;
                }
                Ok(Outcome::Complete)
            },
            async move { s2.notified().await },
        )
        .await
        .unwrap();
    });
    let start = Instant::now();
    let mut samples = Vec::new();
    while count_state(pool, "processed").await < rows as i64 {
        assert!(start.elapsed() < Duration::from_secs(120), "drain too slow");
        samples.push((start.elapsed(), count_state(pool, "processing").await));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.notify_one();
    run.await.unwrap();
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handlers_hold_about_their_slots_not_the_adaptive_batch() {
    let (store, url) = fresh_store("prefetchslow").await;
    let pool = store.pool().clone();
    assert_eq!(opts(4).batch(), 1024);
    let samples = drain_sampling(&pool, &url, 60, 4, Duration::from_millis(200)).await;
    // Before a handler has finished (none can within its 200 ms) the worker holds at most
    // max(10, 2 × 4).
    let cold = samples
        .iter()
        .filter(|s| s.0 < Duration::from_millis(200))
        .map(|s| s.1)
        .max()
        .unwrap();
    assert!(cold <= 10, "held {cold} rows, batch 1024: {samples:?}");
    // Once 200 ms handlers are measured against a claim of a few ms the target is 4 running
    // and one or two waiting (at most 6 with claims under 50 ms; 8 allows claims of up to
    // ~100 ms on a loaded machine). The database also sees, for the few ms their batched
    // statement runs, rows whose handlers finished: with the adaptive batch those do not
    // count against the target, so the next claim overlaps that statement (`held_and_running`),
    // and a sample that lands in that window reads up to target + 4 (CI once read 9 in one
    // of 350 samples). So: most samples within the target, none beyond target + handlers.
    let mut settled: Vec<i64> = samples
        .iter()
        .filter(|s| s.0 > Duration::from_millis(500))
        .map(|s| s.1)
        .collect();
    settled.sort_unstable();
    assert!(settled.len() >= 20, "too few samples: {samples:?}");
    let p90 = settled[settled.len() * 9 / 10];
    let median = settled[settled.len() / 2];
    let max = *settled.last().unwrap();
    assert!(p90 <= 8, "held {p90} rows (p90) once measured: {samples:?}");
    assert!(
        max <= 8 + 4,
        "held {max} rows once measured, beyond target + completing: {samples:?}"
    );
    assert!(median >= 4, "the 4 handlers kept busy: {samples:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_op_handlers_still_claim_the_whole_adaptive_batch() {
    let (store, url) = fresh_store("prefetchfast").await;
    let pool = store.pool().clone();
    let samples = drain_sampling(&pool, &url, 5000, 4, Duration::ZERO).await;
    let max = samples.iter().map(|s| s.1).max().unwrap();
    // The batch's rows plus, with the adaptive batch, up to a batch whose completion
    // statement runs while the next claim does (`WorkerOptions::batch_size`).
    assert!(
        max <= 2 * 1024,
        "never more than twice the batch (1024): held {max}"
    );
    assert!(
        max >= 300,
        "a no-op worker holds far beyond 2 × 4 and beyond the old batch of 256, up to the batch of 1024: held {max}"
    );
}
