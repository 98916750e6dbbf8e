//! A crashed relay's rows are taken over within seconds, not after their lease:
//! each relay holds an owner session (a PostgreSQL session advisory lock on its own
//! connection) and records its key on the outbox and push rows it claims; a live relay that
//! finds the key free puts the dead relay's rows back to pending once a second. Real
//! processes, real SIGKILL, a real HTTP receiver, leases of a minute.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// `base_config` with a one-minute lease and publish timeout, delivering to `path`.
fn long_lease_config(url: &str, rx: &Receiver, path: &str) -> String {
    base_config(url, &rx.url())
        .replace("  claimTimeoutMs: 5000\n", "  claimTimeoutMs: 60000\n")
        .replace("    claimTimeoutMs: 5000\n", "    claimTimeoutMs: 60000\n")
        .replace("    path: /hooks\n", &format!("    path: {path}\n"))
        .replace("    timeoutMs: 3000\n", "    timeoutMs: 60000\n")
        + "routes:\n  - topicPattern: '**'\n    destination: rx\n"
}

async fn count(store: &queuebox_core::store::postgres::PgStore, sql: &str) -> i64 {
    scalar_i64(store, sql).await
}

#[tokio::test]
async fn a_killed_relays_outbox_rows_are_delivered_by_another_within_seconds() {
    let (url, store) = fresh_db("crash_outbox").await;
    let rx = Receiver::start().await;
    rx.behaviour.lock().unwrap().hang = true;
    let mut a = Relay::start(&long_lease_config(&url, &rx, "/hang")).await;
    // One statement: A's first claim (woken by the commit) takes all five, then hangs.
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload) SELECT 'crash.t', 'k' || n, '{}' FROM generate_series(1, 5) n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    eventually("A holds all five rows, its owner key on each", 20, || async {
        count(
            &store,
            "SELECT count(*) FROM outbox WHERE state = 'processing' AND claim_owner IS NOT NULL AND lease_expires_at > now() + interval '50 seconds'",
        )
        .await
            == 5
    })
    .await;
    a.kill();
    let _ = a.child.wait().await;
    let killed = Instant::now();
    rx.behaviour.lock().unwrap().hang = false;
    let b = Relay::start(&long_lease_config(&url, &rx, "/hooks").replace("/hang", "/hooks")).await;
    eventually("B delivered A's rows", 20, || async {
        count(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 5
    })
    .await;
    let took = killed.elapsed();
    println!(
        "recovered 5 outbox rows {:.2} s after the SIGKILL (lease 60 s)",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(15),
        "taken over long before the 60 s lease: {took:?}"
    );
    assert_eq!(rx.to("/hooks").len(), 5, "each row delivered once by B");
    assert!(b.metric("queuebox_outbox_messages_reclaimed_total").await >= 5.0);
}

#[tokio::test]
async fn push_rows_of_a_dead_owner_are_forwarded_and_a_live_owners_are_left_alone() {
    let (url, store) = fresh_db("crash_push").await;
    let rx = Receiver::start().await;
    // Two stand-in relays: sessions holding owner keys 71 and 72, each with a push row
    // claimed for a minute; the first session then dies (its connection closes).
    let dead = queuebox_core::store::postgres::PgStore::connect(&url, 1)
        .await
        .unwrap();
    let alive = queuebox_core::store::postgres::PgStore::connect(&url, 1)
        .await
        .unwrap();
    let mut dead_conn = dead.pool().acquire().await.unwrap();
    let mut alive_conn = alive.pool().acquire().await.unwrap();
    for (conn, key) in [(&mut dead_conn, 71_i64), (&mut alive_conn, 72)] {
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut **conn)
            .await
            .unwrap();
        assert!(taken);
        sqlx::query(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption, state, claim_token, claimed_at, lease_expires_at, claim_owner)
             VALUES ('hooks', $1, '{}', 'push', 'processing', gen_random_uuid(), now(), now() + interval '60 seconds', $2)",
        )
        .bind(format!("owned-by-{key}"))
        .bind(key)
        .execute(store.pool())
        .await
        .unwrap();
    }
    drop(dead_conn);
    dead.close().await;
    let started = Instant::now();
    let relay = Relay::start(&(long_lease_config(&url, &rx, "/hooks")
        + "sources:\n  hooks:\n    path: /hooks\n    idempotencyKeyPath: $.id\n    topic: hooks.event\n"))
    .await;
    eventually(
        "the dead owner's push row forwarded and delivered",
        20,
        || async { rx.to("/hooks").len() == 1 },
    )
    .await;
    println!(
        "a dead owner's push row delivered {:.2} s after the relay started (lease 60 s)",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live: (String, Option<i64>) = sqlx::query_as(
        "SELECT state, claim_owner FROM inbox WHERE idempotency_key = 'owned-by-72'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(
        live,
        ("processing".to_string(), Some(72)),
        "a live owner's row waits for its lease"
    );
    assert_eq!(rx.to("/hooks").len(), 1);
    assert!(
        relay
            .metric("queuebox_inbox_messages_reclaimed_total")
            .await
            >= 1.0
    );
    drop(alive_conn);
}
