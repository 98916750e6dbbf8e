//! `logging.format: json` on the real `queuebox` binary: every stderr line is one JSON
//! object with `timestamp`, `level`, `target` and `message`, and a record about a message
//! names it (`messageId`, `source`). Set in the file, or by `QUEUEBOX_LOGGING_FORMAT`
//! over the file's `text`. Real PostgreSQL and a real HTTP receiver.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::Value;
use tokio::io::AsyncReadExt;

const SOURCES: &str = "
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: 'orders.created'
";

/// Starts the relay on `yaml` with stderr captured and `extra_env` set.
async fn start(yaml: &str, extra_env: &[(&str, &str)]) -> Relay {
    let port = free_port();
    let config = write_config(&yaml.replace("{port}", &port.to_string()));
    let mut cmd = relay_command(config.path(), &["run"]);
    // Debug for the relay's own modules, so the per-message records are written.
    cmd.env("RUST_LOG", "info,sqlx=warn,queuebox=debug");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let mut relay = Relay {
        child,
        port,
        config,
    };
    relay.wait_listening().await;
    relay
}

/// Stops the relay and returns every stderr line, each parsed as a JSON object (a line
/// that is not one fails the test, quoting it).
async fn json_lines(mut relay: Relay) -> Vec<serde_json::Map<String, Value>> {
    relay.term();
    let mut stderr = relay.child.stderr.take().unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(20), stderr.read_to_string(&mut text))
        .await
        .expect("the relay exits after SIGTERM")
        .unwrap();
    let lines: Vec<_> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(o)) => o,
            _ => panic!("a stderr line that is not a JSON object: {l}"),
        })
        .collect();
    assert!(!lines.is_empty(), "the relay wrote no log line");
    for o in &lines {
        for field in ["timestamp", "level", "target", "message"] {
            assert!(
                o.get(field).is_some_and(Value::is_string),
                "a record without a string {field}: {o:?}"
            );
        }
    }
    lines
}

fn find<'a>(
    lines: &'a [serde_json::Map<String, Value>],
    message: &str,
) -> Vec<&'a serde_json::Map<String, Value>> {
    lines
        .iter()
        .filter(|o| o["message"].as_str() == Some(message))
        .collect()
}

#[tokio::test]
async fn json_format_from_the_file_covers_traffic_and_a_bad_request() {
    let (url, _store) = fresh_db("json_logs").await;
    let rx = Receiver::start().await;
    let cfg = format!(
        "{}logging:\n  format: json\n{SOURCES}",
        base_config(&url, &rx.url())
    );
    let relay = start(&cfg, &[]).await;
    let (status, body) = relay
        .post("/inbox/orders", r#"{"id":"o-1","total":3}"#, &[])
        .await;
    assert_eq!(status, 202, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = relay.post("/inbox/orders", "not json {", &[]).await;
    assert_eq!(status, 400);
    eventually("the message reaches the receiver", 20, || async {
        !rx.to("/hooks").is_empty()
    })
    .await;

    let lines = json_lines(relay).await;
    let stored = find(&lines, "inbox message stored");
    assert_eq!(stored.len(), 1, "{lines:?}");
    assert_eq!(stored[0]["level"], "DEBUG");
    assert_eq!(stored[0]["messageId"], id.as_str());
    assert_eq!(stored[0]["source"], "orders");
    assert!(stored[0]["target"]
        .as_str()
        .unwrap()
        .starts_with("queuebox"));
    let refused = find(&lines, "inbox request refused: the body is not JSON");
    assert_eq!(refused.len(), 1, "{lines:?}");
    assert_eq!(refused[0]["level"], "WARN");
    assert_eq!(refused[0]["source"], "orders");
    // The relay's own start-up records are JSON too (info level).
    assert!(lines.iter().any(|o| o["level"] == "INFO"), "{lines:?}");
}

#[tokio::test]
async fn the_environment_overrides_a_text_format_in_the_file() {
    let (url, _store) = fresh_db("json_logs_env").await;
    let rx = Receiver::start().await;
    let cfg = format!(
        "{}logging:\n  format: text\n{SOURCES}",
        base_config(&url, &rx.url())
    );
    let relay = start(&cfg, &[("QUEUEBOX_LOGGING_FORMAT", "json")]).await;
    let (status, _) = relay.post("/inbox/orders", r#"{"id":"o-2"}"#, &[]).await;
    assert_eq!(status, 202);
    let lines = json_lines(relay).await;
    assert_eq!(find(&lines, "inbox message stored").len(), 1, "{lines:?}");
}

#[tokio::test]
async fn a_configuration_error_is_a_json_record_and_a_bad_format_is_named() {
    // No database section: the load fails before the relay starts; the last word is JSON.
    let config = write_config("logging:\n  format: json\n");
    let out = relay_command(config.path(), &["run"])
        .env("QUEUEBOX_LOGGING_FORMAT", "json")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(
        records
            .iter()
            .any(|r| r["level"] == "ERROR"
                && r["message"].as_str().unwrap_or("").contains("database")),
        "{text}"
    );

    // An unknown format is refused, naming the key.
    let config =
        write_config("database:\n  url: postgres://x@127.0.0.1/x\nlogging:\n  format: xml\n");
    let out = relay_command(config.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("logging.format"), "{text}");
}
