//! The admin API (off by default; `admin.auth` required unless `admin.insecure: true`):
//! list dead rows, replay an inbox row as a new outbox row, replay or delete outbox rows,
//! cancel pending rows, pause and resume sources, destinations and topics, and the read-only views of the operator console (`console`, served at `/console`):
//! counts by state, a message's journey.

mod console;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use bytes::Bytes;
use queuebox_core::store::relay::{CancelTarget, DeadFilter, DeadTable, PauseKind, ReplayFilter};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use crate::inbox_relay::outbox_row;
use crate::state::AppState;

/// The admin routes. Every API route is behind [`authenticate`]; the console's page and
/// files are not (the page is what asks for the credentials).
pub fn router(st: &AppState) -> Router<AppState> {
    let limit = usize::try_from(st.cfg.admin.max_payload_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route("/admin/dead/:table", get(list_dead))
        .route("/admin/replay", post(replay_outbox))
        .route("/admin/inbox/:id/replay", post(replay_inbox))
        .route("/admin/outbox/:id", delete(delete_outbox))
        .route("/admin/inbox/:id/requeue", post(requeue_inbox))
        .route("/admin/inbox/:id", delete(delete_inbox))
        .route("/admin/cancel/:table", post(cancel))
        .route("/admin/paused", get(list_paused))
        .route("/admin/pause/:kind", post(pause))
        .route("/admin/resume/:kind", post(resume))
        .route("/admin/transform/test", post(transform_test))
        .route("/admin/overview", get(overview))
        .route("/admin/journey", get(journey))
        .route_layer(axum::middleware::from_fn_with_state(
            st.clone(),
            authenticate,
        ))
        .merge(console::router())
        .layer(axum::extract::DefaultBodyLimit::max(limit))
}

/// `POST /admin/transform/test` (docs/relay.md, "Transforms and key expressions"): the
/// answer is `queuebox_transform::run_transform_test`'s, evaluated on the blocking pool with
/// `timeoutMs` clamped to `admin.maxTransformTimeoutMs`.
async fn transform_test(State(st): State<AppState>, body: Bytes) -> Response {
    let max = std::time::Duration::from_millis(st.cfg.admin.max_transform_timeout_ms);
    let answer = tokio::task::spawn_blocking(move || {
        queuebox_transform::run_transform_test(
            &body,
            max,
            &Uuid::new_v4().to_string(),
            chrono::Utc::now(),
        )
    })
    .await;
    match answer {
        Ok(a) => (
            StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_REQUEST),
            Json(a.body),
        )
            .into_response(),
        Err(e) => err(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the evaluation panicked: {e}"),
        ),
    }
}

fn err(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({ "error": msg.into() }))).into_response()
}

/// Every admin API request, before its handler: the body is read under
/// `admin.maxPayloadBytes` (413 above it), so an oversized unauthenticated request is refused
/// early and an HMAC check sees the exact bytes; then `admin.auth` is checked (401). The
/// handler gets the body it was checked with (docs/relay.md, "Admin API").
async fn authenticate(
    State(st): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let limit = st.cfg.admin.max_payload_bytes;
    let body = match crate::sources::http::read_limited(&parts.headers, body, limit).await {
        Ok(b) => b,
        Err(true) => {
            return err(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body exceeds {limit} bytes"),
            )
        }
        Err(false) => return err(StatusCode::BAD_REQUEST, "The request body broke off"),
    };
    if let Err(r) = guard(&st, &parts.headers, &body) {
        return r;
    }
    next.run(axum::extract::Request::from_parts(parts, body.into()))
        .await
}

// The refusal is the response itself, handed back by the layer; boxing it would only add
// an allocation on the refused path.
#[allow(clippy::result_large_err)]
fn guard(st: &AppState, headers: &HeaderMap, body: &[u8]) -> Result<(), Response> {
    let Some(auth) = &st.cfg.admin.auth else {
        return Ok(());
    };
    let hs: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| {
            v.to_str()
                .ok()
                .map(|v| (k.as_str().to_string(), v.to_string()))
        })
        .collect();
    crate::sources::auth::check(auth, &hs, body, chrono::Utc::now().timestamp_millis())
        .map_err(|r| err(StatusCode::UNAUTHORIZED, r))
}

/// A store refusal the caller can act on (a PostgreSQL-only view on SQL Server, a filter
/// that does not apply) is a 400 naming it; anything else is a 500 with secrets redacted.
fn db_error(e: queuebox_core::Error) -> Response {
    if let queuebox_core::Error::InvalidInput(msg) = e {
        return err(StatusCode::BAD_REQUEST, msg);
    }
    err(
        StatusCode::INTERNAL_SERVER_ERROR,
        queuebox_core::headers::redact_error(&e.to_string(), &[]),
    )
}

#[derive(Deserialize)]
struct DeadQuery {
    limit: Option<u32>,
    /// The inbox source, or an outbox row's `x-source` header.
    source: Option<String>,
    /// Outbox rows only.
    topic: Option<String>,
}

/// `GET /admin/dead/{table}?limit=&source=&topic=`. Without filters, the listing every
/// backend has; with one, `queuebox dead list`'s store query (PostgreSQL only).
async fn list_dead(
    State(st): State<AppState>,
    Path(table): Path<String>,
    Query(q): Query<DeadQuery>,
) -> Response {
    let limit = q.limit.unwrap_or(100).min(1000);
    let table = match table.as_str() {
        "outbox" => DeadTable::Outbox,
        "inbox" => DeadTable::Inbox,
        _ => return err(StatusCode::NOT_FOUND, "table is outbox or inbox"),
    };
    let blank = |s: Option<String>| s.filter(|s| !s.is_empty());
    let (source, topic) = (blank(q.source), blank(q.topic));
    let rows = match (table, &source, &topic) {
        (DeadTable::Outbox, None, None) => st.store.list_dead_outbox(limit).await,
        (DeadTable::Inbox, None, None) => st.store.list_dead_inbox(limit).await,
        (DeadTable::Inbox, _, Some(_)) => {
            return err(
                StatusCode::BAD_REQUEST,
                "topic filters outbox rows; an inbox row has a source (use source)",
            )
        }
        _ => {
            let filter = DeadFilter {
                table,
                ids: None,
                source,
                topic,
                older_than: None,
                limit,
            };
            st.store.find_dead(&filter).await
        }
    };
    match rows {
        Ok(rows) => Json(json!({ "rows": rows })).into_response(),
        Err(e) => db_error(e),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplayBody {
    ids: Option<Vec<Uuid>>,
    topic: Option<String>,
    source: Option<String>,
    created_after: Option<chrono::DateTime<chrono::Utc>>,
    created_before: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    dead_only: bool,
}

/// `POST /admin/replay`: matching `sent`/`dead` outbox rows back to pending, `attempt = 0`.
async fn replay_outbox(State(st): State<AppState>, body: Bytes) -> Response {
    let b: ReplayBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("Invalid request: {e}")),
    };
    let f = ReplayFilter {
        ids: b.ids,
        topic: b.topic,
        source: b.source,
        created_after: b.created_after,
        created_before: b.created_before,
        dead_only: b.dead_only,
    };
    if f.is_empty() {
        return err(
            StatusCode::BAD_REQUEST,
            "Give at least one filter: ids, topic, source, createdAfter or createdBefore",
        );
    }
    match st.store.replay_outbox(&f).await {
        Ok(n) => {
            tracing::info!(moved = n, "admin replay of outbox rows");
            Json(json!({ "moved": n })).into_response()
        }
        Err(e) => db_error(e),
    }
}

/// `POST /admin/inbox/{id}/replay`: a new outbox row (new `X-Message-Id`) with the same
/// `x-idempotency-key`, so receivers deduplicating on it see the repeat.
async fn replay_inbox(State(st): State<AppState>, Path(id): Path<Uuid>) -> Response {
    let m = match st.store.inbox_row(id).await {
        Ok(Some(m)) => m,
        Ok(None) => return err(StatusCode::NOT_FOUND, "no such inbox row"),
        Err(e) => return db_error(e),
    };
    let row = match outbox_row(&st.cfg, &m) {
        Ok(row) => row,
        Err(e) => return err(StatusCode::CONFLICT, e.to_string()),
    };
    match st.store.insert_outbox(&row).await {
        Ok(oid) => {
            tracing::info!(inbox_id = %id, outbox_id = %oid, "admin replay of an inbox row");
            (StatusCode::CREATED, Json(json!({ "outboxId": oid }))).into_response()
        }
        Err(e) => db_error(e),
    }
}

async fn delete_outbox(State(st): State<AppState>, Path(id): Path<Uuid>) -> Response {
    match st.store.delete_outbox(&[id]).await {
        Ok(n) => Json(json!({ "deleted": n })).into_response(),
        Err(e) => db_error(e),
    }
}

/// `POST /admin/inbox/{id}/requeue`: a dead inbox row back to pending with attempt 0, as
/// `queuebox dead replay --table inbox` does (the relay forwards a push row again, a worker
/// claims a pull row again). Unlike `/admin/inbox/{id}/replay`, which makes an outbox row from
/// any inbox row, this is the retry a dead pull job needs. PostgreSQL only.
async fn requeue_inbox(State(st): State<AppState>, Path(id): Path<Uuid>) -> Response {
    match st.store.requeue_dead_inbox(&[id]).await {
        Ok(n) => {
            tracing::info!(inbox_id = %id, requeued = n, "admin requeue of a dead inbox row");
            Json(json!({ "requeued": n })).into_response()
        }
        Err(e) => db_error(e),
    }
}

/// `DELETE /admin/inbox/{id}`: deletes the inbox row if it is dead, as
/// `queuebox dead delete --table inbox` does. PostgreSQL only.
async fn delete_inbox(State(st): State<AppState>, Path(id): Path<Uuid>) -> Response {
    match st.store.delete_dead(DeadTable::Inbox, &[id]).await {
        Ok(n) => Json(json!({ "deleted": n })).into_response(),
        Err(e) => db_error(e),
    }
}

/// `POST /admin/cancel/{inbox|outbox}`: pending rows become `cancelled`, as `queuebox cancel`
/// does; answers `{cancelled, inFlight, finished, push}`. PostgreSQL only.
async fn cancel(State(st): State<AppState>, Path(table): Path<String>, body: Bytes) -> Response {
    // The body names the rows as the bindings do (`CancelTarget::from_json`: `id`, or `key`
    // or `aggregate` with `source` for the inbox, `key` with an optional `topic` for the
    // outbox); unknown fields are refused by name there.
    if table != "inbox" && table != "outbox" {
        return err(StatusCode::NOT_FOUND, "table must be inbox or outbox");
    }
    let b: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("Invalid request: {e}")),
    };
    let target = match CancelTarget::from_json(&table, &b) {
        Ok(t) => t,
        Err(e) => return db_error(e),
    };
    match st.store.cancel(&target).await {
        Ok(r) => {
            tracing::info!(
                table = %table,
                cancelled = r.cancelled,
                in_flight = r.in_flight,
                "admin cancel"
            );
            Json(r).into_response()
        }
        Err(e) => db_error(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PauseBody {
    name: String,
}

/// `POST /admin/pause/{source|destination|topic}` with `{"name": …}`: what `queuebox pause`
/// does; answers `{kind, name, paused}` (`paused: false` when it was paused already). An
/// unknown name is a 404 naming it. PostgreSQL only.
async fn pause(State(st): State<AppState>, Path(kind): Path<String>, body: Bytes) -> Response {
    pause_or_resume(st, kind, body, true).await
}

/// `POST /admin/resume/{source|destination|topic}` with `{"name": …}`: answers
/// `{kind, name, resumed}` (`resumed: false` when it was not paused).
async fn resume(State(st): State<AppState>, Path(kind): Path<String>, body: Bytes) -> Response {
    pause_or_resume(st, kind, body, false).await
}

async fn pause_or_resume(st: AppState, kind: String, body: Bytes, pause: bool) -> Response {
    let kind = match PauseKind::parse(&kind) {
        Ok(k) => k,
        Err(e) => return err(StatusCode::NOT_FOUND, e.to_string()),
    };
    let b: PauseBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("Invalid request: {e}")),
    };
    let changed =
        match crate::paused::set(Some(&st.cfg), st.store.as_ref(), kind, &b.name, pause).await {
            Ok(c) => c,
            Err(e) => {
                return match e.downcast::<queuebox_core::Error>() {
                    Ok(e) => db_error(e),
                    // The name check's refusal: an unknown or empty name.
                    Err(e) => err(StatusCode::NOT_FOUND, e.to_string()),
                };
            }
        };
    // This replica's view at once (the others read it within a second).
    if let Err(e) = st.paused.refresh().await {
        tracing::warn!(error = %e, "could not read the paused set after a change");
    }
    let word = if pause { "paused" } else { "resumed" };
    Json(json!({ "kind": kind.as_str(), "name": b.name, word: changed })).into_response()
}

/// `GET /admin/paused`: `{paused: [{kind, name, pausedAt}]}`, read from the database.
async fn list_paused(State(st): State<AppState>) -> Response {
    match st.store.list_paused().await {
        Ok(rows) => Json(json!({ "paused": rows })).into_response(),
        Err(e) => db_error(e),
    }
}

/// `GET /admin/overview`: the console's "is anything stuck" numbers, per outbox topic and
/// inbox source (`RelayStore::state_counts`).
async fn overview(State(st): State<AppState>) -> Response {
    match st.store.state_counts().await {
        Ok(rows) => Json(json!({ "rows": rows })).into_response(),
        Err(e) => db_error(e),
    }
}

#[derive(Deserialize)]
struct JourneyQuery {
    q: String,
}

/// `GET /admin/journey?q=<row id | source:key>`: what `queuebox inspect` prints, as JSON.
async fn journey(State(st): State<AppState>, Query(q): Query<JourneyQuery>) -> Response {
    let target = match crate::operate::parse_target(q.q.trim()) {
        Ok(t) => t,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("q: {e}")),
    };
    match st.store.journey(&target).await {
        Ok(j) if j.inbox.is_none() && j.outbox.is_empty() => err(
            StatusCode::NOT_FOUND,
            format!("No inbox or outbox row matches {}", q.q.trim()),
        ),
        Ok(j) => Json(j).into_response(),
        Err(e) => db_error(e),
    }
}
