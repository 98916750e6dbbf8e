//! `Worker::next_batch` and `Task::complete_all` against a real PostgreSQL: the batch
//! hand-out a language wrapper uses to cross its boundary once per batch instead of once
//! per row. Each task in a batch keeps its own permit, fence and finish.

mod support;

use std::time::Duration;

use queuebox_core::{Error, RetryPolicy, Worker, WorkerOptions};
use support::*;

fn opts(source: &str, batch_size: u32, concurrency: u32) -> WorkerOptions {
    WorkerOptions {
        batch_size: Some(batch_size),
        concurrency,
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(50),
            ..RetryPolicy::default()
        },
        ..WorkerOptions::new(source)
    }
}

async fn wait_for_state(pool: &sqlx::PgPool, state: &str, n: i64) {
    let start = std::time::Instant::now();
    while count_state(pool, state).await != n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{state} rows never reached {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_batch_hands_out_what_is_claimed_up_to_max_and_the_free_slots() {
    let (store, url) = fresh_store("nbslots").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 20, |_| None).await;
    let w = Worker::connect(&url, opts("s", 10, 8)).await.unwrap();

    let first = w.next_batch(32).await.unwrap();
    assert_eq!(first.len(), 8, "bounded by the 8 concurrency slots");
    assert_eq!(w.in_flight(), 8);
    assert_eq!(
        count_state(&pool, "processing").await,
        10,
        "one claim of batch_size"
    );

    let results = queuebox_core::Task::complete_all(&first).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(count_state(&pool, "processed").await, 8);
    assert_eq!(w.in_flight(), 0);

    // Two rows of the first claim are still buffered: the batch takes them without waiting
    // for (or running) another claim, even though max allows more.
    let rest = w.next_batch(5).await.unwrap();
    assert_eq!(rest.len(), 2);
    let max_one = {
        let mut all = queuebox_core::Task::complete_all(&rest).await;
        all.retain(|r| r.is_err());
        assert!(all.is_empty(), "{all:?}");
        w.next_batch(1).await.unwrap()
    };
    assert_eq!(max_one.len(), 1, "max 1 hands out one task");
    let ids: std::collections::HashSet<_> = first
        .iter()
        .chain(&rest)
        .chain(&max_one)
        .map(|t| t.message().id)
        .collect();
    assert_eq!(ids.len(), 11, "no row handed out twice");
    assert!(matches!(
        w.next_batch(0).await,
        Err(Error::InvalidInput(m)) if m.contains("max")
    ));
    max_one[0].complete().await.unwrap();
    assert_eq!(w.stats().completed, 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_claim_in_a_batch_fails_only_that_task() {
    let (store, url) = fresh_store("nblost").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 3, |_| None).await;
    let w = Worker::connect(&url, opts("s", 10, 4)).await.unwrap();
    let batch = w.next_batch(10).await.unwrap();
    assert_eq!(batch.len(), 3);
    // Another owner takes the middle row: its fence no longer matches.
    sqlx::query("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1")
        .bind(batch[1].message().id)
        .execute(&pool)
        .await
        .unwrap();
    let results = queuebox_core::Task::complete_all(&batch).await;
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(
        matches!(&results[1], Err(Error::ClaimLost { id, .. }) if *id == batch[1].message().id),
        "{results:?}"
    );
    assert_eq!(count_state(&pool, "processed").await, 2);
    let lost_state: String = sqlx::query_scalar("SELECT state FROM inbox WHERE id = $1")
        .bind(batch[1].message().id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        lost_state, "processing",
        "the fenced-out completion wrote nothing"
    );
    let s = w.stats();
    assert_eq!((s.completed, s.claims_lost), (2, 1));
    assert_eq!(w.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_batch_out_releases_the_rest_and_loses_nothing() {
    let (store, url) = fresh_store("nbshutdown").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 10, |_| None).await;
    let w = Worker::connect(&url, opts("s", 10, 4)).await.unwrap();
    let batch = w.next_batch(10).await.unwrap();
    assert_eq!(batch.len(), 4);
    assert_eq!(count_state(&pool, "processing").await, 10);

    let w2 = w.clone();
    let shutdown = tokio::spawn(async move { w2.shutdown().await });
    // The six claimed rows never handed out go back to pending, no attempt spent...
    wait_for_state(&pool, "pending", 6).await;
    assert!(w.next_batch(10).await.unwrap().is_empty(), "stopping");
    // ...while the batch already out finishes normally.
    let results = queuebox_core::Task::complete_all(&batch).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(shutdown.await.unwrap(), 0, "nothing abandoned");
    assert_eq!(count_state(&pool, "processed").await, 4);
    let spent: i64 = sqlx::query_scalar("SELECT coalesce(sum(attempt), 0) FROM inbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(spent, 0);

    // Nothing lost: a second worker drains the released rows, each exactly once.
    let w = Worker::connect(&url, opts("s", 10, 4)).await.unwrap();
    let mut done = 0;
    while done < 6 {
        let batch = w.next_batch(10).await.unwrap();
        done += batch.len();
        for r in queuebox_core::Task::complete_all(&batch).await {
            r.unwrap();
        }
    }
    assert_eq!(done, 6);
    assert_eq!(count_state(&pool, "processed").await, 10);
    w.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batch_loops_complete_every_row_once() {
    let (store, url) = fresh_store("nbdrain").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "s", 2000, |_| None).await;
    let w = Worker::connect(&url, opts("s", 64, 16)).await.unwrap();
    let mut loops = Vec::new();
    for _ in 0..3 {
        let w = w.clone();
        loops.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let batch = tokio::select! {
                    b = w.next_batch(16) => b.unwrap(),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => break,
                };
                if batch.is_empty() {
                    break;
                }
                seen.extend(batch.iter().map(|t| t.message().id));
                for r in queuebox_core::Task::complete_all(&batch).await {
                    r.unwrap();
                }
            }
            seen
        }));
    }
    let mut ids = Vec::new();
    for l in loops {
        ids.extend(l.await.unwrap());
    }
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(
        (ids.len(), unique.len()),
        (2000, 2000),
        "each row handed out once"
    );
    assert_eq!(count_state(&pool, "processed").await, 2000);
    assert_eq!(w.stats().completed, 2000);
    assert!(w.stats().claims_lost == 0);
    w.shutdown().await;
}
