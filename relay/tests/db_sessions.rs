//! Through the real `queuebox` binary and a real PostgreSQL: the relay's
//! sessions carry an `application_name` naming the replica (unless the URL names one), and a
//! database outage logs one warning for the refused requests plus a summary line with their
//! count, not one warning per request.

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncBufReadExt;

const SOURCES: &str = "routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
";

/// The relay's `application_name`s on its database, as `pg_stat_activity` shows them.
async fn relay_sessions(store: &queuebox_core::store::postgres::PgStore) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn relay_sessions_carry_an_application_name_naming_the_replica_unless_the_url_names_one() {
    let (url, store) = fresh_db("app_name").await;
    let rx = Receiver::start().await;
    // The test's own sessions (this store) have none.
    let own: Vec<String> = relay_sessions(&store).await;
    let mut relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let expected = format!("queuebox-relay@{host}/{}", relay.child.id().unwrap());
    let names = relay_sessions(&store).await;
    let relays: Vec<&String> = names.iter().filter(|n| !own.contains(n)).collect();
    assert!(!relays.is_empty(), "no relay session: {names:?}");
    assert!(
        relays.iter().all(|n| **n == expected),
        "every relay session is named {expected}: {names:?}"
    );
    relay.kill();
    let _ = relay.child.wait().await;

    // A URL that names the sessions wins.
    let named = format!("{url}?application_name=ops-chosen");
    let mut relay = Relay::start(&format!("{}{SOURCES}", base_config(&named, &rx.url()))).await;
    let names = relay_sessions(&store).await;
    assert!(
        names.iter().any(|n| n == "ops-chosen"),
        "the URL's application_name: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("queuebox-relay")),
        "{names:?}"
    );
    relay.kill();
}

#[tokio::test]
async fn an_outage_logs_one_warning_and_a_counted_summary_not_one_per_refused_request() {
    let cluster = Cluster::new(free_port(), "warn-limit");
    cluster.script_async("start").await;
    let rx = Receiver::start().await;
    let port = free_port();
    let yaml = base_config(&cluster.url(), &rx.url())
        .replace(
            "  startupTimeoutMs: 60000\n",
            "  startupTimeoutMs: 60000\n  connectionTimeoutMs: 1000\n",
        )
        .replace("{port}", &port.to_string());
    let config = write_config(&format!("{yaml}{SOURCES}"));
    let mut child = relay_command(config.path(), &["run"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the relay did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    cluster.script_async("stop").await;
    const N: usize = 20;
    let client = reqwest::Client::new();
    let posts = (0..N).map(|i| {
        let client = client.clone();
        async move {
            client
                .post(format!("http://127.0.0.1:{port}/inbox/orders"))
                .header("content-type", "application/json")
                .body(format!(r#"{{"id":"o{i}"}}"#))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let statuses = futures::future::join_all(posts).await;
    assert!(statuses.iter().all(|s| *s == 503), "{statuses:?}");

    let warning = "inbox insert: the database is unreachable";
    let summary = format!("{} more in the last 10 s", N - 1);
    // The summary comes within one interval (10 s) of the first warning.
    let deadline = Instant::now() + Duration::from_secs(25);
    while !log.lock().unwrap().contains(&summary) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = log.lock().unwrap().clone();
    let full: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(warning) && !l.contains("more in the last"))
        .collect();
    assert_eq!(full.len(), 1, "one full warning for {N} refusals:\n{text}");
    assert!(
        text.contains(&summary),
        "a summary line with the count:\n{text}"
    );
    // The relay loops retry their claims every poll interval during the outage (more than
    // ten times in these seconds): each logs its first failure in full, then only counts.
    for claim in ["push claim failed", "outbox claim failed"] {
        let full = text
            .lines()
            .filter(|l| l.contains(claim) && !l.contains("more in the last"))
            .count();
        assert!(
            full <= 1,
            "{full} full '{claim}' warnings in one outage:\n{text}"
        );
    }
    let metric = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metric.contains(&format!(
            "queuebox_repeated_warnings_total{{kind=\"inbox_database_unreachable\"}} {N}"
        )),
        "{metric}"
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
}
