//! The inbox relay's backlog gauge counts push rows only: pull rows wait for application
//! workers, not for the relay, and have their own gauge.

mod common;

use common::{eventually, fresh_db, Relay};

#[tokio::test]
async fn the_push_backlog_gauge_stays_zero_while_only_pull_rows_wait() {
    let (db, _store) = fresh_db("gauge").await;
    let relay = Relay::start(&format!(
        "server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
database:
  url: {db}
inbox:
  relay:
    pollIntervalMs: 20
    pendingGaugeIntervalMs: 100
sources:
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyPath: $.id
"
    ))
    .await;
    assert_eq!(
        relay.post("/inbox/jobs", r#"{"id": "j1"}"#, &[]).await.0,
        202
    );
    // The pull row ages for at least a second, several gauge refreshes.
    eventually("the pull gauge reports the waiting row", 20, || async {
        relay
            .metric("queuebox_inbox_pull_oldest_pending_age_seconds ")
            .await
            >= 1.0
    })
    .await;
    let (_, text) = relay.get("/metrics").await;
    let push = text
        .lines()
        .find(|l| l.starts_with("queuebox_inbox_oldest_pending_age_seconds "))
        .unwrap_or_else(|| panic!("the push gauge is exported:\n{text}"));
    let age: f64 = push
        .strip_prefix("queuebox_inbox_oldest_pending_age_seconds ")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{push}"));
    assert_eq!(age, 0.0, "{text}");
}
