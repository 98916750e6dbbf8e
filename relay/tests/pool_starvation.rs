//! PostgreSQL's connection table is full, so the relay's pool cannot open
//! connections. With the real `queuebox` binary on a throwaway cluster of its own
//! (`max_connections = 12`, `superuser_reserved_connections = 3`, the relay logging in as a
//! role without SUPERUSER) while superuser connections of the test hold the slots:
//! - the error the relay logs names the server's refusal (`remaining connection slots are
//!   reserved …`), not only the acquire timeout;
//! - `/health/ready` reports the database down with that refusal, and
//!   `queuebox_db_pool_starved` is 1;
//! - rows that were published while the sent mark could not be written are marked once
//!   connections free up, and are not delivered again after their lease;
//! - 50 concurrent POSTs meanwhile are each answered 503 within `connectionTimeoutMs` plus a
//!   margin (the deadline applies where failing fast does not apply: the server answers, it only
//!   has no slot, so each insert waits for a connection, bounded by its own deadline).
//!
//! Every check is made and the failures are reported together, so a run against a build
//! without the change shows each one that does not hold.

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use sqlx::{Connection, PgConnection};
use tokio::io::AsyncBufReadExt;

const ROLE: &str = "qb_relay";
/// Shorter than the destination's `timeoutMs` (3 s in `base_config`).
const PUBLISH_DELAY: Duration = Duration::from_secs(2);

async fn superuser(cluster: &Cluster, db: &str) -> PgConnection {
    PgConnection::connect(&format!(
        "postgres://postgres@127.0.0.1:{}/{db}",
        cluster.port
    ))
    .await
    .expect("a superuser connection")
}

async fn relay_backends(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = $1")
        .bind(ROLE)
        .fetch_one(&mut *admin)
        .await
        .unwrap()
}

/// Takes every connection slot a role without SUPERUSER may use: superuser connections
/// fill the table, the relay's sessions are terminated, until none of the relay's is left
/// and the test's own connections alone leave no slot for it. Returns the held connections.
async fn fill_slots(cluster: &Cluster, admin: &mut PgConnection) -> Vec<PgConnection> {
    let mut held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "could not take the relay's slots"
        );
        // All 12 slots (superusers may use the reserved 3).
        while held.len() < 11 {
            match PgConnection::connect(&format!(
                "postgres://postgres@127.0.0.1:{}/postgres",
                cluster.port
            ))
            .await
            {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1")
            .bind(ROLE)
            .execute(&mut *admin)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // 9 of ours (8 held + the admin) leave the relay nothing: 12 - 3 reserved.
        if relay_backends(admin).await == 0 && held.len() + 1 >= 9 {
            while held.len() + 1 > 9 {
                held.pop().unwrap().close().await.unwrap();
            }
            if relay_backends(admin).await == 0 {
                return held;
            }
        }
    }
}

#[tokio::test]
async fn a_full_connection_table_is_named_reported_and_costs_no_redelivery() {
    let cluster = Cluster::new(free_port(), "starve");
    cluster.script_async("start").await;
    {
        let mut admin = superuser(&cluster, "postgres").await;
        for sql in [
            "ALTER SYSTEM SET max_connections = 12",
            "ALTER SYSTEM SET superuser_reserved_connections = 3",
        ] {
            sqlx::query(sql).execute(&mut admin).await.unwrap();
        }
        sqlx::query(&format!("CREATE ROLE {ROLE} LOGIN"))
            .execute(&mut admin)
            .await
            .unwrap();
        sqlx::query(&format!("ALTER DATABASE queuebox OWNER TO {ROLE}"))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
    }
    // max_connections takes a restart.
    cluster.script_async("stop").await;
    cluster.script_async("start").await;

    let rx = Receiver::start().await;
    rx.behaviour.lock().unwrap().first_delay = Some(PUBLISH_DELAY);
    let url = format!("postgres://{ROLE}@127.0.0.1:{}/queuebox", cluster.port);
    let yaml = base_config(&url, &rx.url())
        .replace(
            "  startupTimeoutMs: 60000\n",
            "  startupTimeoutMs: 60000\n  connectionTimeoutMs: 1000\n  poolSize: 4\n",
        )
        .replace(
            "  claimTimeoutMs: 5000\n  maxAttempts: 2\n",
            "  claimTimeoutMs: 8000\n  maxAttempts: 2\n",
        );
    let yaml = format!(
        "{yaml}routes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n    topic: orders\n"
    );
    let port = free_port();
    let config = write_config(&yaml.replace("{port}", &port.to_string()));
    let mut cmd = relay_command(config.path(), &["run"]);
    cmd.env("RUST_LOG", "info");
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let logs = Arc::new(Mutex::new(Vec::<String>::new()));
    for out in [
        Box::new(child.stderr.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stdout.take().unwrap()),
    ] {
        let logs = logs.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                logs.lock().unwrap().push(l);
            }
        });
    }
    let relay = Relay {
        child,
        port,
        config,
    };
    eventually("the relay is ready", 30, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;

    // Five rows in one statement (one claim takes them all); the receiver holds each first
    // delivery for PUBLISH_DELAY.
    let mut admin = superuser(&cluster, "queuebox").await;
    sqlx::query(
        "INSERT INTO outbox (topic, payload) SELECT 'orders', jsonb_build_object('n', n) FROM generate_series(1, 5) n",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while rx.in_flight.load(std::sync::atomic::Ordering::SeqCst) < 5 {
        if Instant::now() > until {
            for l in logs.lock().unwrap().iter() {
                eprintln!("relay log: {l}");
            }
            panic!(
                "the five publishes are not in flight: {} deliveries",
                rx.deliveries().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The connection table fills up while they are in flight: the relay's sent mark finds
    // no connection.
    let held = fill_slots(&cluster, &mut admin).await;
    let starved_at = Instant::now();
    let mut failures = Vec::<String>::new();
    let refusal = "remaining connection slots are reserved";

    // Wait for the publishes to end and the mark to fail at least once.
    let marked_failed = |logs: &Arc<Mutex<Vec<String>>>| {
        logs.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("could not mark") && !l.contains("delayed sent mark"))
    };
    let until = Instant::now() + PUBLISH_DELAY + Duration::from_secs(5);
    while !marked_failed(&logs) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mark_lines: Vec<String> = logs
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("could not mark"))
        .cloned()
        .collect();
    if mark_lines.is_empty() {
        failures.push("no log line says the sent mark could not be written".into());
    } else if !mark_lines.iter().all(|l| l.contains(refusal)) {
        failures.push(format!(
            "the failed mark's log does not name the server's refusal ({refusal:?}): {}",
            mark_lines[0]
        ));
    }

    let (status, body) = relay.get("/health/ready").await;
    eprintln!("readiness while the connection table is full: {status} {body}");
    if status != 503 || !body.contains(refusal) {
        failures.push(format!(
            "/health/ready does not report the pool starved with the refusal: {status} {body}"
        ));
    }
    let starved = relay.metric("queuebox_db_pool_starved").await;
    if starved != 1.0 {
        failures.push(format!("queuebox_db_pool_starved is {starved}, not 1"));
    }

    // Ingest while the table is full: each POST waits for a connection at most its own
    // connectionTimeoutMs (1 s), not behind the inserts queued before it.
    let got = burst(&relay, 50).await;
    let mut ms: Vec<u128> = got.iter().map(|(_, d)| d.as_millis()).collect();
    ms.sort();
    eprintln!(
        "50 concurrent POSTs, connection table full: statuses {:?}, min {} ms, median {} ms, p99 {} ms, max {} ms",
        got.iter().map(|(s, _)| *s).collect::<std::collections::BTreeSet<_>>(),
        ms[0],
        ms[25],
        ms[49],
        ms[49]
    );
    let bound = Duration::from_millis(1000 + 500);
    let late = got.iter().filter(|(_, d)| *d > bound).count();
    if late > 0 || got.iter().any(|(s, _)| *s != 503) {
        failures.push(format!(
            "50 POSTs while the table is full: {late} answered after {bound:?} (connectionTimeoutMs + 0.5 s), statuses {:?}",
            got.iter().map(|(s, _)| *s).collect::<std::collections::BTreeSet<_>>()
        ));
    }

    // Free the slots after ~3 s: the mark gets through (or, without the retry, does not).
    let hold_for = Duration::from_secs(3).saturating_sub(starved_at.elapsed());
    tokio::time::sleep(hold_for).await;
    for c in held {
        c.close().await.unwrap();
    }
    eprintln!("slots held for {:?}", starved_at.elapsed());

    // Past the leases (claimTimeoutMs 8 s, last renewed before the table filled): a row
    // left `processing` is reclaimed and delivered again by now.
    let sent_by = Instant::now() + Duration::from_secs(10);
    let mut sent = 0;
    while Instant::now() < sent_by {
        sent = scalar(
            &mut admin,
            "SELECT count(*) FROM outbox WHERE state = 'sent'",
        )
        .await;
        if sent == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if sent != 5 {
        failures.push(format!(
            "{sent} of 5 published rows are marked sent {:?} after the slots were freed",
            Duration::from_secs(10)
        ));
    }
    let watch_until = starved_at + Duration::from_secs(14);
    tokio::time::sleep(watch_until.saturating_duration_since(Instant::now())).await;
    let mut per_id = std::collections::BTreeMap::<String, usize>::new();
    for d in rx.deliveries() {
        *per_id
            .entry(d.h("x-message-id").unwrap_or("?").to_string())
            .or_default() += 1;
    }
    eprintln!("deliveries per message id: {per_id:?}");
    if per_id.len() != 5 || per_id.values().any(|&n| n != 1) {
        failures.push(format!(
            "each of the 5 rows must be delivered exactly once: {per_id:?}"
        ));
    }
    let (status, body) = relay.get("/health/ready").await;
    if status != 200 {
        failures.push(format!(
            "/health/ready after the slots were freed: {status} {body}"
        ));
    }
    for l in logs.lock().unwrap().iter().filter(|l| {
        l.contains("could not mark")
            || l.contains("delayed sent mark")
            || l.contains("cannot open a connection")
            || (std::env::var_os("QB_TEST_ALL_LOGS").is_some() && !l.contains("INFO"))
    }) {
        eprintln!("relay log: {l}");
    }
    drop(relay);
    admin.close().await.unwrap();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

async fn scalar(c: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(c).await.unwrap()
}

/// `n` POSTs at once to `/inbox/orders`; each (status, latency).
async fn burst(relay: &Relay, n: usize) -> Vec<(u16, Duration)> {
    let client = reqwest::Client::new();
    let gate = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, url, gate) = (client.clone(), relay.url("/inbox/orders"), gate.clone());
        tasks.push(tokio::spawn(async move {
            gate.wait().await;
            let t0 = Instant::now();
            let status = client
                .post(url)
                .header("content-type", "application/json")
                .body(format!(r#"{{"id":"full-{i}"}}"#))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            (status, t0.elapsed())
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}
