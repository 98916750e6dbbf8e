//! Slow and stalled clients against the real `queuebox` binary: a request head that never
//! completes is cut off after `server.requestHeaderTimeoutMs`, a body that stalls gets 408
//! after `server.requestBodyTimeoutMs` and stores nothing, and `server.maxConnections`
//! bounds the open connections while the relay keeps serving.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn relay_with(db: &str, server: &str) -> Relay {
    let rx = Receiver::start().await;
    let yaml = base_config(db, &rx.url()).replace(
        "  drainTimeoutMs: 2000\n",
        &format!("  drainTimeoutMs: 2000\n{server}"),
    );
    Relay::start(&format!(
        "{yaml}routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
"
    ))
    .await
}

/// Connects and writes `bytes` (and nothing more).
async fn stalled(relay: &Relay, bytes: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", relay.port)).await.unwrap();
    s.write_all(bytes.as_bytes()).await.unwrap();
    s
}

/// What the server sends before it closes, or `None` when it neither answers nor closes
/// within `wait`.
async fn read_until_close(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

const HALF_HEAD: &str = "POST /inbox/orders HTTP/1.1\r\nHost: relay\r\nContent-Type: appl";

#[tokio::test]
async fn stalled_request_heads_are_disconnected_after_the_header_timeout() {
    let (db, _store) = fresh_db("slowhead").await;
    let relay = relay_with(&db, "  requestHeaderTimeoutMs: 500\n").await;
    let started = Instant::now();
    let mut conns = Vec::new();
    for _ in 0..200 {
        conns.push(stalled(&relay, HALF_HEAD).await);
    }
    let mut open = 0;
    for c in &mut conns {
        if read_until_close(
            c,
            Duration::from_millis(2500).saturating_sub(started.elapsed()),
        )
        .await
        .is_none()
        {
            open += 1;
        }
    }
    eprintln!(
        "stalled connections still open {:?} after the first connect: {open} of 200",
        started.elapsed()
    );
    assert_eq!(
        open, 0,
        "every stalled connection is closed within the 500 ms header timeout (plus slack)"
    );
    // An idle keep-alive connection counts as a stalled head too; a prompt client is served.
    let (s, b) = relay.post("/inbox/orders", r#"{"id":"prompt"}"#, &[]).await;
    assert_eq!(s, 202, "{b}");
}

#[tokio::test]
async fn a_stalled_body_gets_408_within_the_body_timeout_and_nothing_is_stored() {
    let (db, store) = fresh_db("slowbody").await;
    let relay = relay_with(&db, "  requestBodyTimeoutMs: 500\n").await;
    let started = Instant::now();
    let mut c = stalled(&relay, "POST /inbox/orders HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"slow\"").await;
    let answer = read_until_close(&mut c, Duration::from_secs(3))
        .await
        .expect("the relay answers and closes");
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took < Duration::from_secs(2), "408 after {took:?}");
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 0);
    let (s, b) = relay.post("/inbox/orders", r#"{"id":"prompt"}"#, &[]).await;
    assert_eq!(s, 202, "{b}");
}

#[tokio::test]
async fn connections_beyond_max_connections_wait_until_one_closes() {
    let (db, store) = fresh_db("maxconn").await;
    let relay = relay_with(
        &db,
        "  maxConnections: 2\n  requestHeaderTimeoutMs: 30000\n",
    )
    .await;
    let first = stalled(&relay, HALF_HEAD).await;
    let _second = stalled(&relay, HALF_HEAD).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The third connection completes its TCP handshake (the listen backlog) but is not
    // served while two are open.
    let body = r#"{"id":"third"}"#;
    let mut third = stalled(
        &relay,
        &format!("POST /inbox/orders HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
    )
    .await;
    assert_eq!(
        read_until_close(&mut third, Duration::from_millis(800)).await,
        None,
        "served beyond maxConnections"
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 0);
    drop(first);
    let answer = read_until_close(&mut third, Duration::from_secs(3))
        .await
        .expect("served once a connection closed");
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'third'"
        )
        .await,
        1
    );
    // The relay keeps serving afterwards.
    for i in 0..5 {
        let (s, b) = relay
            .post("/inbox/orders", &format!(r#"{{"id":"after-{i}"}}"#), &[])
            .await;
        assert_eq!(s, 202, "{b}");
    }
}
