//! Node.js binding (napi-rs) of the QueueBox core. Everything here is glue: the pull worker,
//! its lease renewal, claims, retry policy and key rules run in `queuebox-core` on napi's
//! tokio runtime, and the JSON glue, migrations and the enqueue pool are `queuebox-bridge`'s,
//! shared with the C and Python bindings. JavaScript drives a poll/complete loop (`await
//! worker.next()` → task → handler → `await task.complete()` / `fail()` / `retry()` /
//! `dead()`), so no call blocks the event loop: every method that touches the database
//! returns a Promise.
//!
//! Values cross as JSON text (options, statement parameters, rows, messages). Errors cross
//! typed: a failing call throws (or rejects with) a JavaScript `Error` whose `code` is the
//! core's `ErrorKind` name (`"claim_lost"`, `"cancelled"`, ...), set natively by
//! [`Typed`]; the TypeScript client maps `code` to its error classes.

mod batch;

pub mod logs;

use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use qb::Result as QbResult;
use queuebox_bridge::{conformance, database, json};
use queuebox_core as qb;
use tokio_util::sync::CancellationToken;

/// The outcome of a call as JavaScript sees it: the value, or a thrown / rejected `Error`
/// whose `code` property is the core's kind name (napi creates it with
/// `napi_create_error(code, message)`). Every fallible export returns one.
pub struct Typed<T>(QbResult<T>);

impl<T> From<QbResult<T>> for Typed<T> {
    fn from(r: QbResult<T>) -> Self {
        Typed(r)
    }
}

/// The `code` napi gives the JavaScript error: the core's stable kind name.
struct KindName(&'static str);

impl AsRef<str> for KindName {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl<T: ToNapiValue> ToNapiValue for Typed<T> {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        match val.0 {
            Ok(v) => T::to_napi_value(env, v),
            Err(e) => {
                let js =
                    JsError::from(napi::Error::new(KindName(e.kind().as_str()), e.to_string()))
                        .into_value(env);
                // Throwing (or rejecting with) an `Error` made from a JS value hands over
                // that very object, `code` included.
                Err(napi::Error::from(Unknown::from_raw_unchecked(env, js)))
            }
        }
    }
}

/// Runs one conformance vector case through the real core functions:
/// `evaluate(kind, JSON.stringify(input))` → JSON text of the output.
#[napi]
pub fn evaluate(kind: String, input_json: String) -> Typed<String> {
    json::parse("vector input", &input_json)
        .and_then(|input| conformance::evaluate(&kind, &input))
        .map(|v| v.to_string())
        .into()
}

/// Applies the embedded migrations; resolves to the names applied now.
#[napi]
pub async fn migrate(database_url: String) -> Typed<Vec<String>> {
    queuebox_bridge::migrate::migrate(database_url)
        .await
        .map(|report| report.applied)
        .into()
}

/// A small pool for enqueueing pull rows and for statements outside a handler.
#[napi]
pub struct Database {
    db: database::Database,
}

/// Connects a [`Database`] of at most `maxConnections` (default 4).
#[napi]
pub async fn connect_database(
    database_url: String,
    max_connections: Option<u32>,
) -> Typed<Database> {
    database::Database::connect(&database_url, max_connections)
        .await
        .map(|db| Database { db })
        .into()
}

#[napi]
impl Database {
    /// Runs one statement in its own transaction; resolves to the affected row count.
    #[napi]
    pub async fn execute(&self, sql: String, params_json: Option<String>) -> Typed<i64> {
        let run = async {
            self.db
                .execute(&sql, &json::params_from_text(params_json.as_deref())?)
                .await
        };
        run.await.map(|n| n as i64).into()
    }

    /// Runs one query in its own transaction; resolves to the rows as a JSON array text.
    #[napi]
    pub async fn query(&self, sql: String, params_json: Option<String>) -> Typed<String> {
        let run = async {
            self.db
                .query(&sql, &json::params_from_text(params_json.as_deref())?)
                .await
        };
        run.await.into()
    }

    /// Runs SQL text outside any transaction with the simple query protocol (several
    /// statements allowed, no parameters): `CREATE DATABASE`, `VACUUM`, set-up scripts.
    #[napi]
    pub async fn execute_script(&self, sql: String) -> Typed<i64> {
        self.db.execute_script(&sql).await.map(|n| n as i64).into()
    }

    /// Stores one pull row (`{source, idempotencyKey, payload, aggregateId?, eventType?,
    /// headers?, correlationId?}`); resolves to `{"id", "duplicate"}` as JSON text.
    #[napi]
    pub async fn enqueue(&self, message_json: String) -> Typed<String> {
        self.db.enqueue(&message_json).await.into()
    }

    /// Cancels the pending rows of `table` (`inbox` pull rows, or `outbox`) that
    /// `targetJson` names (`{id}`, `{source, key}`, `{source, aggregate}`, `{key, topic?}`);
    /// resolves to the core's counts `{"cancelled", "inFlight", "finished", "push"}` as JSON
    /// text. A target that names no row rejects with `INVALID_INPUT` naming the field.
    #[napi]
    pub async fn cancel(&self, table: String, target_json: String) -> Typed<String> {
        self.db.cancel(&table, &target_json).await.into()
    }

    #[napi]
    pub async fn close(&self) {
        self.db.close().await;
    }
}

/// A pull worker of the core. Claims and lease renewal run on the Rust runtime.
#[napi]
pub struct NativeWorker {
    worker: qb::Worker,
    /// The batch interface's state (`nextBatch`, `completeAll`, `nextCancelled`).
    handout: queuebox_bridge::handout::Handout,
}

/// Connects a worker: `options` is the JSON text of the client options (camelCase names);
/// the defaults and validation are the core's.
#[napi]
pub async fn connect_worker(database_url: String, options_json: String) -> Typed<NativeWorker> {
    let run = async {
        let opts = json::hand_out_options_from_json(&json::parse("options", &options_json)?)?;
        qb::Worker::connect(&database_url, opts).await
    };
    run.await
        .map(|worker| NativeWorker {
            worker,
            handout: queuebox_bridge::handout::Handout::new(),
        })
        .into()
}

/// Validates options without connecting; returns the effective options as JSON text.
#[napi]
pub fn resolve_options(options_json: String) -> Typed<String> {
    let opts =
        json::parse("options", &options_json).and_then(|v| json::hand_out_options_from_json(&v));
    opts.map(|o| json::hand_out_options_to_json(&o).to_string())
        .into()
}

#[napi]
impl NativeWorker {
    /// The next claimed task; `null` once shutdown has begun.
    #[napi]
    pub async fn next(&self) -> Typed<Option<NativeTask>> {
        let task = self.worker.next().await;
        task.map(|t| {
            t.map(|task| NativeTask {
                task,
                done: CancellationToken::new(),
            })
        })
        .into()
    }

    /// Graceful shutdown; resolves to the number of running tasks cancelled after the grace.
    #[napi]
    pub async fn shutdown(&self) -> u32 {
        self.worker.shutdown().await as u32
    }

    #[napi]
    pub fn is_stopping(&self) -> bool {
        self.worker.is_stopping()
    }

    #[napi]
    pub fn in_flight(&self) -> u32 {
        self.worker.in_flight() as u32
    }

    /// The worker's counters as JSON text.
    #[napi]
    pub fn stats_json(&self) -> String {
        json::stats_to_json(&self.worker.stats()).to_string()
    }

    /// The worker's metrics in the Prometheus text format 0.0.4 (kept and encoded by the
    /// core; the TypeScript `metrics()` passes it on).
    #[napi]
    pub fn metrics_text(&self) -> String {
        self.worker.metrics_text()
    }

    /// The effective options as JSON text, as `resolveOptions` shows them.
    #[napi]
    pub fn options_json(&self) -> String {
        json::hand_out_options_to_json(self.worker.options()).to_string()
    }
}

/// The outbox insert for the application's own transaction: `messagesJson` a JSON array of
/// messages, `backend` `postgres` (default) or `sqlserver`; JSON text `{"sql", "params",
/// "expect": "rows_affected", "ids"}`. A bad message throws `invalid_input` naming
/// `messages[i].field`.
#[napi]
pub fn publish_statement(
    messages_json: String,
    placeholder: String,
    backend: Option<String>,
) -> Typed<String> {
    queuebox_bridge::app_tx::publish_statement(backend.as_deref(), &messages_json, &placeholder)
        .into()
}

/// The enqueue of pull rows for the application's transaction: `messagesJson` is a JSON
/// array of `{"source", "payload", "idempotency_key", "aggregate_id", "event_type",
/// "correlation_id", "headers", "priority", "max_attempts", "delay_ms" | "scheduled_at"}`;
/// returns `{"sql", "params", "expect": "enqueue_rows"}`. Run it as a query: one row per
/// message, in order, with columns `n`, `id` and `duplicate`. A bad message throws
/// `invalid_input` naming `messages[i].field`.
#[napi]
pub fn enqueue_statement(
    messages_json: String,
    placeholder: String,
    backend: Option<String>,
) -> Typed<String> {
    queuebox_bridge::app_tx::enqueue_statement(backend.as_deref(), &messages_json, &placeholder)
        .into()
}

/// One claimed row. Business writes through `execute`/`query` run in the task's own
/// transaction and commit with `complete()`; every other finish rolls them back. On a
/// cancelled task every finish but `abandon()` abandons it and rejects with `cancelled`
/// (the core's rule).
#[napi]
pub struct NativeTask {
    task: qb::Task,
    /// Fired by any finish, so a pending `cancelled()` Promise settles.
    done: CancellationToken,
}

impl NativeTask {
    fn finished<T>(&self, r: QbResult<T>) -> Typed<T> {
        self.done.cancel();
        r.into()
    }
}

#[napi]
impl NativeTask {
    /// The message as JSON text (camelCase fields; never the claim token).
    #[napi]
    pub fn message_json(&self) -> String {
        json::message_to_text(self.task.message())
    }

    #[napi]
    pub async fn execute(&self, sql: String, params_json: Option<String>) -> Typed<i64> {
        let run = async {
            self.task
                .execute(&sql, &json::params_from_text(params_json.as_deref())?)
                .await
        };
        run.await.map(|n| n as i64).into()
    }

    #[napi]
    pub async fn query(&self, sql: String, params_json: Option<String>) -> Typed<String> {
        let run = async {
            self.task
                .query(&sql, &json::params_from_text(params_json.as_deref())?)
                .await
        };
        run.await.map(json::rows_to_text).into()
    }

    /// The fenced completion for the application's own transaction, as JSON text
    /// `{"sql", "params", "expect": "one_row_affected"}` in `placeholder` style (`dollar`,
    /// `question`, `percent`, `colon`, `at`). From here on the application owns the
    /// completion: no lease renewal, and `complete()` writes nothing.
    #[napi]
    pub fn completion_statement(&self, placeholder: String) -> Typed<String> {
        queuebox_bridge::app_tx::completion_statement(&self.task, &placeholder).into()
    }

    /// The application's completion affected no row: settles the task and throws the
    /// `claim_lost` error to raise inside the application's transaction.
    #[napi]
    pub fn claim_lost(&self) -> Typed<()> {
        let e = queuebox_bridge::app_tx::claim_lost(&self.task);
        self.finished(Err(e))
    }

    #[napi]
    pub async fn complete(&self) -> Typed<()> {
        let r = self.task.complete().await;
        self.finished(r)
    }

    /// Applies the retry policy; resolves to `"retry"` or `"dead"`.
    #[napi]
    pub async fn fail(&self, error: String) -> Typed<String> {
        let r = self
            .task
            .fail(&error)
            .await
            .map(|d| json::decision_name(d).to_string());
        self.finished(r)
    }

    #[napi]
    pub async fn retry(&self, delay_ms: u32, error: String) -> Typed<()> {
        let r = self
            .task
            .retry(Duration::from_millis(delay_ms as u64), &error)
            .await;
        self.finished(r)
    }

    #[napi]
    pub async fn dead(&self, reason: String) -> Typed<()> {
        let r = self.task.dead(&reason).await;
        self.finished(r)
    }

    #[napi]
    pub async fn release(&self) -> Typed<()> {
        let r = self.task.release().await;
        self.finished(r)
    }

    /// Gives the row up without writing (its lease expires); rolls business writes back.
    #[napi]
    pub async fn abandon(&self) {
        self.task.abandon().await;
        self.done.cancel();
    }

    #[napi]
    pub fn is_cancelled(&self) -> bool {
        self.task.cancelled().is_cancelled()
    }

    /// Resolves `true` when the lease is lost or shutdown's grace ran out, `false` once the
    /// task is finished first.
    #[napi]
    pub async fn cancelled(&self) -> bool {
        let cancel = self.task.cancelled().clone();
        tokio::select! {
            _ = cancel.cancelled() => true,
            _ = self.done.cancelled() => cancel.is_cancelled(),
        }
    }
}
