//! Through the real `queuebox` binary with requests written byte for byte:
//! a UTF-8 `X-Idempotency-Key` is accepted and stored exactly; a UTF-8 header value is
//! stored as sent and a value that is not UTF-8 is left out and counted; a body nested
//! deeper than 126 levels is answered 400 saying so.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SOURCES: &str = "
routes:
  - topicPattern: '**'
    destination: rx
sources:
  keyed:
    path: /keyed
    idempotencyKeyHeader: X-Idempotency-Key
    topic: keyed
";

/// Sends `head` (request line and headers, CRLF-separated) and `body` as raw bytes; the
/// status code and body of the answer.
async fn raw(relay: &Relay, head: &[u8], body: &[u8]) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", relay.port))
        .await
        .unwrap();
    let mut req = head.to_vec();
    req.extend_from_slice(
        format!(
            "\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    req.extend_from_slice(body);
    tcp.write_all(&req).await.unwrap();
    let mut resp = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut resp)).await;
    let resp = String::from_utf8_lossy(&resp).into_owned();
    let status = resp.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

async fn start(suite: &str) -> (Relay, queuebox_core::store::postgres::PgStore) {
    let (url, store) = fresh_db(suite).await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;
    (relay, store)
}

#[tokio::test]
async fn a_utf8_idempotency_key_and_utf8_header_values_are_stored_exactly() {
    let (relay, store) = start("utf8_key").await;
    let mut head = b"POST /inbox/keyed HTTP/1.1\r\nHost: x\r\nX-Idempotency-Key: ".to_vec();
    head.extend_from_slice("ключ-1".as_bytes());
    head.extend_from_slice(b"\r\nX-Note: ");
    head.extend_from_slice("café ☕".as_bytes());
    // Latin-1 "café": not UTF-8, so it cannot be stored as JSON text.
    head.extend_from_slice(b"\r\nX-Latin1: caf\xe9");
    let (status, body) = raw(&relay, &head, br#"{"n":1}"#).await;
    assert_eq!(status, 202, "{body}");

    let (key, note, latin1): (String, Option<String>, Option<String>) = sqlx::query_as(
        "SELECT idempotency_key, headers->>'x-note', headers->>'x-latin1' FROM inbox WHERE source = 'keyed'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(key, "ключ-1");
    assert_eq!(note.as_deref(), Some("café ☕"));
    assert_eq!(latin1, None);
    assert_eq!(
        relay
            .metric("queuebox_inbox_headers_dropped_total{source=\"keyed\"}")
            .await,
        1.0
    );

    // The same key again is a duplicate of the first.
    let (status, body) = raw(&relay, &head, br#"{"n":2}"#).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("duplicate"), "{body}");
}

#[tokio::test]
async fn json_nested_deeper_than_126_levels_is_refused_saying_so() {
    let (relay, store) = start("json_depth").await;
    let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    let post =
        |key: &str| format!("POST /inbox/keyed HTTP/1.1\r\nHost: x\r\nX-Idempotency-Key: {key}");
    let (status, body) = raw(&relay, post("d126").as_bytes(), nested(126).as_bytes()).await;
    assert_eq!(status, 202, "126 levels are accepted: {body}");
    for (key, levels) in [("d127", 127), ("d400", 400)] {
        let (status, body) = raw(&relay, post(key).as_bytes(), nested(levels).as_bytes()).await;
        assert_eq!(status, 400, "{levels} levels: {body}");
        assert!(
            body.contains("nesting deeper than 126 levels"),
            "{levels} levels: {body}"
        );
    }
    // Brackets inside strings are text, not nesting.
    let text = format!(r#"{{"s":"{}"}}"#, "[".repeat(300));
    let (status, body) = raw(&relay, post("text").as_bytes(), text.as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox WHERE source = 'keyed'").await,
        2
    );
}
