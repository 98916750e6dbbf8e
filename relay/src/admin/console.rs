//! The operator console at `/console`: one page, a script and a style sheet, embedded in the
//! binary (no build step, nothing fetched from elsewhere). Mounted with the admin API, so it
//! exists only when `admin.enabled` is set.
//!
//! The three files are the same for every deployment and hold no data, so they are served
//! without credentials (a browser cannot send a bearer token or an API key when it opens a
//! URL). Every number and row the page shows comes from the admin API's JSON endpoints,
//! which check `admin.auth` like any other admin request: the page asks for the credential,
//! keeps it in the tab's session storage and sends it in the configured header. The page
//! renders data as text nodes only, and the Content-Security-Policy forbids inline script,
//! so a `<script>` in a payload or a `last_error` cannot run.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queuebox_config::AuthConfig;
use serde_json::json;

use crate::state::AppState;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/app.js");
const STYLE: &str = include_str!("console/style.css");

/// Only this origin's script, style and fetches; no frames, no plugins, no inline code.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(|| file(INDEX, "text/html; charset=utf-8")))
        .route(
            "/console/app.js",
            get(|| file(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/console/style.css",
            get(|| file(STYLE, "text/css; charset=utf-8")),
        )
        .route("/console/auth", get(auth_scheme))
}

async fn file(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// How the page must present the admin credential: the scheme and header name of
/// `admin.auth` (never the secret). `none` when `admin.insecure` leaves the API open.
async fn auth_scheme(State(st): State<AppState>) -> Response {
    let (scheme, header) = match &st.cfg.admin.auth {
        None => ("none", None),
        Some(a @ AuthConfig::Bearer(_)) => ("bearer", Some(a.header_name())),
        Some(a @ AuthConfig::ApiKey(_)) => ("api-key", Some(a.header_name())),
        Some(a @ AuthConfig::Hmac(_)) => ("hmac", Some(a.header_name())),
    };
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(json!({ "scheme": scheme, "header": header })),
    )
        .into_response()
}
