//! W3C trace context through the real `queuebox` binary: a `traceparent` /
//! `tracestate` received on an HTTP source is validated, kept in the inbox row's own
//! columns (never among its stored headers), carried to the outbox row by the push relay
//! and sent to a real HTTP receiver. A malformed or repeated traceparent is not stored,
//! not sent and logged at debug; without one, none is invented; a `traceparent` that sits
//! in a row's stored headers (a row written before migration 5, or by hand) is never sent.
//! Real PostgreSQL.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::Value;
use tokio::io::AsyncReadExt;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

const SOURCES: &str = "
logging:
  format: json
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: 'orders.created'
";

/// The delivery of the message with idempotency key `key`.
async fn delivery_of(rx: &Receiver, key: &str) -> Delivery {
    eventually(&format!("{key} reaches the receiver"), 20, || async {
        rx.to("/hooks")
            .iter()
            .any(|d| d.h("x-idempotency-key") == Some(key))
    })
    .await;
    rx.to("/hooks")
        .into_iter()
        .find(|d| d.h("x-idempotency-key") == Some(key))
        .unwrap()
}

/// `(traceparent, tracestate, headers)` of the inbox row with idempotency key `key`.
async fn stored(
    store: &queuebox_core::store::postgres::PgStore,
    key: &str,
) -> (Option<String>, Option<String>, Value) {
    sqlx::query_as("SELECT traceparent, tracestate, headers FROM inbox WHERE idempotency_key = $1")
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

fn has_header(headers: &Value, name: &str) -> bool {
    headers
        .as_object()
        .unwrap()
        .keys()
        .any(|k| k.eq_ignore_ascii_case(name))
}

#[tokio::test]
async fn trace_context_reaches_the_receiver_and_forgeries_do_not() {
    let (url, store) = fresh_db("trace_context").await;
    let rx = Receiver::start().await;
    let yaml = format!("{}{SOURCES}", base_config(&url, &rx.url()));
    let port = free_port();
    let config = write_config(&yaml.replace("{port}", &port.to_string()));
    let mut cmd = relay_command(config.path(), &["run"]);
    cmd.env("RUST_LOG", "info,sqlx=warn,queuebox=debug");
    let mut relay = Relay {
        child: cmd.stderr(Stdio::piped()).spawn().unwrap(),
        port,
        config,
    };
    relay.wait_listening().await;

    // 1. A valid context (header names in any case): stored in the columns, sent as is.
    let (status, body) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"t-valid"}"#,
            &[
                ("TraceParent", TRACEPARENT),
                ("tracestate", "congo=t61rcWkgMzE"),
            ],
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let d = delivery_of(&rx, "t-valid").await;
    assert_eq!(d.h("traceparent"), Some(TRACEPARENT));
    assert_eq!(
        d.h("traceparent").unwrap().split('-').nth(1),
        Some(TRACE_ID),
        "the receiver sees the sender's trace id"
    );
    assert_eq!(d.h("tracestate"), Some("congo=t61rcWkgMzE"));
    let (tp, ts, headers) = stored(&store, "t-valid").await;
    assert_eq!(tp.as_deref(), Some(TRACEPARENT));
    assert_eq!(ts.as_deref(), Some("congo=t61rcWkgMzE"));
    assert!(!has_header(&headers, "traceparent"), "{headers}");
    assert!(!has_header(&headers, "tracestate"), "{headers}");

    // 2. Malformed (upper-case hex) and repeated traceparents: the message is stored and
    // delivered, the context is neither stored nor sent, its tracestate goes with it.
    let upper = TRACEPARENT.to_uppercase();
    let (status, _) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"t-malformed"}"#,
            &[("traceparent", upper.as_str()), ("tracestate", "forged=1")],
        )
        .await;
    assert_eq!(status, 202);
    let (status, _) = relay
        .post(
            "/inbox/orders",
            r#"{"id":"t-repeated"}"#,
            &[("traceparent", TRACEPARENT), ("traceparent", TRACEPARENT)],
        )
        .await;
    assert_eq!(status, 202);
    // 3. None received: none invented (tracing export is off).
    let (status, _) = relay.post("/inbox/orders", r#"{"id":"t-none"}"#, &[]).await;
    assert_eq!(status, 202);
    for key in ["t-malformed", "t-repeated", "t-none"] {
        let d = delivery_of(&rx, key).await;
        assert_eq!(d.h("traceparent"), None, "{key}");
        assert_eq!(d.h("tracestate"), None, "{key}");
        let (tp, ts, headers) = stored(&store, key).await;
        assert_eq!((tp, ts), (None, None), "{key}");
        assert!(!has_header(&headers, "traceparent"), "{key}: {headers}");
    }

    // 4. A traceparent among a row's stored headers (a row stored before migration 5, or
    // written by hand) is not relayed; the columns alone decide.
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, headers, traceparent)
         VALUES ('orders', 't-row-forged', '{}', $1, $2), ('orders', 't-row-old', '{}', $1, NULL)",
    )
    .bind(serde_json::json!({
        "traceparent": "00-11111111111111111111111111111111-2222222222222222-01",
        "TraceState": "forged=1"
    }))
    .bind(TRACEPARENT)
    .execute(store.pool())
    .await
    .unwrap();
    let d = delivery_of(&rx, "t-row-forged").await;
    assert_eq!(d.h("traceparent"), Some(TRACEPARENT));
    assert_eq!(d.h("tracestate"), None);
    let d = delivery_of(&rx, "t-row-old").await;
    assert_eq!(d.h("traceparent"), None);
    assert_eq!(d.h("tracestate"), None);

    // The ignored contexts were logged at debug, naming the source and why.
    let mut relay = relay;
    relay.term();
    let mut stderr = relay.child.stderr.take().unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(20), stderr.read_to_string(&mut text))
        .await
        .expect("the relay exits after SIGTERM")
        .unwrap();
    let ignored: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["message"] == "received trace context ignored")
        .collect();
    assert_eq!(ignored.len(), 2, "{text}");
    assert!(ignored
        .iter()
        .all(|r| r["level"] == "DEBUG" && r["source"] == "orders"));
    assert!(ignored[0]["reason"]
        .as_str()
        .unwrap()
        .contains("lower-case"));
    assert!(ignored[1]["reason"]
        .as_str()
        .unwrap()
        .contains("2 traceparent"));
}
