//! OAuth2 client credentials for an HTTP destination: one token, fetched on first use,
//! shared by every publish of the destination and refreshed shortly before it expires.
//!
//! The token request is `POST tokenUrl` with a form body `grant_type=client_credentials`
//! (+ `scope`, + `extraParams`), the client authenticated with HTTP Basic
//! (`client_id:client_secret`, RFC 6749 §2.3.1, the method every server must support).
//! The cache is behind an async mutex that is held across the fetch, so concurrent
//! publishes wait for one token request instead of each sending their own.

use std::time::{Duration, Instant};

use base64::Engine;
use queuebox_config::OAuth2Auth;
use serde::Deserialize;

use super::PublishError;

/// A token expiring in `expires_in` seconds is refreshed this share of its lifetime early
/// (capped at [`MAX_REFRESH_MARGIN`]), so a token is never sent in its last moments.
const REFRESH_SHARE: u32 = 10;
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// The cached token of one destination and how to get a new one.
pub struct TokenSource {
    client: reqwest::Client,
    token_url: String,
    /// `Basic base64(client_id:client_secret)`.
    client_auth: String,
    /// The url-encoded form body of the token request.
    form: String,
    max_error_body: usize,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

struct Cached {
    token: String,
    /// `None` when the server gave no `expires_in`: kept until the destination answers 401.
    refresh_at: Option<Instant>,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// Seconds; some servers send it as a string.
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

impl TokenSource {
    /// `client` is the destination's client (same timeouts, no redirects, same address guard).
    pub fn new(o: &OAuth2Auth, client: reqwest::Client, max_error_body: usize) -> Self {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(scope) = &o.scope {
            form.append_pair("scope", scope);
        }
        for (k, v) in &o.extra_params {
            form.append_pair(k, v.expose());
        }
        let pair = format!("{}:{}", o.client_id, o.client_secret.expose());
        TokenSource {
            client,
            token_url: o.token_url.clone(),
            client_auth: format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ),
            form: form.finish(),
            max_error_body,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// A valid access token: the cached one, or a new one from the token endpoint. A failed
    /// token request fails the attempt ([`PublishError::Credentials`]); nothing is cached.
    pub async fn token(&self) -> Result<String, PublishError> {
        let mut slot = self.cached.lock().await;
        if let Some(c) = slot.as_ref() {
            if c.refresh_at.is_none_or(|t| Instant::now() < t) {
                return Ok(c.token.clone());
            }
        }
        let fresh = self.fetch().await?;
        let token = fresh.token.clone();
        *slot = Some(fresh);
        Ok(token)
    }

    /// Drops `token` from the cache (the destination answered 401 to it), so the next
    /// attempt asks for a new one.
    pub async fn invalidate(&self, token: &str) {
        let mut slot = self.cached.lock().await;
        if slot.as_ref().is_some_and(|c| c.token == token) {
            *slot = None;
        }
    }

    async fn fetch(&self) -> Result<Cached, PublishError> {
        let fail = |why: String| {
            PublishError::Credentials(format!(
                "OAuth2 token request to {} failed: {why}",
                self.token_url
            ))
        };
        let asked = Instant::now();
        let resp = self
            .client
            .post(&self.token_url)
            .header("Authorization", &self.client_auth)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .body(self.form.clone())
            .send()
            .await
            .map_err(|e| fail(super::error_text::error_chain(&e)))?;
        let status = resp.status();
        let body = resp
            .bytes()
            .await
            .map_err(|e| fail(super::error_text::error_chain(&e)))?;
        if !status.is_success() {
            let text = super::error_text::truncate(
                String::from_utf8_lossy(&body).into_owned(),
                self.max_error_body,
            );
            return Err(fail(format!(
                "HTTP {}: {} - {text}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            )));
        }
        let t: TokenResponse = serde_json::from_slice(&body)
            .map_err(|_| fail("the answer is not JSON with an access_token".into()))?;
        if t.access_token.is_empty() {
            return Err(fail("the answer's access_token is empty".into()));
        }
        let lifetime = t
            .expires_in
            .as_ref()
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
            .map(Duration::from_secs);
        let refresh_at = lifetime.map(|l| asked + l - (l / REFRESH_SHARE).min(MAX_REFRESH_MARGIN));
        tracing::debug!(token_url = %self.token_url, expires_in = ?lifetime, "obtained an OAuth2 access token");
        Ok(Cached {
            token: t.access_token,
            refresh_at,
        })
    }
}
