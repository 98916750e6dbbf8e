//! `/health/ready` reports each background loop's real liveness: a loop stuck inside a step
//! is `down` (and readiness 503) until it moves again; a disabled loop is `disabled` and
//! never fails readiness.

mod common;

use std::time::{Duration, Instant};

use common::{eventually, fresh_db, Relay};
use serde_json::Value;

fn config(db: &str, loops_enabled: bool) -> String {
    format!(
        "server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
database:
  url: {db}
  connectionTimeoutMs: 1000
outbox:
  enabled: {loops_enabled}
  pollIntervalMs: 50
inbox:
  relay:
    enabled: {loops_enabled}
    pollIntervalMs: 50
retention:
  enabled: {loops_enabled}
  inbox:
    policy: AGE
    maxAge: 7d
"
    )
}

async fn ready(relay: &Relay) -> (u16, Value) {
    let (status, body) = relay.get("/health/ready").await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn loop_status<'a>(body: &'a Value, name: &str) -> &'a str {
    body["components"][name]["status"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_stalled_outbox_poller_makes_readiness_fail_until_it_moves_again() {
    let (db, store) = fresh_db("ready").await;
    let relay = Relay::start(&config(&db, true)).await;
    eventually("ready with every loop up", 20, || async {
        let (status, body) = ready(&relay).await;
        status == 200
            && ["outbox-poller", "inbox-relay", "retention-service"]
                .iter()
                .all(|l| loop_status(&body, l) == "up")
    })
    .await;

    // The poller's next statement waits on this lock for as long as the test holds it.
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::query("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await
        .unwrap();
    let locked = Instant::now();
    eventually("readiness notices the stalled poller", 20, || async {
        let (status, body) = ready(&relay).await;
        status == 503 && loop_status(&body, "outbox-poller") == "down"
    })
    .await;
    let noticed = locked.elapsed();
    let (_, body) = ready(&relay).await;
    assert_eq!(
        loop_status(&body, "inbox-relay"),
        "up",
        "only the stalled loop is down: {body}"
    );
    assert_eq!(body["status"], "unhealthy");
    // Grace: 3 × 50 ms poll + 1000 ms connectionTimeoutMs + 1 s.
    assert!(
        noticed >= Duration::from_millis(2000) && noticed < Duration::from_secs(6),
        "noticed after {noticed:?}"
    );

    tx.rollback().await.unwrap();
    let released = Instant::now();
    eventually("readiness recovers once the poller moves", 20, || async {
        let (status, body) = ready(&relay).await;
        status == 200 && loop_status(&body, "outbox-poller") == "up"
    })
    .await;
    println!(
        "stall noticed after {noticed:?}; recovered {:?} after the lock was released",
        released.elapsed()
    );
}

#[tokio::test]
async fn disabled_loops_are_reported_disabled_and_keep_readiness() {
    let (db, _store) = fresh_db("ready_off").await;
    let relay = Relay::start(&config(&db, false)).await;
    let (status, body) = ready(&relay).await;
    assert_eq!(status, 200, "{body}");
    for l in ["outbox-poller", "inbox-relay", "retention-service"] {
        assert_eq!(loop_status(&body, l), "disabled", "{l}: {body}");
    }
}
