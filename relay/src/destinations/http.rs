//! The HTTP destination: one client per destination, the destination's outbound auth
//! applied to every request (see [`Auth`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use queuebox_config::{DestinationAuth, HmacSigning, HttpConfig, HttpDestination};
use reqwest::header::HeaderValue;

use super::error_text::{error_chain, truncate};
use super::oauth2::TokenSource;
use super::{OutboundMessage, PublishError, Publisher};
use crate::metrics::Metrics;

/// POSTs the payload to `baseUrl` + `path`. Redirects are never followed (a 3xx fails the
/// attempt); every 2xx completes, 202 included.
pub struct HttpPublisher {
    url: String,
    client: reqwest::Client,
    timeout_ms: u64,
    /// The destination's `headers`, then a fixed auth header (bearer, api-key, basic, header).
    static_headers: Vec<(String, String)>,
    /// The per-request part of the auth (an OAuth2 token, an HMAC signature).
    auth: Auth,
    /// Lower-case names a row header may not take over: static, auth and own headers.
    reserved: Vec<String>,
    max_error_body: usize,
    metrics: Arc<Metrics>,
}

/// The part of a destination's auth that changes per request.
enum Auth {
    /// Nothing, or a fixed header already in `static_headers`.
    Fixed,
    /// `Authorization: Bearer <token>` from the token endpoint.
    OAuth2(TokenSource),
    /// A signature over the exact body bytes sent.
    Hmac(HmacSigning),
}

/// Header names the publisher sets itself; a row header of the same name is dropped.
const OWN: [&str; 5] = [
    "x-message-id",
    "x-topic",
    "x-attempt",
    "x-message-key",
    "content-type",
];

impl HttpPublisher {
    pub fn new(
        d: &HttpDestination,
        http: &HttpConfig,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(d.timeout_ms))
            .connect_timeout(Duration::from_millis((d.timeout_ms / 2).max(1)))
            .pool_max_idle_per_host(64);
        if http.block_private_addresses {
            builder = builder.dns_resolver(Arc::new(super::address_guard::PublicOnly));
        }
        let client = builder.build()?;
        let auth_headers: Vec<String> = d
            .auth
            .as_ref()
            .map(DestinationAuth::header_names)
            .unwrap_or_default();
        // The auth header wins over a static header of the same name (one value is sent).
        let mut static_headers: Vec<(String, String)> = d
            .headers
            .iter()
            .filter(|(k, _)| !auth_headers.contains(&k.to_ascii_lowercase()))
            .map(|(k, v)| (k.clone(), v.expose().to_string()))
            .collect();
        let auth = match &d.auth {
            None => Auth::Fixed,
            Some(DestinationAuth::Bearer(b)) => {
                static_headers.push((
                    "Authorization".into(),
                    format!("Bearer {}", b.token.expose()),
                ));
                Auth::Fixed
            }
            Some(DestinationAuth::ApiKey(k)) => {
                static_headers.push((k.header_name.clone(), k.key.expose().to_string()));
                Auth::Fixed
            }
            Some(DestinationAuth::Basic(b)) => {
                let pair = format!("{}:{}", b.username, b.password.expose());
                static_headers.push((
                    "Authorization".into(),
                    format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(pair)
                    ),
                ));
                Auth::Fixed
            }
            Some(DestinationAuth::Header(h)) => {
                static_headers.push((h.header_name.clone(), h.header_value.expose().to_string()));
                Auth::Fixed
            }
            Some(DestinationAuth::OAuth2(o)) => Auth::OAuth2(TokenSource::new(
                o,
                client.clone(),
                http.max_error_body_bytes,
            )),
            Some(DestinationAuth::Hmac(h)) => Auth::Hmac(h.clone()),
        };
        let reserved = OWN
            .iter()
            .map(|s| s.to_string())
            .chain(static_headers.iter().map(|(k, _)| k.to_ascii_lowercase()))
            .chain(auth_headers)
            .collect();
        Ok(HttpPublisher {
            url: join_url(&d.base_url, &d.path),
            client,
            timeout_ms: d.timeout_ms,
            static_headers,
            auth,
            reserved,
            max_error_body: http.max_error_body_bytes,
            metrics,
        })
    }
}

/// The signature header value: `prefix` + hex HMAC-SHA256 over `timestamp + "." + body`
/// (with a timestamp) or `body` — what an HTTP source with `auth.type: hmac` verifies.
pub fn sign(h: &HmacSigning, timestamp: Option<&str>, body: &[u8]) -> String {
    crate::sources::auth::hmac_signature(
        h.secret.expose().as_bytes(),
        &h.signature_prefix,
        timestamp,
        body,
    )
}

/// `http://h/a/` + `/b` → `http://h/a/b` (exactly one slash between them).
pub fn join_url(base: &str, path: &str) -> String {
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        return base.to_string();
    }
    format!("{}/{}", base.trim_end_matches('/'), path)
}

#[async_trait]
impl Publisher for HttpPublisher {
    fn destination_type(&self) -> &'static str {
        "http"
    }

    async fn publish(&self, msg: &OutboundMessage) -> Result<(), PublishError> {
        let mut req = self.client.post(&self.url);
        // Row headers first, then the destination's static and auth headers, so a producer's
        // row can never override the destination's credentials (proto-docs/http-destination.md#headers).
        // `header_pairs` has already left out framing fields and unsendable values; values go
        // as bytes so UTF-8 text (a key, a topic) arrives as sent instead of failing the request.
        for (k, v) in msg.header_pairs() {
            if !self.reserved.iter().any(|r| r.eq_ignore_ascii_case(k)) {
                req = req.header(k, value(k, &v)?);
            }
        }
        for (k, v) in &self.static_headers {
            req = req.header(k, value(k, v)?);
        }
        req = req
            .header("Content-Type", "application/json")
            .header("X-Message-Id", msg.id.to_string())
            .header("X-Topic", value("X-Topic", &msg.topic)?)
            .header("X-Attempt", msg.attempt.to_string());
        if let Some(k) = &msg.key {
            req = req.header("X-Message-Key", value("X-Message-Key", k)?);
        }
        let body =
            serde_json::to_vec(&msg.payload).map_err(|e| PublishError::Rejected(e.to_string()))?;
        let mut token = None;
        match &self.auth {
            Auth::Fixed => {}
            Auth::OAuth2(source) => {
                let t = source.token().await?;
                req = req.header(
                    "Authorization",
                    value("Authorization", &format!("Bearer {t}"))?,
                );
                token = Some(t);
            }
            Auth::Hmac(h) => {
                // The signed bytes are exactly the bytes sent below.
                let ts = h
                    .timestamp_header
                    .as_ref()
                    .map(|name| (name, chrono::Utc::now().timestamp().to_string()));
                let signed_ts = ts
                    .as_ref()
                    .filter(|_| h.signs_timestamp())
                    .map(|(_, t)| t.as_str());
                req = req.header(&h.header_name, sign(h, signed_ts, &body));
                if let Some((name, t)) = &ts {
                    req = req.header(name.as_str(), t.as_str());
                }
            }
        }
        let resp = req.body(body).send().await.map_err(|e| {
            if e.is_timeout() {
                PublishError::Timeout(self.timeout_ms)
            } else {
                PublishError::Unavailable(format!("HTTP request failed: {}", error_chain(&e)))
            }
        })?;
        let status = resp.status();
        self.metrics.inc(
            "queuebox_http_publish_responses_total",
            &[("status_class", status_class(status.as_u16()))],
        );
        if status.is_success() {
            return Ok(());
        }
        if let (Auth::OAuth2(source), Some(t), 401) = (&self.auth, &token, status.as_u16()) {
            // A revoked or rotated token: the next attempt asks for a new one.
            source.invalidate(t).await;
        }
        let mut text = truncate(resp.text().await.unwrap_or_default(), self.max_error_body);
        if let Some(t) = &token {
            // The access token is not in the configuration's secrets: mask an echo of it here.
            text = text.replace(t.as_str(), "***");
        }
        Err(PublishError::Rejected(format!(
            "HTTP {}: {} - {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            text
        )))
    }
}

/// A header value from text: any bytes but control characters (UTF-8 included, as
/// RFC 9110 `obs-text`). A control character fails the attempt naming the header.
fn value(name: &str, text: &str) -> Result<HeaderValue, PublishError> {
    HeaderValue::from_bytes(text.as_bytes()).map_err(|_| {
        PublishError::Rejected(format!(
            "header {name} holds a control character and cannot be sent"
        ))
    })
}

/// The `status_class` label of a response.
pub fn status_class(code: u16) -> &'static str {
    match code {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}
