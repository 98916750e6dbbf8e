//! A destination's static `headers:` are secrets, through the real
//! `queuebox` binary: a value (plain, `file:` or `${VAR}`) arrives at the receiver as
//! configured, and never shows in `check-config`'s output, in the log of a failed delivery,
//! in `last_error`, nor in the admin API's views of the row.

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use common::*;
use tokio::io::AsyncReadExt;

const PLAIN: &str = "Bearer hdr-plain-7f3a9c";
const FROM_FILE: &str = "hdr-file-2b8e41";
const FROM_ENV: &str = "hdr-env-5d0c6e";

/// A receiver that refuses every request with 401 and echoes the request's headers in the
/// body, as many a real API does: the refusal text holds every header value.
async fn echoing_receiver() -> (String, Arc<Mutex<Vec<HeaderMap>>>) {
    let got: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let seen = seen.clone();
        async move {
            let echo: Vec<String> = headers
                .iter()
                .map(|(k, v)| format!("{k}={}", String::from_utf8_lossy(v.as_bytes())))
                .collect();
            seen.lock().unwrap().push(headers);
            (
                StatusCode::UNAUTHORIZED,
                format!("refused: {}", echo.join(", ")),
            )
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

fn assert_no_secret(what: &str, text: &str) {
    for s in [PLAIN, "hdr-plain-7f3a9c", FROM_FILE, FROM_ENV] {
        assert!(
            !text.contains(s),
            "{what} shows the header value {s}:\n{text}"
        );
    }
}

#[tokio::test]
async fn header_values_reach_the_receiver_and_nowhere_else() {
    let (url, store) = fresh_db("dest_headers").await;
    let (rx, got) = echoing_receiver().await;
    let secret_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret_file.path(), format!("{FROM_FILE}\n")).unwrap();
    let port = free_port();
    let yaml = base_config(&url, &rx).replace("{port}", &port.to_string())
        + &format!(
            "    headers:\n      Authorization: '{PLAIN}'\n      X-Api-Key: 'file:{}'\n      X-Env-Key: '${{QB_TEST_DEST_HEADER}}'\n",
            secret_file.path().display()
        )
        + "admin:\n  enabled: true\n  insecure: true\nroutes:\n  - topicPattern: '**'\n    destination: rx\n";
    let config = write_config(&yaml);

    // check-config prints every value masked.
    let out = relay_command(config.path(), &["check-config"])
        .env("QB_TEST_DEST_HEADER", FROM_ENV)
        .output()
        .await
        .unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{printed}");
    let line = printed.lines().find(|l| l.contains("Authorization:"));
    assert!(line.is_some_and(|l| l.contains("***")), "{printed}");
    assert_no_secret("check-config", &printed);

    // A delivery the receiver refuses, echoing the headers.
    let mut child = relay_command(config.path(), &["run"])
        .env("QB_TEST_DEST_HEADER", FROM_ENV)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t', '{}', 1) RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    eventually("the row is dead", 30, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await == 1
    })
    .await;

    // The receiver got each value as configured: plain, from the file, from the variable.
    let h = got.lock().unwrap()[0].clone();
    assert_eq!(h["authorization"], PLAIN);
    assert_eq!(h["x-api-key"], FROM_FILE);
    assert_eq!(h["x-env-key"], FROM_ENV);

    let last_error: String = sqlx::query_scalar("SELECT last_error FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(last_error.starts_with("HTTP 401"), "{last_error}");
    assert!(last_error.contains("authorization=***"), "{last_error}");
    assert_no_secret("last_error", &last_error);

    // The admin API's views of the row.
    let admin = |path: String| async move {
        reqwest::get(format!("http://127.0.0.1:{port}{path}"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let journey = admin(format!("/admin/journey?q={id}")).await;
    assert!(journey.contains("HTTP 401"), "{journey}");
    assert_no_secret("GET /admin/journey", &journey);
    let dead = admin("/admin/dead/outbox".into()).await;
    assert!(dead.contains("HTTP 401"), "{dead}");
    assert_no_secret("GET /admin/dead/outbox", &dead);

    let _ = child.start_kill();
    let _ = child.wait().await;
    let log = tokio::time::timeout(Duration::from_secs(10), log)
        .await
        .unwrap()
        .unwrap();
    assert!(log.contains("delivery failed"), "{log}");
    assert_no_secret("the relay's log", &log);
}
