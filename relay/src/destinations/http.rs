//! The HTTP destination.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::HeaderValue;
use queuebox_config::{AuthConfig, HttpConfig, HttpDestination};

use super::{OutboundMessage, PublishError, Publisher};
use crate::metrics::Metrics;

/// POSTs the payload to `baseUrl` + `path`. Redirects are never followed (a 3xx fails the
/// attempt); every 2xx completes, 202 included.
pub struct HttpPublisher {
    url: String,
    client: reqwest::Client,
    timeout_ms: u64,
    static_headers: Vec<(String, String)>,
    max_error_body: usize,
    metrics: Arc<Metrics>,
}

impl HttpPublisher {
    pub fn new(d: &HttpDestination, http: &HttpConfig, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(d.timeout_ms))
            .connect_timeout(Duration::from_millis((d.timeout_ms / 2).max(1)))
            .pool_max_idle_per_host(64)
            .build()?;
        let mut static_headers: Vec<(String, String)> = d.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match &d.auth {
            Some(AuthConfig::Bearer(b)) => static_headers.push(("Authorization".into(), format!("Bearer {}", b.token.expose()))),
            Some(AuthConfig::ApiKey(k)) => static_headers.push((k.header_name.clone(), k.key.expose().to_string())),
            Some(AuthConfig::Hmac(_)) | None => {}
        }
        Ok(HttpPublisher { url: join_url(&d.base_url, &d.path), client, timeout_ms: d.timeout_ms, static_headers, max_error_body: http.max_error_body_bytes, metrics })
    }
}

/// `http://h/a/` + `/b` → `http://h/a/b` (exactly one slash between them).
pub fn join_url(base: &str, path: &str) -> String {
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        return base.to_string();
    }
    format!("{}/{}", base.trim_end_matches('/'), path)
}

/// Header names the publisher sets itself; a row header of the same name is dropped.
const OWN: [&str; 5] = ["x-message-id", "x-topic", "x-attempt", "x-message-key", "content-type"];

#[async_trait]
impl Publisher for HttpPublisher {
    fn destination_type(&self) -> &'static str {
        "http"
    }

    async fn publish(&self, msg: &OutboundMessage) -> Result<(), PublishError> {
        let mut req = self.client.post(&self.url);
        // Row headers first, then the destination's static and auth headers, so a producer's
        // row can never override the destination's credentials (reference §14.8, decided).
        // `header_pairs` has already left out framing fields and unsendable values; values go
        // as bytes so UTF-8 text (a key, a topic) arrives as sent instead of failing the request.
        for (k, v) in msg.header_pairs() {
            if !OWN.iter().any(|o| o.eq_ignore_ascii_case(k)) && !self.static_headers.iter().any(|(s, _)| s.eq_ignore_ascii_case(k)) {
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
        let body = serde_json::to_vec(&msg.payload).map_err(|e| PublishError::Rejected(e.to_string()))?;
        let resp = req.body(body).send().await.map_err(|e| {
            if e.is_timeout() {
                PublishError::Timeout(self.timeout_ms)
            } else {
                PublishError::Unavailable(format!("HTTP request failed: {}", error_chain(&e)))
            }
        })?;
        let status = resp.status();
        self.metrics.inc("queuebox_http_publish_responses_total", &[("status_class", status_class(status.as_u16()))]);
        if status.is_success() {
            return Ok(());
        }
        let mut text = resp.text().await.unwrap_or_default();
        if text.len() > self.max_error_body {
            let mut cut = self.max_error_body;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        Err(PublishError::Rejected(format!("HTTP {}: {} - {}", status.as_u16(), status.canonical_reason().unwrap_or(""), text)))
    }
}

/// A header value from text: any bytes but control characters (UTF-8 included, as
/// RFC 9110 `obs-text`). A control character fails the attempt naming the header.
fn value(name: &str, text: &str) -> Result<HeaderValue, PublishError> {
    HeaderValue::from_bytes(text.as_bytes()).map_err(|_| PublishError::Rejected(format!("header {name} holds a control character and cannot be sent")))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
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
