//! Rows 28–38: the HTTP inbox, driven with real requests; rows checked with SQL.

use hmac::Mac;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::kit::*;
use super::Outcome;

/// Sources of the inbox rows: pull consumption, so the relay leaves the rows where they are.
const SOURCES: &str = "
sources:
  orders:
    path: /orders
    consumption: pull
    idempotencyKeyPath: $.id
  bearer:
    path: /bearer
    consumption: pull
    idempotencyKeyPath: $.id
    auth:
      type: bearer
      token: s3cret-token
  apikey:
    path: /apikey
    consumption: pull
    idempotencyKeyPath: $.id
    auth:
      type: api-key
      headerName: X-Api-Key
      key: k3y
  signed:
    path: /signed
    consumption: pull
    idempotencyKeyPath: $.id
    auth:
      type: hmac
      secret: topsecret
      headerName: X-Signature
  stamped:
    path: /stamped
    consumption: pull
    idempotencyKeyPath: $.id
    auth:
      type: hmac
      secret: topsecret
      headerName: X-Signature
      timestampHeader: X-Timestamp
  github:
    path: /github
    consumption: pull
    idempotencyKeyHeader: X-GitHub-Delivery
    idempotencyKeyPath: $.id
";

async fn rows(store: &queuebox_core::store::postgres::PgStore, source: &str) -> i64 {
    scalar_i64(
        store,
        &format!("SELECT count(*) FROM inbox WHERE source = '{source}'"),
    )
    .await
}

/// Row 28: 202 with the message id and one pending row; the same body again is a duplicate.
pub async fn a_webhook_is_accepted_once_and_a_repeat_is_a_duplicate() -> Outcome {
    let (relay, _rx, store) = start("acc_r28", SOURCES).await;
    let body = r#"{"id":"e-1","total":3}"#;
    let (s, b) = relay.post("/inbox/orders", body, &[]).await;
    assert_eq!(s, 202, "{b}");
    let id = serde_json::from_str::<serde_json::Value>(&b).unwrap()["messageId"]
        .as_str()
        .expect("messageId")
        .to_string();
    let (state, stored_id): (String, String) = sqlx::query_as("SELECT state, id::text FROM inbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        (state.as_str(), stored_id.as_str()),
        ("pending", id.as_str())
    );
    let (s, b) = relay.post("/inbox/orders", body, &[]).await;
    assert_eq!((s, b.as_str()), (200, r#"{"status":"duplicate"}"#));
    assert_eq!(rows(&store, "orders").await, 1);
    Ok(())
}

/// Row 29: invalid JSON → 400 `{"error":"Invalid JSON"}`; no idempotency key → 400 with error.
pub async fn invalid_json_and_a_missing_key_answer_400() -> Outcome {
    let (relay, _rx, store) = start("acc_r29", SOURCES).await;
    let (s, b) = relay.post("/inbox/orders", "{not json", &[]).await;
    assert_eq!((s, b.as_str()), (400, r#"{"error":"Invalid JSON"}"#));
    let (s, b) = relay.post("/inbox/orders", r#"{"no":"id"}"#, &[]).await;
    assert_eq!(s, 400, "{b}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&b).unwrap()["error"].is_string(),
        "{b}"
    );
    assert_eq!(rows(&store, "orders").await, 0);
    Ok(())
}

/// Row 30: a path no source has → 404.
pub async fn an_unknown_source_path_answers_404() -> Outcome {
    let (relay, _rx, _store) = start("acc_r30", SOURCES).await;
    assert_eq!(relay.post("/inbox/nope", "{}", &[]).await.0, 404);
    Ok(())
}

/// Sends `head` then `body` over a plain connection and returns the status code.
async fn raw_request(port: u16, head: &str, body: &[u8]) -> u16 {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    // The relay may answer and close before the whole body is written.
    let _ = s.write_all(body).await;
    let mut buf = vec![0u8; 512];
    let n = s.read(&mut buf).await.unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Row 31: maxBodyBytes + 1 (1001 bytes here) with Content-Length and chunked → 413, no row.
pub async fn a_body_over_max_body_bytes_answers_413_and_stores_nothing() -> Outcome {
    let (relay, _rx, store) = start("acc_r31", SOURCES).await;
    let body = format!(r#"{{"id":"big","pad":"{}"}}"#, "x".repeat(1001 - 21));
    assert_eq!(body.len(), 1001);
    let (s, _) = relay.post("/inbox/orders", &body, &[]).await;
    assert_eq!(s, 413, "with Content-Length");
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let head = "POST /inbox/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    assert_eq!(
        raw_request(relay.port, head, chunked.as_bytes()).await,
        413,
        "chunked"
    );
    let at_limit = format!(r#"{{"id":"ok","pad":"{}"}}"#, "x".repeat(1000 - 20));
    assert_eq!(at_limit.len(), 1000);
    assert_eq!(
        relay.post("/inbox/orders", &at_limit, &[]).await.0,
        202,
        "exactly maxBodyBytes is accepted"
    );
    assert_eq!(rows(&store, "orders").await, 1);
    Ok(())
}

fn sign(payload: &str) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"topsecret").unwrap();
    mac.update(payload.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Row 33: bearer, API key and HMAC (with and without a signed timestamp).
pub async fn source_auth_refuses_wrong_credentials() -> Outcome {
    let (relay, _rx, store) = start("acc_r33", SOURCES).await;
    let body = r#"{"id":"a-1"}"#;
    let post = |path: &'static str, h: Vec<(&'static str, String)>| {
        let relay = &relay;
        async move {
            let hs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            relay.post(path, body, &hs).await.0
        }
    };
    assert_eq!(post("/inbox/bearer", vec![]).await, 401);
    assert_eq!(
        post(
            "/inbox/bearer",
            vec![("Authorization", "Bearer wrong".into())]
        )
        .await,
        401
    );
    assert_eq!(
        post(
            "/inbox/bearer",
            vec![("Authorization", "Bearer s3cret-token".into())]
        )
        .await,
        202
    );
    assert_eq!(post("/inbox/apikey", vec![]).await, 401);
    assert_eq!(
        post("/inbox/apikey", vec![("X-Api-Key", "nope".into())]).await,
        401
    );
    assert_eq!(
        post("/inbox/apikey", vec![("X-Api-Key", "k3y".into())]).await,
        202
    );
    assert_eq!(post("/inbox/signed", vec![]).await, 401);
    assert_eq!(
        post("/inbox/signed", vec![("X-Signature", sign("other"))]).await,
        401
    );
    assert_eq!(
        post("/inbox/signed", vec![("X-Signature", sign(body))]).await,
        202
    );
    let now = chrono::Utc::now().timestamp().to_string();
    let stale = (chrono::Utc::now().timestamp() - 3600).to_string();
    assert_eq!(
        post(
            "/inbox/stamped",
            vec![("X-Timestamp", now.clone()), ("X-Signature", sign(body))]
        )
        .await,
        401,
        "with timestampHeader the body alone is not what is signed"
    );
    assert_eq!(
        post(
            "/inbox/stamped",
            vec![
                ("X-Timestamp", stale.clone()),
                ("X-Signature", sign(&format!("{stale}.{body}")))
            ]
        )
        .await,
        401,
        "a stale timestamp"
    );
    assert_eq!(
        post(
            "/inbox/stamped",
            vec![
                ("X-Timestamp", now.clone()),
                ("X-Signature", sign(&format!("{now}.{body}")))
            ]
        )
        .await,
        202
    );
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox").await,
        4,
        "one row per accepted request"
    );
    Ok(())
}

/// Row 35: a given correlation id is echoed, stored and forwarded; a missing one is generated
/// and the generated one is what is stored.
pub async fn the_correlation_id_is_echoed_stored_and_forwarded() -> Outcome {
    let push = "routes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  hooks:\n    path: /hooks\n    idempotencyKeyPath: $.id\n    topic: hooked\n";
    let (relay, rx, store) = start("acc_r35", push).await;
    let client = reqwest::Client::new();
    let send = |id: &str, corr: Option<&str>| {
        let mut req = client
            .post(relay.url("/inbox/hooks"))
            .header("content-type", "application/json")
            .body(format!(r#"{{"id":"{id}"}}"#));
        if let Some(c) = corr {
            req = req.header("X-Correlation-Id", c);
        }
        req.send()
    };
    let r = send("c-1", Some("c1")).await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    assert_eq!(
        r.headers()
            .get("x-correlation-id")
            .and_then(|v| v.to_str().ok()),
        Some("c1")
    );
    let r = send("c-2", None).await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let generated = r
        .headers()
        .get("x-correlation-id")
        .and_then(|v| v.to_str().ok())
        .expect("a generated id")
        .to_string();
    let stored = |key: &'static str| {
        let store = &store;
        async move {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT correlation_id FROM inbox WHERE idempotency_key = $1",
            )
            .bind(key)
            .fetch_one(store.pool())
            .await
            .unwrap()
        }
    };
    assert_eq!(stored("c-1").await.as_deref(), Some("c1"));
    assert_eq!(stored("c-2").await.as_deref(), Some(generated.as_str()));
    eventually("two deliveries", 20, || async {
        rx.to("/hooks").len() == 2
    })
    .await;
    let forwarded: Vec<Option<String>> = rx
        .to("/hooks")
        .iter()
        .map(|d| d.h("x-correlation-id").map(String::from))
        .collect();
    assert!(forwarded.contains(&Some("c1".into())), "{forwarded:?}");
    assert!(forwarded.contains(&Some(generated)), "{forwarded:?}");
    Ok(())
}

/// Row 36: custom headers are stored; credentials and cookies are not.
pub async fn stored_headers_keep_custom_ones_and_drop_credentials() -> Outcome {
    let (relay, _rx, store) = start("acc_r36", SOURCES).await;
    let (s, _) = relay
        .post(
            "/inbox/apikey",
            r#"{"id":"h-1"}"#,
            &[
                ("X-Tenant", "acme"),
                ("Authorization", "Bearer abc"),
                ("Cookie", "sid=1"),
                ("X-Api-Key", "k3y"),
            ],
        )
        .await;
    assert_eq!(s, 202);
    let headers: serde_json::Value = sqlx::query_scalar("SELECT headers FROM inbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let names: Vec<String> = headers
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.to_ascii_lowercase())
        .collect();
    assert!(names.contains(&"x-tenant".to_string()), "{headers}");
    for secret in ["authorization", "cookie", "x-api-key"] {
        assert!(
            !names.contains(&secret.to_string()),
            "{secret} stored: {headers}"
        );
    }
    Ok(())
}

/// Row 38: the delivery header is the key: one row per delivery, matched in any case; a
/// blank header falls back to the path; `Authorization` as key header is refused.
pub async fn the_idempotency_key_header_decides_duplicates() -> Outcome {
    let (relay, _rx, store) = start("acc_r38", SOURCES).await;
    let body = r#"{"action":"opened"}"#;
    assert_eq!(
        relay
            .post("/inbox/github", body, &[("X-GitHub-Delivery", "d-1")])
            .await
            .0,
        202
    );
    assert_eq!(
        relay
            .post("/inbox/github", body, &[("x-github-delivery", "d-1")])
            .await
            .0,
        200,
        "same delivery, lower-case header"
    );
    assert_eq!(
        relay
            .post("/inbox/github", body, &[("X-GitHub-Delivery", "d-2")])
            .await
            .0,
        202,
        "same body, another delivery"
    );
    assert_eq!(
        relay
            .post(
                "/inbox/github",
                r#"{"id":"p-1"}"#,
                &[("X-GitHub-Delivery", "")]
            )
            .await
            .0,
        202,
        "a blank header falls back to the path"
    );
    assert_eq!(rows(&store, "github").await, 3);
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT idempotency_key FROM inbox ORDER BY created_at")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(keys, ["d-1", "d-2", "p-1"]);
    let (url, _) = empty_db("acc_r38b").await;
    let yaml = "database:\n  url: {db}\nsources:\n  bad:\n    path: /bad\n    idempotencyKeyHeader: Authorization\n";
    let (code, out) = run_to_exit(yaml, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("idempotencyKeyHeader"),
        "the error names the key: {out}"
    );
    Ok(())
}

/// Row 32: `rateLimit.requestsPerMinute: 60` — 60 requests within the minute are stored, the
/// 61st gets 429 with `Retry-After` (whole seconds until the bucket fills up again, 1–60) and
/// stores nothing; another source keeps its own bucket; 0 is refused at start-up by key path.
pub async fn the_request_over_the_rate_limit_gets_429_with_retry_after() -> Outcome {
    let extra = "
sources:
  limited:
    path: /limited
    consumption: pull
    idempotencyKeyPath: $.id
    rateLimit:
      requestsPerMinute: 60
  free:
    path: /free
    consumption: pull
    idempotencyKeyPath: $.id
";
    let (relay, _rx, store) = start("acc_r32", extra).await;
    for i in 0..60 {
        let (s, b) = relay
            .post("/inbox/limited", &format!(r#"{{"id":"r-{i}"}}"#), &[])
            .await;
        assert_eq!(s, 202, "request {} is within the limit: {b}", i + 1);
    }
    let resp = reqwest::Client::new()
        .post(relay.url("/inbox/limited"))
        .body(r#"{"id":"r-60"}"#)
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429, "the 61st request is refused");
    let retry_after: u64 = resp
        .headers()
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in whole seconds");
    assert!(
        (1..=60).contains(&retry_after),
        "Retry-After is the wait until the bucket fills up: {retry_after}"
    );
    assert_eq!(rows(&store, "limited").await, 60, "the 61st is not stored");
    let (s, b) = relay.post("/inbox/free", r#"{"id":"f-1"}"#, &[]).await;
    assert_eq!(s, 202, "a source without a limit has no bucket: {b}");
    let bad = base_config("postgres://127.0.0.1:1/x", "http://127.0.0.1:1")
        + &extra.replace("requestsPerMinute: 60", "requestsPerMinute: 0");
    let (code, out) = run_to_exit(&bad, "", &["check-config"]).await;
    assert_ne!(code, 0, "requestsPerMinute 0 is refused: {out}");
    assert!(
        out.contains("sources.limited.rateLimit.requestsPerMinute"),
        "the refusal names the key: {out}"
    );
    Ok(())
}
