//! Rows 47 and 48: pull rows, claimed and finished by the Rust pull client
//! (`queuebox_core::Worker`, the public library a Rust application links — the same core
//! every language wrapper exposes). The rows come in through the real binary's webhook
//! ingest on a pull source; the client's effects are read back with SQL.

use std::time::Duration;

use queuebox_core::{ErrorKind, Worker, WorkerOptions};

use super::kit::*;
use super::Outcome;

/// Two pull sources keyed by `$.id`, the aggregate in `$.acct`.
const PULL: &str = "sources:
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdPath: $.acct
  jobs2:
    path: /jobs2
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdPath: $.acct
";

async fn worker(url: &str, source: &str, lease: Duration) -> Worker {
    let mut o = WorkerOptions::new(source);
    o.batch_size = Some(10);
    o.concurrency = 10;
    o.lease = lease;
    o.poll_interval = Duration::from_millis(20);
    Worker::connect(url, o).await.expect("worker connects")
}

fn key(t: &queuebox_core::Task) -> String {
    t.message().idempotency_key.clone()
}

/// Row 47: four rows of one aggregate — the first claim hands out one of them, a second
/// worker gets none while it is held; the same aggregate on another source is claimable at
/// the same time; two other aggregates come back in the same claim as the first; the next
/// row of the aggregate follows once the first completes.
pub async fn one_live_claim_per_source_and_aggregate() -> Outcome {
    let (url, store) = empty_db("acc_r47").await;
    let relay = Relay::start(&format!(
        "{}{PULL}",
        base_config(&url, "http://127.0.0.1:9")
    ))
    .await;
    for (path, id, acct) in [
        ("/inbox/jobs", "a1", "A"),
        ("/inbox/jobs", "a2", "A"),
        ("/inbox/jobs", "a3", "A"),
        ("/inbox/jobs", "a4", "A"),
        ("/inbox/jobs", "b1", "B"),
        ("/inbox/jobs", "c1", "C"),
        ("/inbox/jobs2", "x1", "A"),
    ] {
        let body = format!(r#"{{"id":"{id}","acct":"{acct}"}}"#);
        assert_eq!(relay.post(path, &body, &[]).await.0, 202);
    }
    let lease = Duration::from_secs(30);
    let first = worker(&url, "jobs", lease).await;
    let mut got = first.next_batch(10).await.unwrap();
    // The claim may land in two rounds of the client's claimer; gather what it holds.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(Ok(more)) =
        tokio::time::timeout(Duration::from_millis(200), first.next_batch(10)).await
    {
        got.extend(more);
    }
    let mut keys: Vec<String> = got.iter().map(key).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["a1", "b1", "c1"],
        "one row of aggregate A, and B and C in the same claim"
    );
    let second = worker(&url, "jobs", lease).await;
    let nothing = tokio::time::timeout(Duration::from_millis(1500), second.next()).await;
    assert!(
        nothing.is_err(),
        "a second worker gets nothing of A while a1 is held"
    );
    let other_source = worker(&url, "jobs2", lease).await;
    let x = tokio::time::timeout(Duration::from_secs(10), other_source.next())
        .await
        .expect("the other source's A row is claimable now")
        .unwrap()
        .unwrap();
    assert_eq!(key(&x), "x1");
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE aggregate_id = 'A' AND state = 'processing'"
        )
        .await,
        2,
        "one live claim of A per source"
    );
    let a1 = got.iter().find(|t| key(t) == "a1").unwrap();
    a1.complete().await.unwrap();
    let a2 = tokio::time::timeout(Duration::from_secs(10), second.next())
        .await
        .expect("a2 follows once a1 is done")
        .unwrap()
        .unwrap();
    assert_eq!(key(&a2), "a2");
    for t in got.iter().filter(|t| key(t) != "a1").chain([&x, &a2]) {
        t.complete().await.unwrap();
    }
    for w in [&first, &second, &other_source] {
        w.shutdown().await;
    }
    Ok(())
}

/// Row 48: a finish with a stale claim token (another claim took the row) changes nothing
/// and says the claim was lost; a held row's lease is renewed; a retry adds one attempt and
/// schedules the row `delay` from now with its error.
pub async fn stale_tokens_change_nothing_leases_renew_retries_reschedule() -> Outcome {
    let (url, store) = empty_db("acc_r48").await;
    let relay = Relay::start(&format!(
        "{}{PULL}",
        base_config(&url, "http://127.0.0.1:9")
    ))
    .await;
    for id in ["s1", "s2", "s3", "r1"] {
        let body = format!(r#"{{"id":"{id}"}}"#);
        assert_eq!(relay.post("/inbox/jobs", &body, &[]).await.0, 202);
    }
    let w = worker(&url, "jobs", Duration::from_secs(2)).await;
    let mut tasks = Vec::new();
    while tasks.len() < 4 {
        let t = tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .expect("the four rows are claimed")
            .unwrap()
            .unwrap();
        tasks.push(t);
    }
    let by_key = |k: &str| tasks.iter().find(|t| key(t) == k).unwrap();
    let lease_of = |k: &'static str| {
        let store = &store;
        async move {
            sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
                "SELECT lease_expires_at FROM inbox WHERE idempotency_key = $1",
            )
            .bind(k)
            .fetch_one(store.pool())
            .await
            .unwrap()
        }
    };
    // Renewal: the 2 s lease is pushed forward while the row is held.
    let before = lease_of("r1").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = lease_of("r1").await;
    assert!(after > before, "renewed: {before} -> {after}");
    // Stale tokens: another claim (a new token) owns s1..s3 now.
    sqlx::query("UPDATE inbox SET claim_token = gen_random_uuid() WHERE idempotency_key IN ('s1', 's2', 's3')")
        .execute(store.pool())
        .await
        .unwrap();
    let snapshot = |store: &queuebox_core::store::postgres::PgStore| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_as::<_, (String, String, i32, Option<String>)>(
                "SELECT idempotency_key, state, attempt, last_error FROM inbox WHERE idempotency_key LIKE 's%' ORDER BY 1",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let untouched = snapshot(&store).await;
    let outcomes = [
        by_key("s1").complete().await,
        by_key("s2").retry(Duration::from_secs(5), "stale").await,
        by_key("s3").dead("stale").await,
    ];
    for o in outcomes {
        let e = o.expect_err("a stale token finishes nothing");
        assert_eq!(e.kind(), ErrorKind::ClaimLost, "{e}");
    }
    assert_eq!(snapshot(&store).await, untouched, "no row changed");
    // Retry: attempt + 1, scheduled delay from now, the error kept.
    by_key("r1")
        .retry(Duration::from_secs(30), "try later")
        .await
        .unwrap();
    let (attempt, state, in_secs, error): (i32, String, f64, Option<String>) = sqlx::query_as(
        "SELECT attempt, state, EXTRACT(EPOCH FROM scheduled_at - now())::float8, last_error FROM inbox WHERE idempotency_key = 'r1'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!((attempt, state.as_str()), (1, "pending"));
    assert!(
        (28.0..=30.5).contains(&in_secs),
        "scheduled {in_secs} s ahead"
    );
    assert_eq!(error.as_deref(), Some("try later"));
    w.shutdown().await;
    Ok(())
}
