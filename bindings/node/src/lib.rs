//! Node.js binding (napi-rs) of the QueueBox core. Everything here is glue: the pull worker,
//! its lease renewal, claims, retry policy and key rules run in `queuebox-core` on napi's
//! tokio runtime. JavaScript drives a poll/complete loop (`await worker.next()` → task →
//! handler → `await task.complete()` / `fail()` / `retry()` / `dead()`), so no call blocks
//! the event loop: every method that touches the database returns a Promise.
//!
//! Values cross as JSON text (options, statement parameters, rows, messages) and errors as
//! `"[kind] message"` (see `queuebox_core::binding::tagged_error`), which the TypeScript
//! client turns into typed errors.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use queuebox_core as qb;
use qb::binding;
use qb::store::postgres::PgStore;
use qb::{Decision, Store};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn err(e: qb::Error) -> napi::Error {
    napi::Error::from_reason(binding::tagged_error(&e))
}

fn parse(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| err(qb::Error::InvalidInput(format!("{what} is not JSON: {e}"))))
}

fn params(text: Option<String>) -> Result<Vec<qb::SqlValue>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => binding::params_from_json(&parse("parameters", &t)?).map_err(err),
    }
}

fn rows_json(rows: Vec<qb::store::JsonRow>) -> String {
    Value::Array(rows.into_iter().map(Value::Object).collect()).to_string()
}

/// Runs one conformance vector case through the real core functions:
/// `evaluate(kind, JSON.stringify(input))` → JSON text of the output.
#[napi]
pub fn evaluate(kind: String, input_json: String) -> Result<String> {
    let input = parse("vector input", &input_json)?;
    qb::conformance::evaluate(&kind, &input).map(|v| v.to_string()).map_err(err)
}

/// Applies the embedded PostgreSQL migrations; resolves to the names applied now.
#[napi]
pub async fn migrate(database_url: String) -> Result<Vec<String>> {
    // The migration future is not provably `Send` for every lifetime (sqlx executors), so
    // it runs to completion on a blocking thread of the runtime instead of being spawned.
    let handle = tokio::runtime::Handle::current();
    let run = tokio::task::spawn_blocking(move || {
        handle.block_on(async move {
            let store = PgStore::connect(&database_url, 2).await?;
            let report = qb::migrate::postgres::run(&store).await;
            store.pool().close().await;
            report
        })
    });
    let report = run.await.map_err(|e| napi::Error::from_reason(format!("[database] migration thread failed: {e}")))?.map_err(err)?;
    Ok(report.applied.iter().map(|m| m.to_string()).collect())
}

/// A small pool for enqueueing pull rows and for statements outside a handler.
#[napi]
pub struct Database {
    store: Arc<PgStore>,
}

/// Connects a [`Database`] of at most `maxConnections` (default 4).
#[napi]
pub async fn connect_database(database_url: String, max_connections: Option<u32>) -> Result<Database> {
    let store = PgStore::connect(&database_url, max_connections.unwrap_or(4)).await.map_err(err)?;
    Ok(Database { store: Arc::new(store) })
}

#[napi]
impl Database {
    /// Runs one statement in its own transaction; resolves to the affected row count.
    #[napi]
    pub async fn execute(&self, sql: String, params_json: Option<String>) -> Result<i64> {
        let p = params(params_json)?;
        let mut tx = self.store.begin().await.map_err(err)?;
        let n = tx.execute(&sql, &p).await.map_err(err)?;
        tx.commit().await.map_err(err)?;
        Ok(n as i64)
    }

    /// Runs one query in its own transaction; resolves to the rows as a JSON array text.
    #[napi]
    pub async fn query(&self, sql: String, params_json: Option<String>) -> Result<String> {
        let p = params(params_json)?;
        let mut tx = self.store.begin().await.map_err(err)?;
        let rows = tx.query(&sql, &p).await.map_err(err)?;
        tx.commit().await.map_err(err)?;
        Ok(rows_json(rows))
    }

    /// Runs SQL text outside any transaction with the simple query protocol (several
    /// statements allowed, no parameters): `CREATE DATABASE`, `VACUUM`, set-up scripts.
    #[napi]
    pub async fn execute_script(&self, sql: String) -> Result<i64> {
        let pool = self.store.pool().clone();
        let r = sqlx::raw_sql(&sql).execute(&pool).await;
        r.map(|d| d.rows_affected() as i64).map_err(|e| err(qb::Error::Database { operation: "script", message: e.to_string(), code: None }))
    }

    /// Stores one pull row (`{source, idempotencyKey, payload, aggregateId?, eventType?,
    /// headers?, correlationId?}`); resolves to `{"id", "duplicate"}` as JSON text.
    #[napi]
    pub async fn enqueue(&self, message_json: String) -> Result<String> {
        let v = parse("message", &message_json)?;
        let msg = binding::new_pull_message_from_json(&v).map_err(err)?;
        let out = self.store.insert_inbox(&msg).await.map_err(err)?;
        Ok(json!({"id": out.id().to_string(), "duplicate": out.is_duplicate()}).to_string())
    }

    #[napi]
    pub async fn close(&self) {
        self.store.pool().close().await;
    }
}

/// A pull worker of the core. Claims and lease renewal run on the Rust runtime.
#[napi]
pub struct NativeWorker {
    worker: qb::Worker,
}

/// Connects a worker: `options` is the JSON text of the client options (camelCase names);
/// the defaults and validation are the core's.
#[napi]
pub async fn connect_worker(database_url: String, options_json: String) -> Result<NativeWorker> {
    let opts = binding::worker_options_from_json(&parse("options", &options_json)?).map_err(err)?;
    let worker = qb::Worker::connect(&database_url, opts).await.map_err(err)?;
    Ok(NativeWorker { worker })
}

/// Validates options without connecting; returns the effective options as JSON text.
#[napi]
pub fn resolve_options(options_json: String) -> Result<String> {
    let opts = binding::worker_options_from_json(&parse("options", &options_json)?).map_err(err)?;
    Ok(binding::worker_options_to_json(&opts).to_string())
}

#[napi]
impl NativeWorker {
    /// The next claimed task; `null` once shutdown has begun.
    #[napi]
    pub async fn next(&self) -> Result<Option<NativeTask>> {
        let task = self.worker.next().await.map_err(err)?;
        Ok(task.map(|task| NativeTask { task, done: CancellationToken::new() }))
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
        binding::stats_to_json(&self.worker.stats()).to_string()
    }

    /// The effective options as JSON text.
    #[napi]
    pub fn options_json(&self) -> String {
        binding::worker_options_to_json(self.worker.options()).to_string()
    }
}

/// One claimed row. Business writes through `execute`/`query` run in the task's own
/// transaction and commit with `complete()`; every other finish rolls them back.
#[napi]
pub struct NativeTask {
    task: qb::Task,
    /// Fired by any finish, so a pending `cancelled()` Promise settles.
    done: CancellationToken,
}

impl NativeTask {
    fn finished<T>(&self, r: qb::Result<T>) -> Result<T> {
        self.done.cancel();
        r.map_err(err)
    }
}

#[napi]
impl NativeTask {
    /// The message as JSON text (camelCase fields; never the claim token).
    #[napi]
    pub fn message_json(&self) -> String {
        binding::message_to_json(self.task.message()).to_string()
    }

    #[napi]
    pub async fn execute(&self, sql: String, params_json: Option<String>) -> Result<i64> {
        let p = params(params_json)?;
        self.task.execute(&sql, &p).await.map(|n| n as i64).map_err(err)
    }

    #[napi]
    pub async fn query(&self, sql: String, params_json: Option<String>) -> Result<String> {
        let p = params(params_json)?;
        self.task.query(&sql, &p).await.map(rows_json).map_err(err)
    }

    #[napi]
    pub async fn complete(&self) -> Result<()> {
        let r = self.task.complete().await;
        self.finished(r)
    }

    /// Applies the retry policy; resolves to `"retry"` or `"dead"`.
    #[napi]
    pub async fn fail(&self, error: String) -> Result<String> {
        let r = self.task.fail(&error).await.map(|d| match d {
            Decision::Retry(_) => "retry".to_string(),
            Decision::Dead => "dead".to_string(),
        });
        self.finished(r)
    }

    #[napi]
    pub async fn retry(&self, delay_ms: u32, error: String) -> Result<()> {
        let r = self.task.retry(Duration::from_millis(delay_ms as u64), &error).await;
        self.finished(r)
    }

    #[napi]
    pub async fn dead(&self, reason: String) -> Result<()> {
        let r = self.task.dead(&reason).await;
        self.finished(r)
    }

    #[napi]
    pub async fn release(&self) -> Result<()> {
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
