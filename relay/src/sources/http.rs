//! HTTP sources: `POST {inbox.basePath}{source.path}`. The body is read once, counted while
//! it streams (a chunked body above `inbox.maxBodyBytes` is cut off at the limit), then
//! authenticated, parsed and stored through [`super::Inbox::receive`].

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use queuebox_config::SourceKind;
use queuebox_core::headers;
use serde_json::json;

use super::{Received, Rejected, Stored};
use crate::state::AppState;

/// `Retry-After` of a 503 for an unreachable database: a short wait, as a restarting or
/// failing-over database is usually back within seconds.
const RETRY_AFTER_SECS: &str = "5";

fn error(status: StatusCode, msg: &str) -> Response {
    (status, Json(json!({ "error": msg }))).into_response()
}

/// Reads at most `limit` bytes; `Err(true)` when the body is larger, `Err(false)` when
/// the body broke off.
pub async fn read_limited(headers: &HeaderMap, body: Body, limit: u64) -> Result<Bytes, bool> {
    if let Some(len) = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit {
            return Err(true);
        }
    }
    let mut body = body;
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| false)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() as u64 + data.len() as u64 > limit {
                return Err(true);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// The fallback handler of the data port: every inbox path, and 404 for anything else.
pub async fn ingest(State(st): State<AppState>, req: Request) -> Response {
    // Borrowed from the shared configuration: no copy of the source per request.
    let cfg = &st.cfg;
    let source = req
        .uri()
        .path()
        .strip_prefix(cfg.inbox.base_path.as_str())
        .filter(|p| p.starts_with('/'))
        .and_then(|p| cfg.http_source_at(p));
    let Some(source) = source else {
        return error(StatusCode::NOT_FOUND, "Not found");
    };
    if req.method() != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "Use POST");
    }
    let received_corr = req
        .headers()
        .get(headers::X_CORRELATION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let t0 = std::time::Instant::now();
    let mut resp = handle(&st, source, req).await;
    st.metrics.observe(
        "queuebox_inbox_ingest_duration_seconds",
        &[("source", &source.name)],
        t0.elapsed(),
    );
    // Every response carries the correlation id (the stored one, or the cleaned received one).
    if !resp.headers().contains_key(headers::X_CORRELATION_ID) {
        let c = headers::correlation_id(received_corr.as_deref());
        if let Ok(v) = HeaderValue::from_str(&c) {
            resp.headers_mut().insert(headers::X_CORRELATION_ID, v);
        }
    }
    resp
}

/// One ingest request being handled, counted in [`AppState::ingesting`] until dropped.
struct InFlight(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn enter(st: &AppState) -> InFlight {
        st.ingesting.fetch_add(1, Ordering::SeqCst);
        InFlight(st.ingesting.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handle(st: &AppState, source: &queuebox_config::SourceConfig, req: Request) -> Response {
    // Counted before the draining check, so the drain cannot end between the two.
    let _in_flight = InFlight::enter(st);
    if st.draining.load(Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "QueueBox is shutting down");
    }
    // Before the body is read: a refused request costs no more than its headers.
    if let Err(secs) = st.rate_limits.take(&source.name, std::time::Instant::now()) {
        tracing::debug!(source = %source.name, retry_after = secs, "inbox request over the source's rateLimit");
        let mut resp = error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "Rate limit of {} requests per minute exceeded",
                match &source.kind {
                    SourceKind::Http(h) =>
                        h.rate_limit.as_ref().map_or(0, |r| r.requests_per_minute),
                    _ => 0,
                }
            ),
        );
        resp.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
        return resp;
    }
    let (parts, body) = req.into_parts();
    let limit = st.cfg.inbox.max_body_bytes;
    // The whole body within server.requestBodyTimeoutMs: a client that stalls mid-body gets
    // 408 and the connection is closed (the rest of its body is never read).
    let body_timeout = std::time::Duration::from_millis(st.cfg.server.request_body_timeout_ms);
    let Ok(body) =
        tokio::time::timeout(body_timeout, read_limited(&parts.headers, body, limit)).await
    else {
        let mut resp = error(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "The request body did not arrive within {} ms",
                body_timeout.as_millis()
            ),
        );
        resp.headers_mut().insert(
            axum::http::header::CONNECTION,
            HeaderValue::from_static("close"),
        );
        return resp;
    };
    let body = match body {
        Ok(b) => b,
        Err(true) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("Request body exceeds {limit} bytes"),
            )
        }
        Err(false) => return error(StatusCode::BAD_REQUEST, "The request body broke off"),
    };
    // Every header value that is UTF-8 text is kept as sent (a UTF-8 X-Idempotency-Key, a
    // name with accents): HTTP allows bytes above 0x7F (RFC 9110 `obs-text`), and the
    // stored headers are JSON text. A value that is not UTF-8 (Latin-1 bytes) cannot be
    // stored as text: it is left out, counted by source and logged at debug by name only
    // (a sender controls how often, so not at warn).
    let mut not_utf8: Vec<&str> = Vec::new();
    let hs: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| match std::str::from_utf8(v.as_bytes()) {
            Ok(v) => Some((k.as_str().to_string(), v.to_string())),
            Err(_) => {
                not_utf8.push(k.as_str());
                None
            }
        })
        .collect();
    if !not_utf8.is_empty() {
        st.metrics.add(
            "queuebox_inbox_headers_dropped_total",
            &[("source", &source.name)],
            not_utf8.len() as u64,
        );
        tracing::debug!(source = %source.name, headers = ?not_utf8, "header values that are not UTF-8 are not stored");
    }
    let SourceKind::Http(h) = &source.kind else {
        return error(StatusCode::NOT_FOUND, "Not an HTTP source");
    };
    if let Some(auth) = &h.auth {
        if let Err(reason) =
            super::auth::check(auth, &hs, &body, chrono::Utc::now().timestamp_millis())
        {
            return error(StatusCode::UNAUTHORIZED, reason);
        }
    }
    let outcome = st
        .inbox
        .receive(
            source,
            Received {
                body,
                headers: hs,
                message_id: None,
            },
        )
        .await;
    let (status, body, corr) = match outcome {
        Ok(Stored::New { id, correlation_id }) => (
            StatusCode::ACCEPTED,
            json!({ "messageId": id }),
            Some(correlation_id),
        ),
        Ok(Stored::Duplicate { correlation_id, .. }) => (
            StatusCode::OK,
            json!({ "status": "duplicate" }),
            Some(correlation_id),
        ),
        Ok(Stored::Dead { id }) => (StatusCode::ACCEPTED, json!({ "messageId": id }), None),
        Ok(Stored::Filtered { .. }) => {
            (StatusCode::ACCEPTED, json!({ "status": "filtered" }), None)
        }
        Err(Rejected::NotJson) => {
            tracing::warn!(source = %source.name, "inbox request refused: the body is not JSON");
            return error(StatusCode::BAD_REQUEST, "Invalid JSON");
        }
        Err(e @ Rejected::TooDeep) => {
            tracing::warn!(source = %source.name, "inbox request refused: the body nests too deep");
            return error(StatusCode::BAD_REQUEST, &e.to_string());
        }
        Err(Rejected::Invalid(why)) => {
            tracing::warn!(source = %source.name, reason = %why, "inbox request refused: a value that cannot be stored or sent");
            return error(StatusCode::BAD_REQUEST, &why);
        }
        Err(e @ Rejected::HeadersTooLarge { .. }) => {
            return error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, &e.to_string())
        }
        Err(Rejected::Transform(why)) => {
            tracing::warn!(source = %source.name, reason = %why, "inbox request refused by the source transform");
            return error(StatusCode::UNPROCESSABLE_ENTITY, &why);
        }
        Err(Rejected::MissingKey(why)) => {
            tracing::warn!(source = %source.name, reason = %why, "inbox request without an idempotency key");
            return error(StatusCode::BAD_REQUEST, &why);
        }
        Err(Rejected::Storage(e)) if e.is_unavailable() => {
            // One line per outage, then a summary per interval: every refused request of an
            // outage would otherwise log the same line (counted in the metric either way).
            const UNREACHABLE: &str = "inbox insert: the database is unreachable";
            if crate::warn_limit::admit(&st.metrics, "inbox_database_unreachable", UNREACHABLE) {
                tracing::warn!(source = %source.name, error = %headers::redact_error(&e.to_string(), &[]), "{UNREACHABLE}");
            }
            let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, "Database unavailable");
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
            return resp;
        }
        Err(Rejected::Storage(e)) => {
            tracing::error!(source = %source.name, error = %headers::redact_error(&e.to_string(), &[]), "inbox insert failed");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "Storage failed");
        }
    };
    let mut resp = (status, Json(body)).into_response();
    if let Some(c) = corr.and_then(|c| HeaderValue::from_str(&c).ok()) {
        resp.headers_mut().insert(headers::X_CORRELATION_ID, c);
    }
    resp
}
