//! HTTP destination auth and `http.blockPrivateAddresses`, end to end: the real `queuebox`
//! binary, a real PostgreSQL, a real receiver that records headers and raw bodies, and a real
//! OAuth2 token endpoint (a small axum server in this file).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use common::*;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A source `in` whose `type` field is the topic, so a test routes each message by its body.
const SOURCE: &str = "
sources:
  in:
    path: /in
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: '{{ eventType }}'
";

/// `base_config` plus more destinations (`extra`, indented under `destinations:`), routes
/// and the `in` source.
fn config(db: &str, rx: &str, extra: &str, routes: &[(&str, &str)]) -> String {
    let routes: String = routes
        .iter()
        .map(|(p, d)| format!("  - topicPattern: '{p}'\n    destination: {d}\n"))
        .collect();
    format!("{}{extra}routes:\n{routes}{SOURCE}", base_config(db, rx))
}

async fn post(relay: &Relay, id: &str, topic: &str) {
    let (s, b) = relay
        .post(
            "/inbox/in",
            &format!(r#"{{"id":"{id}","type":"{topic}","n":1}}"#),
            &[],
        )
        .await;
    assert_eq!(s, 202, "{b}");
}

fn hmac_hex(secret: &str, parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    for p in parts {
        mac.update(p);
    }
    hex::encode(mac.finalize().into_bytes())
}

#[tokio::test]
async fn bearer_api_key_basic_and_header_auth_arrive_at_the_receiver() {
    let (url, _store) = fresh_db("dauth_fixed").await;
    let rx = Receiver::start().await;
    let r = rx.url();
    let extra = format!(
        "  basic:
    type: http
    baseUrl: {r}
    path: /basic
    auth:
      type: basic
      username: relay-user
      password: 'p@ss:word'
  custom:
    type: http
    baseUrl: {r}
    path: /custom
    headers:
      X-Static: kept
    auth:
      type: header
      headerName: X-Relay-Token
      headerValue: tok-123
  bearer:
    type: http
    baseUrl: {r}
    path: /bearer
    auth:
      type: bearer
      token: bearer-456
  apikey:
    type: http
    baseUrl: {r}
    path: /apikey
    auth:
      type: api-key
      key: key-789
"
    );
    let relay = Relay::start(&config(
        &url,
        &r,
        &extra,
        &[
            ("basic", "basic"),
            ("custom", "custom"),
            ("bearer", "bearer"),
            ("apikey", "apikey"),
        ],
    ))
    .await;
    for t in ["basic", "custom", "bearer", "apikey"] {
        post(&relay, &format!("m-{t}"), t).await;
    }
    eventually("four deliveries", 20, || async {
        rx.deliveries().len() == 4
    })
    .await;
    let expected_basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("relay-user:p@ss:word")
    );
    assert_eq!(
        rx.to("/basic")[0].h("authorization"),
        Some(expected_basic.as_str())
    );
    let custom = &rx.to("/custom")[0];
    assert_eq!(custom.h("x-relay-token"), Some("tok-123"));
    assert_eq!(custom.h("x-static"), Some("kept"));
    assert_eq!(custom.h("authorization"), None);
    assert_eq!(
        rx.to("/bearer")[0].h("authorization"),
        Some("Bearer bearer-456")
    );
    assert_eq!(rx.to("/apikey")[0].h("x-api-key"), Some("key-789"));
}

#[tokio::test]
async fn hmac_signs_the_exact_body_bytes_sent_and_a_queuebox_source_accepts_the_signature() {
    let (url, store) = fresh_db("dauth_hmac").await;
    let rx = Receiver::start().await;
    let r = rx.url();
    // `plain` signs the body; `stamped` signs `timestamp.body`; `loop` signs for this very
    // relay's own HMAC-verifying source, which forwards what it accepts to /verified.
    let extra = format!(
        "  plain:
    type: http
    baseUrl: {r}
    path: /plain
    auth:
      type: hmac
      secret: plain-secret
      headerName: X-Hub-Signature-256
  stamped:
    type: http
    baseUrl: {r}
    path: /stamped
    auth:
      type: hmac
      secret: stamped-secret
      signaturePrefix: 'v1='
      timestampHeader: X-Timestamp
  loop:
    type: http
    baseUrl: http://127.0.0.1:{{port}}/inbox
    path: /signed
    auth:
      type: hmac
      secret: loop-secret
      timestampHeader: X-Signature-Timestamp
  verified:
    type: http
    baseUrl: {r}
    path: /verified
"
    );
    let mut yaml = config(
        &url,
        &r,
        &extra,
        &[
            ("plain", "plain"),
            ("stamped", "stamped"),
            ("loop", "loop"),
            ("verified", "verified"),
        ],
    );
    yaml.push_str(
        "  signed:
    path: /signed
    idempotencyKeyHeader: X-Message-Id
    topic: verified
    auth:
      type: hmac
      secret: loop-secret
      timestampHeader: X-Signature-Timestamp
",
    );
    let relay = Relay::start(&yaml).await;
    post(&relay, "m-plain", "plain").await;
    post(&relay, "m-stamped", "stamped").await;
    post(&relay, "m-loop", "loop").await;
    eventually(
        "plain, stamped and the relayed loop message",
        20,
        || async {
            rx.to("/plain").len() == 1
                && rx.to("/stamped").len() == 1
                && rx.to("/verified").len() == 1
        },
    )
    .await;

    let plain = &rx.to("/plain")[0];
    let expected = format!("sha256={}", hmac_hex("plain-secret", &[&plain.raw]));
    assert_eq!(
        plain.h("x-hub-signature-256"),
        Some(expected.as_str()),
        "signature over the raw body bytes"
    );
    assert_eq!(plain.h("x-signature"), None);

    let stamped = &rx.to("/stamped")[0];
    let ts = stamped
        .h("x-timestamp")
        .expect("the timestamp header is sent");
    let secs: i64 = ts.parse().expect("Unix seconds");
    assert!(
        (chrono::Utc::now().timestamp() - secs).abs() < 60,
        "timestamp {ts} is now, in seconds"
    );
    let expected = format!(
        "v1={}",
        hmac_hex("stamped-secret", &[ts.as_bytes(), b".", &stamped.raw])
    );
    assert_eq!(
        stamped.h("x-signature"),
        Some(expected.as_str()),
        "signature over timestamp.body"
    );

    // The relay's own source verified the signature (else 401, retried, then dead).
    assert_eq!(rx.to("/verified")[0].body["id"], "m-loop");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox WHERE source = 'signed'").await,
        1
    );
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state <> 'sent'").await,
        0
    );
}

/// A token endpoint: records each request; answers `status` with a numbered token. It also
/// serves `/echo`, a destination that refuses every request with 401 and echoes the
/// `Authorization` header it got (recorded in `echoed`).
#[derive(Clone, Default)]
struct TokenServer {
    requests: Arc<Mutex<Vec<(HeaderMap, String)>>>,
    status: Arc<Mutex<u16>>,
    echoed: Arc<Mutex<Vec<String>>>,
}

impl TokenServer {
    async fn start(status: u16, expires_in: u64) -> (TokenServer, String) {
        let t = TokenServer::default();
        *t.status.lock().unwrap() = status;
        let app = axum::Router::new()
            .route(
                "/oauth/token",
                axum::routing::post(move |State(t): State<TokenServer>, headers: HeaderMap, body: String| async move {
                    let n = {
                        let mut r = t.requests.lock().unwrap();
                        r.push((headers, body));
                        r.len()
                    };
                    let status = StatusCode::from_u16(*t.status.lock().unwrap()).unwrap();
                    if status.is_success() {
                        let body = serde_json::json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": expires_in});
                        (status, axum::Json(body)).into_response()
                    } else {
                        // An endpoint that echoes the credentials it refuses: last_error must not.
                        let basic = t.requests.lock().unwrap()[n - 1].0.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
                        (status, format!("invalid_client: client-secret-xyz ({basic})")).into_response()
                    }
                }),
            )
            .route(
                "/echo",
                axum::routing::post(|State(t): State<TokenServer>, headers: HeaderMap| async move {
                    let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
                    t.echoed.lock().unwrap().push(auth.clone());
                    (StatusCode::UNAUTHORIZED, format!("unauthorized: {auth}"))
                }),
            )
            .with_state(t.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/oauth/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (t, url)
    }
    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn oauth2_destination(rx: &str, token_url: &str) -> String {
    format!(
        "  api:
    type: http
    baseUrl: {rx}
    path: /api
    auth:
      type: oauth2
      clientId: relay-client
      clientSecret: client-secret-xyz
      tokenUrl: {token_url}
      scope: 'events.write'
      extraParams:
        audience: https://api.example
"
    )
}

#[tokio::test]
async fn oauth2_token_is_fetched_once_for_several_messages_and_refreshed_after_expiry() {
    let (url, _store) = fresh_db("dauth_oauth").await;
    let rx = Receiver::start().await;
    // expires_in 2 s: the relay refreshes a tenth of the lifetime early, at 1.8 s.
    let (tokens, token_url) = TokenServer::start(200, 2).await;
    let relay = Relay::start(&config(
        &url,
        &rx.url(),
        &oauth2_destination(&rx.url(), &token_url),
        &[("api", "api")],
    ))
    .await;
    for i in 0..3 {
        post(&relay, &format!("m-{i}"), "api").await;
    }
    eventually("three deliveries", 20, || async {
        rx.to("/api").len() == 3
    })
    .await;
    assert_eq!(tokens.count(), 1, "one token request for three messages");
    for d in rx.to("/api") {
        assert_eq!(d.h("authorization"), Some("Bearer tok-1"));
    }
    {
        let reqs = tokens.requests.lock().unwrap();
        let (headers, form) = &reqs[0];
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        assert!(
            pairs.contains(&("grant_type".into(), "client_credentials".into())),
            "{form}"
        );
        assert!(
            pairs.contains(&("scope".into(), "events.write".into())),
            "{form}"
        );
        assert!(
            pairs.contains(&("audience".into(), "https://api.example".into())),
            "{form}"
        );
        assert_eq!(
            headers.get("content-type").unwrap(),
            "application/x-www-form-urlencoded"
        );
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("relay-client:client-secret-xyz")
        );
        assert_eq!(
            headers.get("authorization").unwrap().to_str().unwrap(),
            basic
        );
    }

    tokio::time::sleep(Duration::from_millis(2200)).await;
    post(&relay, "m-late", "api").await;
    eventually("the fourth delivery", 20, || async {
        rx.to("/api").len() == 4
    })
    .await;
    assert_eq!(tokens.count(), 2, "the expired token was refreshed once");
    let late = rx
        .to("/api")
        .into_iter()
        .find(|d| d.body["id"] == "m-late")
        .unwrap();
    assert_eq!(late.h("authorization"), Some("Bearer tok-2"));
}

#[tokio::test]
async fn a_refused_token_request_fails_the_attempt_with_a_redacted_error() {
    let (url, store) = fresh_db("dauth_oauth401").await;
    let rx = Receiver::start().await;
    let (tokens, token_url) = TokenServer::start(401, 60).await;
    let relay = Relay::start(&config(
        &url,
        &rx.url(),
        &oauth2_destination(&rx.url(), &token_url),
        &[("api", "api")],
    ))
    .await;
    post(&relay, "m-1", "api").await;
    // base_config's outbox.maxAttempts: a few attempts, then dead.
    eventually("the row goes dead", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await == 1
    })
    .await;
    let (attempt, error): (i32, Option<String>) =
        sqlx::query_as("SELECT attempt, last_error FROM outbox")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let error = error.unwrap_or_default();
    assert!(attempt >= 1, "retried before going dead");
    assert_eq!(
        tokens.count(),
        attempt as usize + 1,
        "each attempt (0..=attempt) asked for a token: no failure is cached"
    );
    assert!(
        error.starts_with(&format!(
            "OAuth2 token request to {token_url} failed: HTTP 401"
        )),
        "last_error: {error}"
    );
    assert!(
        !error.contains("client-secret-xyz"),
        "the client secret is masked: {error}"
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("relay-client:client-secret-xyz");
    assert!(
        !error.contains(&basic),
        "the Basic credentials are masked: {error}"
    );
    assert!(rx.to("/api").is_empty(), "nothing reached the destination");
    drop(relay);
}

#[tokio::test]
async fn a_token_the_destination_refuses_is_dropped_and_never_shown_in_last_error() {
    let (url, store) = fresh_db("dauth_oauth_echo").await;
    let rx = Receiver::start().await;
    let (tokens, token_url) = TokenServer::start(200, 3600).await;
    let echo = token_url.replace("/oauth/token", "");
    let dest = oauth2_destination(&echo, &token_url).replace("path: /api", "path: /echo");
    let relay = Relay::start(&config(&url, &rx.url(), &dest, &[("api", "api")])).await;
    post(&relay, "m-1", "api").await;
    eventually("the row goes dead", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await == 1
    })
    .await;
    let (attempt, error): (i32, Option<String>) =
        sqlx::query_as("SELECT attempt, last_error FROM outbox")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let error = error.unwrap_or_default();
    let echoed = tokens.echoed.lock().unwrap().clone();
    let expected: Vec<String> = (1..=attempt + 1)
        .map(|n| format!("Bearer tok-{n}"))
        .collect();
    assert_eq!(
        echoed, expected,
        "a 401 drops the token: each attempt sent a new one"
    );
    assert_eq!(tokens.count(), attempt as usize + 1);
    assert!(
        error.starts_with("HTTP 401: Unauthorized - unauthorized: Bearer ***"),
        "the echoed token is masked: {error}"
    );
    drop(relay);
}

#[tokio::test]
async fn block_private_addresses_refuses_start_up_naming_the_destination_key() {
    let yaml = format!(
        "{}  named:
    type: http
    baseUrl: http://queuebox-test-host.invalid
    auth:
      type: oauth2
      clientId: c
      clientSecret: s
      tokenUrl: http://localhost:9/token
http:
  blockPrivateAddresses: true
",
        base_config("postgres://nobody@127.0.0.1:1/none", "http://127.0.0.1:9")
    );
    let file = write_config(&yaml.replace("{port}", &free_port().to_string()));
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        relay_command(file.path(), &["run"]).output(),
    )
    .await
    .expect("start-up ends")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "start-up must fail: {stderr}");
    assert!(stderr.contains("destinations.rx.baseUrl: 127.0.0.1 is a private address (loopback 127.0.0.0/8, RFC 1122 §3.2.1.3) and http.blockPrivateAddresses is true"), "{stderr}");
    assert!(
        stderr.contains("destinations.named.auth.tokenUrl: localhost resolves to"),
        "a name is resolved and checked: {stderr}"
    );
    assert!(
        !stderr.contains("destinations.named.baseUrl"),
        "an unresolvable host does not stop start-up: {stderr}"
    );
}

#[tokio::test]
async fn block_private_addresses_lets_a_relay_with_only_unresolvable_hosts_start() {
    let (url, _store) = fresh_db("dauth_block").await;
    let yaml = base_config(&url, "http://queuebox-test-host.invalid")
        + "http:\n  blockPrivateAddresses: true\n";
    let mut relay = Relay::start(&yaml).await;
    let (s, _) = relay.get("/health/ready").await;
    assert_eq!(s, 200);
    relay.kill();
}
