//! What a careless or hostile sender gets from the real `queuebox` binary, and what the
//! receiver then reads: framing headers are neither stored nor forwarded, so the body
//! arrives whole; values that can never be stored or sent are refused at receipt with 400
//! naming the field; oversized headers answer 431; an extreme HMAC timestamp answers 401.
//! Real PostgreSQL, a real HTTP receiver, requests written byte for byte where the framing
//! matters.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SOURCES: &str = "
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    topic: 'orders.created'
  signed:
    path: /signed
    idempotencyKeyHeader: X-Delivery
    topic: 'orders.signed'
    auth:
      type: hmac
      secret: topsecret
      headerName: X-Signature
      timestampHeader: X-Ts
";

/// The test relay with these sources and `inbox.maxHeaderBytes: 2048`.
async fn start(suite: &str) -> (Relay, Receiver, queuebox_core::store::postgres::PgStore) {
    let (url, store) = fresh_db(suite).await;
    let rx = Receiver::start().await;
    let cfg = base_config(&url, &rx.url()).replace(
        "  maxBodyBytes: 1000\n",
        "  maxBodyBytes: 1000\n  maxHeaderBytes: 2048\n",
    );
    assert!(cfg.contains("maxHeaderBytes"));
    let relay = Relay::start(&format!("{cfg}{SOURCES}")).await;
    (relay, rx, store)
}

/// Sends `head` (request line and headers, CRLF-separated, without the blank line) and
/// `body` as raw bytes and returns the status code of the answer.
async fn raw(relay: &Relay, head: &str, body: &[u8]) -> u16 {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", relay.port))
        .await
        .unwrap();
    let mut req = format!("{head}\r\nConnection: close\r\n\r\n").into_bytes();
    req.extend_from_slice(body);
    tcp.write_all(&req).await.unwrap();
    let mut resp = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut resp)).await;
    resp.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Equal as JSON values: numbers by value (PostgreSQL writes `1e-9` back as `0.000000001`,
/// and serde_json's exact numbers compare as text), everything else as is.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => x.as_f64() == y.as_f64(),
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

async fn stored_header_names(
    store: &queuebox_core::store::postgres::PgStore,
    key: &str,
) -> Vec<String> {
    let h: serde_json::Value =
        sqlx::query_scalar("SELECT headers FROM inbox WHERE idempotency_key = $1")
            .bind(key)
            .fetch_one(store.pool())
            .await
            .unwrap();
    h.as_object()
        .unwrap()
        .keys()
        .map(|k| k.to_ascii_lowercase())
        .collect()
}

async fn delivered(rx: &Receiver, key: &str) -> Delivery {
    eventually(&format!("delivery of {key}"), 20, || async {
        rx.deliveries()
            .iter()
            .any(|d| d.h("x-idempotency-key") == Some(key))
    })
    .await;
    rx.deliveries()
        .into_iter()
        .find(|d| d.h("x-idempotency-key") == Some(key))
        .unwrap()
}

#[tokio::test]
async fn framing_headers_are_neither_stored_nor_forwarded_so_every_body_arrives_whole() {
    let (relay, rx, store) = start("framing").await;

    // Pretty-printed JSON: the sender's Content-Length is longer than the re-encoded body.
    let pretty = "{\n    \"id\": \"pretty1\",\n    \"type\": \"created\"\n}";
    let head = format!("POST /inbox/orders HTTP/1.1\r\nHost: relay.example\r\nContent-Type: application/json\r\nContent-Length: {}", pretty.len());
    assert_eq!(raw(&relay, &head, pretty.as_bytes()).await, 202);

    // A chunked body, with hop-by-hop fields and one the Connection header names.
    let chunked = br#"{"id":"chunked1","note":"sent in two chunks"}"#;
    let (a, b) = chunked.split_at(20);
    let mut body = format!("{:x}\r\n", a.len()).into_bytes();
    body.extend_from_slice(a);
    body.extend_from_slice(format!("\r\n{:x}\r\n", b.len()).as_bytes());
    body.extend_from_slice(b);
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    let head = "POST /inbox/orders HTTP/1.1\r\nHost: relay.example\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Hop: only this hop\r\nX-Tenant: acme\r\nConnection: X-Hop";
    assert_eq!(raw(&relay, head, &body).await, 202);

    // Numbers whose re-encoding is longer than the sender's text.
    let small = r#"{"id":"numbers1","n":1e-5,"m":1e-9}"#;
    let head = format!(
        "POST /inbox/orders HTTP/1.1\r\nHost: relay.example\r\nContent-Length: {}",
        small.len()
    );
    assert_eq!(raw(&relay, &head, small.as_bytes()).await, 202);

    for key in ["pretty1", "chunked1", "numbers1"] {
        let names = stored_header_names(&store, key).await;
        for framing in [
            "content-length",
            "transfer-encoding",
            "host",
            "connection",
            "keep-alive",
            "te",
            "x-hop",
            "expect",
            "upgrade",
        ] {
            assert!(
                !names.contains(&framing.to_string()),
                "{key}: {framing} stored in {names:?}"
            );
        }
    }
    assert!(
        stored_header_names(&store, "chunked1")
            .await
            .contains(&"x-tenant".to_string()),
        "ordinary headers are kept"
    );

    let sent: [(&str, &[u8]); 3] = [
        ("pretty1", pretty.as_bytes()),
        ("chunked1", chunked),
        ("numbers1", small.as_bytes()),
    ];
    for (key, original) in sent {
        let d = delivered(&rx, key).await;
        let got: serde_json::Value = serde_json::from_slice(&d.raw).unwrap_or_else(|e| {
            panic!(
                "{key}: the receiver read {:?}: {e}",
                String::from_utf8_lossy(&d.raw)
            )
        });
        let want: serde_json::Value = serde_json::from_slice(original).unwrap();
        assert!(
            same_json(&got, &want),
            "{key}: the payload read is the payload sent: {got} vs {want}"
        );
        assert_eq!(
            d.h("content-length").map(|l| l.parse::<usize>().unwrap()),
            Some(d.raw.len()),
            "{key}: the length sent is the length of the body sent"
        );
        assert_eq!(d.h("transfer-encoding"), None, "{key}");
        assert_eq!(
            d.h("host"),
            Some(format!("127.0.0.1:{}", rx.port).as_str()),
            "{key}: Host names the receiver, not the relay"
        );
        assert_eq!(d.h("x-hop"), None, "{key}");
    }
    // The relay marks a row sent after the receiver answered, so the last mark may still be
    // on its way when the last delivery is seen (a clean-clone CI run read one `processing`).
    let pool = store.pool();
    eventually("every outbox row marked sent", 20, || async {
        let state: Vec<String> = sqlx::query_scalar("SELECT DISTINCT state FROM outbox")
            .fetch_all(pool)
            .await
            .unwrap();
        state == ["sent"]
    })
    .await;
}

#[tokio::test]
async fn a_row_that_holds_framing_or_unsendable_headers_still_delivers_a_correct_request() {
    let (relay, rx, store) = start("oldrow").await;
    let headers = serde_json::json!({
        "Content-Length": "1", "Transfer-Encoding": "chunked", "Host": "sender.example",
        "X-Broken": "a\r\nX-Injected: 1", "X-Tenant": "acme", "x-idempotency-key": "handmade"
    });
    sqlx::query("INSERT INTO outbox (topic, payload, headers, max_attempts) VALUES ('hand.made', $1, $2, 3)")
        .bind(serde_json::json!({"whole": "payload", "n": [1, 2, 3]}))
        .bind(headers)
        .execute(store.pool())
        .await
        .unwrap();
    let d = delivered(&rx, "handmade").await;
    assert_eq!(
        d.body,
        serde_json::json!({"whole": "payload", "n": [1, 2, 3]})
    );
    assert_eq!(d.h("x-tenant"), Some("acme"));
    assert_eq!(d.h("x-injected"), None, "no header injection");
    assert_eq!(d.h("x-broken"), None);
    assert_eq!(d.h("host"), Some(format!("127.0.0.1:{}", rx.port).as_str()));
    eventually("the row is sent", 10, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 1
    })
    .await;
    drop(relay);
}

#[tokio::test]
async fn keys_that_could_never_be_sent_are_refused_at_receipt_naming_the_field() {
    let (relay, rx, store) = start("keys").await;
    for (body, field) in [
        (r#"{"id":"evt\u0001one"}"#, "idempotency_key"),
        (r#"{"id":"line\nbreak"}"#, "idempotency_key"),
        (r#"{"id":"ok-key","orderId":"o\u001b1"}"#, "aggregate_id"),
    ] {
        let (s, b) = relay.post("/inbox/orders", body, &[]).await;
        assert_eq!(s, 400, "{body}: {b}");
        assert!(
            b.contains(field) && b.contains("control character"),
            "{body}: {b}"
        );
    }
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox").await,
        0,
        "nothing stored"
    );

    // A key in UTF-8 is no control character: stored, and delivered with the same bytes.
    let (s, b) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"ключ-1","orderId":"заказ-7"}"#,
            &[],
        )
        .await;
    assert_eq!(s, 202, "{b}");
    let d = delivered(&rx, "ключ-1").await;
    assert_eq!(d.h("x-message-key"), Some("заказ-7"));
    eventually("the row is sent", 10, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 1
    })
    .await;
}

/// HTTP and broker sources share one attribute rule (`queuebox_core::keys::AttributeRule`):
/// an aggregate id longer than its column is judged by `NewInboxMessage::validate` for both
/// (a broker stores it dead, HTTP answers 400 naming the field) instead of being dropped.
#[tokio::test]
async fn an_aggregate_id_longer_than_its_column_answers_400_naming_the_field() {
    let (relay, _rx, store) = start("longagg").await;
    let body = format!(r#"{{"id":"k-long","orderId":"{}"}}"#, "o".repeat(256));
    let (s, b) = relay.post("/inbox/orders", &body, &[]).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("aggregate_id has 256 characters"), "{b}");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox").await,
        0,
        "nothing stored"
    );
}

#[tokio::test]
async fn a_nul_in_the_key_or_payload_answers_400_and_raises_no_storage_alarm() {
    let (relay, _rx, store) = start("nul").await;
    let (s, b) = relay
        .post("/inbox/orders", r#"{"id":"k\u0000"}"#, &[])
        .await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("U+0000"), "{b}");
    let (s, b) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"k2","items":[{"name":"a\u0000b"}]}"#,
            &[],
        )
        .await;
    assert_eq!(s, 400, "{b}");
    assert!(
        b.contains("U+0000") && b.contains("$.items[0].name"),
        "the answer says where: {b}"
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 0);
    assert_eq!(
        relay
            .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
            .await,
        0.0,
        "no false storage alarm"
    );
    assert_eq!(
        relay
            .metric("queuebox_inbox_rejections_total{reason=\"extraction_failed\"}")
            .await,
        2.0
    );
}

#[tokio::test]
async fn headers_larger_than_max_header_bytes_answer_431_and_store_nothing() {
    let (relay, _rx, store) = start("bigheaders").await;
    let big = "v".repeat(3000);
    let (s, b) = relay
        .post("/inbox/orders", r#"{"id":"big1"}"#, &[("X-Big", &big)])
        .await;
    assert_eq!(s, 431, "{b}");
    assert!(b.contains("inbox.maxHeaderBytes"), "{b}");
    let (s, _) = relay
        .post("/inbox/orders", r#"{"id":"small1"}"#, &[("X-Small", "v")])
        .await;
    assert_eq!(s, 202);
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 1);
}

#[tokio::test]
async fn an_extreme_hmac_timestamp_answers_401_and_the_relay_keeps_serving() {
    let (relay, _rx, _store) = start("hmac").await;
    for ts in ["-9223372036854775808", "9223372036854775807"] {
        let (s, b) = relay
            .post(
                "/inbox/signed",
                "{}",
                &[
                    ("X-Delivery", "d1"),
                    ("X-Signature", "sha256=00"),
                    ("X-Ts", ts),
                ],
            )
            .await;
        assert_eq!(
            (s, b.as_str()),
            (401, r#"{"error":"Request timestamp expired"}"#),
            "X-Ts: {ts}"
        );
    }
    assert_eq!(relay.get("/health/live").await.0, 200);
}
