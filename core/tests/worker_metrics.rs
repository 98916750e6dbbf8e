//! A pull worker's metrics on a real PostgreSQL: after a completion (with lease renewals
//! while its handler ran), a retry, a dead-letter and a completion that lost its claim to
//! another worker, the worker's families count each once under its `source`, in its own
//! text and in an application's registry, and agree with its stats.

mod support;

use std::time::Duration;

use queuebox_core::metrics::prometheus_client::registry::Registry;
use queuebox_core::metrics::{encode_text, BUCKETS};
use queuebox_core::{Error, Worker, WorkerOptions};
use support::*;

/// The value of the sample `series` (full name with labels) in `text`.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// The worker's next task, within 10 s.
async fn next(worker: &Worker) -> queuebox_core::Task {
    tokio::time::timeout(Duration::from_secs(10), worker.next())
        .await
        .expect("a task within 10 s")
        .unwrap()
        .expect("the worker is running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_outcomes_are_counted_in_its_metrics_by_source() {
    let (store, url) = fresh_store("worker_metrics").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "metered", 4, |_| None).await;
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(50),
        // Renewed every second while a handler runs.
        lease: Duration::from_secs(3),
        batch_size: Some(4),
        concurrency: 4,
        ..WorkerOptions::new("metered")
    };
    let worker = Worker::connect(&url, opts.clone()).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(next(&worker).await);
    }
    // A handler that runs 1.6 s: at least one renewal round extends the leases.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    tasks[0].complete().await.unwrap();
    tasks[1]
        .retry(Duration::from_secs(60), "try later")
        .await
        .unwrap();
    tasks[2].dead("poison").await.unwrap();
    // The fourth row's lease runs out and another worker claims it: the first one's
    // completion is fenced out.
    sqlx::query("UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE state = 'processing'")
        .execute(&pool)
        .await
        .unwrap();
    let other = Worker::connect(&url, opts).await.unwrap();
    let taken = next(&other).await;
    assert_eq!(taken.message().id, tasks[3].message().id);
    let err = tasks[3].complete().await.unwrap_err();
    assert!(matches!(err, Error::ClaimLost { .. }), "got {err:?}");

    let text = worker.metrics_text();
    let of = |name: &str| sample(&text, &format!("{name}{{source=\"metered\"}}"));
    assert_eq!(of("queuebox_worker_claimed_total"), 4.0, "{text}");
    assert_eq!(of("queuebox_worker_completed_total"), 1.0);
    assert_eq!(of("queuebox_worker_retried_total"), 1.0);
    assert_eq!(of("queuebox_worker_dead_total"), 1.0);
    assert_eq!(of("queuebox_worker_claims_lost_total"), 1.0);
    assert!(of("queuebox_worker_lease_renewals_total") >= 1.0, "{text}");
    assert!(text.contains("# TYPE queuebox_worker_handler_duration_seconds histogram"));
    assert_eq!(of("queuebox_worker_handler_duration_seconds_count"), 4.0);
    // Every handler ran at least 1.6 s: none is in the 1 s bucket.
    let le_1 = sample(
        &text,
        "queuebox_worker_handler_duration_seconds_bucket{source=\"metered\",le=\"1\"}",
    );
    assert_eq!(le_1, 0.0, "{text}");
    assert!(of("queuebox_worker_claim_duration_seconds_count") >= 1.0);
    assert_eq!(
        text.matches("queuebox_worker_claim_duration_seconds_bucket{source=\"metered\"")
            .count(),
        BUCKETS.len() + 1,
        "every bucket and +Inf"
    );
    // The other worker's completion is its own.
    taken.complete().await.unwrap();
    assert_eq!(of("queuebox_worker_completed_total"), 1.0);
    assert_eq!(
        sample(
            &other.metrics_text(),
            "queuebox_worker_completed_total{source=\"metered\"}"
        ),
        1.0
    );

    // The stats read the same series.
    let stats = worker.stats();
    assert_eq!(
        (
            stats.claimed,
            stats.completed,
            stats.retried,
            stats.dead,
            stats.claims_lost
        ),
        (4, 1, 1, 1, 1)
    );
    // Registered into an application's own registry, under its prefix-free names.
    let mut registry = Registry::default();
    registry.register("app_requests", "The application's own counter", {
        let c =
            queuebox_core::metrics::prometheus_client::metrics::counter::Counter::<u64>::default();
        c.inc();
        c
    });
    worker.metrics().register(&mut registry);
    let app = encode_text(&registry);
    assert_eq!(sample(&app, "app_requests_total"), 1.0);
    assert_eq!(
        sample(&app, "queuebox_worker_dead_total{source=\"metered\"}"),
        1.0
    );
    worker.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_sharing_metrics_split_their_series_by_source() {
    let (store, _url) = fresh_store("worker_metrics_shared").await;
    let pool = store.pool().clone();
    insert_pull_rows(&pool, "a", 2, |_| None).await;
    insert_pull_rows(&pool, "b", 1, |_| None).await;
    let shared = queuebox_core::worker::WorkerMetrics::default();
    let mut workers = Vec::new();
    for source in ["a", "b"] {
        let opts = WorkerOptions {
            poll_interval: Duration::from_millis(50),
            ..WorkerOptions::new(source)
        };
        let store: std::sync::Arc<dyn queuebox_core::Store> = store.clone();
        let w = Worker::new_with_metrics(store, opts, shared.clone())
            .await
            .unwrap();
        workers.push(w);
    }
    for (w, n) in workers.iter().zip([2, 1]) {
        for _ in 0..n {
            next(w).await.complete().await.unwrap();
        }
    }
    let text = shared.encode_text();
    assert_eq!(
        sample(&text, "queuebox_worker_completed_total{source=\"a\"}"),
        2.0
    );
    assert_eq!(
        sample(&text, "queuebox_worker_completed_total{source=\"b\"}"),
        1.0
    );
    assert_eq!(
        text.matches("# TYPE queuebox_worker_completed_total counter")
            .count(),
        1,
        "one family for both workers"
    );
    for w in workers {
        w.shutdown().await;
    }
}
