//! HTTP ingest: one request (headers, content type, auth headers, body) through every step
//! of `POST {inbox.basePath}{source.path}` that decides what is stored, in the relay's own
//! order (relay/src/sources/http.rs `handle`, sources/mod.rs `Inbox::receive`): source
//! authentication, the JSON body, the header filter, the stored headers and their size, the
//! key / event type / aggregate id rule, the correlation id and trace context, and the row's
//! validation. Only the final INSERT (a database round trip) and the axum glue are left out;
//! tests/chaos/fuzz.py sends such requests to the real binary for those.
//!
//! The relay is a binary crate, so this target compiles the relay's own files for the steps
//! that live there (`#[path]` below): the very code the binary runs, not a copy.
//!
//! Beyond "no panic": a request passing auth carried the credential; no stored header is a
//! credential, the auth header, a hop-by-hop field or a trace header; a key from the digest
//! is the body's SHA-256; a key never exceeds its column; a refused row names its field.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use queuebox_config::{AuthConfig, Config, SourceKind};
use queuebox_core::keys::{self, KeyInput, KeyOrigin};
use queuebox_core::message::{MAX_CORRELATION_CHARS, MAX_KEY_CHARS};
use queuebox_core::{headers, NewInboxMessage};
use serde_json::Value;

#[path = "../../relay/src/sources/auth.rs"]
#[allow(dead_code)]
mod auth;
#[path = "../../relay/src/sources/filter.rs"]
mod filter;
#[path = "../../relay/src/sources/http_rule.rs"]
#[allow(dead_code)]
mod http_rule;

/// Four sources, one per way a request is authenticated and keyed.
const CONFIG: &str = r#"
database:
  url: postgres://app@127.0.0.1:5432/app
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9000
routes:
  - topicPattern: '**'
    destination: hooks
sources:
  open:
    path: /open
    topic: 'open.{{ eventType }}'
    eventTypePath: $.type
    filter:
      require:
        - header: x-tenant
          in: [acme, globex]
      exclude:
        - header: x-test
          exists: true
  bearer:
    path: /bearer
    idempotencyKeyHeader: X-Key
    idempotencyKeyPath: [$.id, "$['order id']"]
    eventTypeHeader: X-Type
    aggregateIdPath: $.items[0].id
    auth:
      type: bearer
      token: fuzz-bearer-token
  apikey:
    path: /apikey
    topic: '{{ source }}'
    idempotencyKeyPath: $.id
    auth:
      type: api-key
      headerName: X-Api-Key
      key: fuzz-api-key
  hmac:
    path: /hmac
    topic: '{{ source }}'
    aggregateIdHeader: X-Aggregate
    auth:
      type: hmac
      secret: fuzz-hmac-secret
      headerName: X-Signature
      timestampHeader: X-Timestamp
"#;

const NOW_MS: i64 = 1_700_000_000_000;
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The request as text, so the seed corpus (fuzz/corpus/http_ingest) reads like requests:
///
/// ```text
/// bearer                  <- the source; `bearer forged` sends no right credential
/// Content-Type: application/json
/// X-Key: order-1
///                         <- a blank line, then the body bytes
/// {"id": 1}
/// ```
///
/// Without `forged` the target adds the source's right credential (for `hmac` a signature
/// of the body and of the request's `X-Timestamp`, or of now), so the fuzzer reaches the
/// steps after authentication as often as the refusals.
struct Request<'a> {
    source: &'a str,
    forged: bool,
    headers: Vec<(String, String)>,
    body: &'a [u8],
}

impl<'a> Request<'a> {
    fn parse(data: &'a [u8]) -> Option<Request<'a>> {
        let split = data.windows(2).position(|w| w == b"\n\n");
        let (head, body) = match split {
            Some(i) => (&data[..i], &data[i + 2..]),
            None => (data, &data[data.len()..]),
        };
        // hyper hands the handler only headers whose values are visible ASCII (to_str()).
        let head = std::str::from_utf8(head).ok()?;
        let mut lines = head.split('\n');
        let mut first = lines.next()?.split(' ');
        let source = first.next()?;
        let forged = first.next() == Some("forged");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Some(Request {
            source,
            forged,
            headers,
            body,
        })
    }
}

struct Setup {
    config: Config,
    filters: filter::Filters,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let config = queuebox_config::from_yaml_with_env(CONFIG, &[])
            .unwrap_or_else(|e| panic!("the fuzz configuration does not load: {e}"));
        let filters = filter::Filters::from_config(&config);
        Setup { config, filters }
    })
}

fuzz_target!(|data: &[u8]| {
    let st = setup();
    let Some(req) = Request::parse(data) else {
        return;
    };
    let Some(source) = st.config.sources.get(req.source) else {
        return; // 404
    };
    let SourceKind::Http(http) = &source.kind else {
        unreachable!("every fuzz source is HTTP")
    };
    let mut hs = req.headers;
    if let Some(a) = &http.auth {
        if !req.forged {
            let right = match a {
                AuthConfig::Bearer(b) => format!("Bearer {}", b.token.expose()),
                AuthConfig::ApiKey(k) => k.key.expose().to_string(),
                AuthConfig::Hmac(h) => {
                    let ts = keys::header(&hs, "X-Timestamp").unwrap_or_else(|| {
                        let now = (NOW_MS / 1000).to_string();
                        hs.push(("X-Timestamp".into(), now.clone()));
                        now
                    });
                    let secret = h.secret.expose().as_bytes();
                    auth::hmac_signature(secret, &h.signature_prefix, Some(&ts), req.body)
                }
            };
            hs.push((a.header_name().to_string(), right));
        }
        if auth::check(a, &hs, req.body, NOW_MS).is_err() {
            return; // 401
        }
        // Passed: the request carried the credential (the last value of its header wins).
        let sent = keys::header(&hs, a.header_name()).expect("auth passed without its header");
        if let AuthConfig::ApiKey(k) = a {
            assert_eq!(sent, k.key.expose(), "api key accepted: {sent:?}");
        }
    }
    receive(st, source, http, req.body, &hs);
});

/// `Inbox::receive` for an HTTP source, up to the INSERT.
fn receive(
    st: &Setup,
    source: &queuebox_config::SourceConfig,
    http: &queuebox_config::HttpSource,
    body: &[u8],
    hs: &[(String, String)],
) {
    let correlation_id =
        headers::correlation_id(keys::header(hs, headers::X_CORRELATION_ID).as_deref());
    assert!(!correlation_id.is_empty());
    assert!(correlation_id.chars().count() <= MAX_CORRELATION_CHARS);
    assert!(!correlation_id.chars().any(char::is_control));
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return; // 400 Invalid JSON
    };
    if st.filters.first_failing(&source.name, hs).is_some() {
        return; // 202 filtered
    }
    let auth_header = http.auth.as_ref().map(|a| a.header_name().to_string());
    let stored = headers::stored_headers(
        hs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        auth_header.as_deref(),
    );
    for name in stored.keys() {
        let never = [
            "authorization",
            "cookie",
            "traceparent",
            "tracestate",
            "connection",
        ];
        assert!(
            !never.iter().any(|n| n.eq_ignore_ascii_case(name))
                && !headers::is_hop_by_hop(name)
                && !auth_header
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(name)),
            "stored header {name:?}"
        );
    }
    if headers::stored_size(&stored) > MAX_HEADER_BYTES {
        return; // 431
    }
    let input = KeyInput {
        body,
        json: Some(&json),
        headers: hs,
        message_id: None,
    };
    let rule = http_rule::http_rule(source, http, &http_rule::EvaluatedKeys::default());
    rule.check().expect("the configured paths parse");
    let key = match rule.key(&input) {
        Ok(Some((key, origin))) => {
            assert!(key.chars().count() <= MAX_KEY_CHARS);
            if origin == KeyOrigin::Digest {
                assert_eq!(key, keys::digest(body));
            }
            key
        }
        Ok(None) => {
            assert!(rule
                .missing_key()
                .starts_with("No idempotency key found (tried "));
            return; // 400 naming what was tried
        }
        Err(e) => {
            assert!(e.to_string().contains("idempotency key"), "{e}");
            return;
        }
    };
    let (trace, _ignored) = queuebox_core::trace::TraceContext::from_headers(
        hs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let (event_type, aggregate_id) = (rule.event_type(&input), rule.aggregate_id(&input));
    let mut row = NewInboxMessage::new(source.name.clone(), key, json);
    row.event_type = event_type;
    row.aggregate_id = aggregate_id;
    row.headers = stored;
    row.correlation_id = Some(correlation_id);
    row.trace = trace;
    row.consumption = source.common.consumption;
    if let Err(e) = row.validate() {
        // 400 naming the field: every refusal says which value it is about.
        let text = e.to_string();
        let fields = [
            "idempotency_key",
            "event_type",
            "aggregate_id",
            "correlation_id",
            "header",
            "payload",
            "trace",
            "source",
        ];
        assert!(fields.iter().any(|f| text.contains(f)), "{text}");
    }
}
