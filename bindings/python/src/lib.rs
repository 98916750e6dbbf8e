//! Python binding (pyo3) of the QueueBox core, imported as `queuebox_inbox._native`.
//! Everything here is glue: claims, lease renewal, retry policy and key rules run in
//! `queuebox-core` on a tokio runtime, and the JSON glue, migrations and the enqueue pool are
//! `queuebox-bridge`'s, shared with the C and Node bindings. Every method that touches the
//! database returns an asyncio awaitable (pyo3-async-runtimes), so no call holds the GIL
//! while it waits, and the calls a blocking program makes (migrations, the `Database`) have
//! a `*_blocking` twin that waits on the calling thread without the GIL. Both run on the
//! runtime of [`rt`], which the package stops at interpreter exit. The pure-Python package `queuebox_inbox` (clients/python) builds the
//! asyncio and blocking worker APIs on this poll/complete interface.
//!
//! Values cross as JSON text (options, parameters, rows, messages). Errors cross typed: one
//! exception class per core `ErrorKind`, all subclasses of `QueueBoxError`, each with the
//! kind's name as its `kind` class attribute; `queuebox_inbox` re-exports them.

mod logs;
mod rt;

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use qb::ErrorKind;
use queuebox_bridge::handout::{self, Handout};
use queuebox_bridge::{conformance, database, json};
use queuebox_core as qb;
use rt::{block_on, future_into_py};
use tokio_util::sync::CancellationToken;

create_exception!(
    queuebox_inbox,
    QueueBoxError,
    PyException,
    "An error of the QueueBox core; `kind` names what a caller can act on."
);
create_exception!(
    queuebox_inbox,
    ClaimLost,
    QueueBoxError,
    "A fenced write matched no row: the lease expired or another worker owns the row."
);
create_exception!(
    queuebox_inbox,
    ConnectError,
    QueueBoxError,
    "The database could not be reached (refused, timed out, TLS, or unavailable mid-call)."
);
create_exception!(
    queuebox_inbox,
    SchemaMissing,
    QueueBoxError,
    "A QueueBox table is missing: run the migrations."
);
create_exception!(
    queuebox_inbox,
    MigrationError,
    QueueBoxError,
    "The migration history disagrees with this build."
);
create_exception!(
    queuebox_inbox,
    DatabaseError,
    QueueBoxError,
    "A statement failed."
);
create_exception!(
    queuebox_inbox,
    ConfigError,
    QueueBoxError,
    "An option is invalid; the message names it."
);
create_exception!(
    queuebox_inbox,
    InvalidInput,
    QueueBoxError,
    "A value given by the caller is invalid."
);
create_exception!(
    queuebox_inbox,
    AlreadyFinished,
    QueueBoxError,
    "The task was already completed, retried, dead-lettered, released or abandoned."
);
create_exception!(
    queuebox_inbox,
    Cancelled,
    QueueBoxError,
    "The task was cancelled (lease lost or shutdown grace over); it may only be abandoned."
);

/// The exception class of each kind of the core's table; the match is exhaustive, so a new
/// kind does not compile until it has a class here.
fn class_of(py: Python<'_>, kind: ErrorKind) -> Bound<'_, pyo3::types::PyType> {
    match kind {
        ErrorKind::ClaimLost => py.get_type::<ClaimLost>(),
        ErrorKind::Connect => py.get_type::<ConnectError>(),
        ErrorKind::SchemaMissing => py.get_type::<SchemaMissing>(),
        ErrorKind::Migration => py.get_type::<MigrationError>(),
        ErrorKind::Database => py.get_type::<DatabaseError>(),
        ErrorKind::Config => py.get_type::<ConfigError>(),
        ErrorKind::InvalidInput => py.get_type::<InvalidInput>(),
        ErrorKind::AlreadyFinished => py.get_type::<AlreadyFinished>(),
        ErrorKind::Cancelled => py.get_type::<Cancelled>(),
    }
}

fn err(e: qb::Error) -> PyErr {
    let message = e.to_string();
    match e.kind() {
        ErrorKind::ClaimLost => ClaimLost::new_err(message),
        ErrorKind::Connect => ConnectError::new_err(message),
        ErrorKind::SchemaMissing => SchemaMissing::new_err(message),
        ErrorKind::Migration => MigrationError::new_err(message),
        ErrorKind::Database => DatabaseError::new_err(message),
        ErrorKind::Config => ConfigError::new_err(message),
        ErrorKind::InvalidInput => InvalidInput::new_err(message),
        ErrorKind::AlreadyFinished => AlreadyFinished::new_err(message),
        ErrorKind::Cancelled => Cancelled::new_err(message),
    }
}

fn params(text: Option<String>) -> PyResult<Vec<qb::SqlValue>> {
    json::params_from_text(text.as_deref()).map_err(err)
}

/// Runs one conformance vector case through the core: JSON text in, JSON text out.
#[pyfunction]
fn evaluate(kind: &str, input_json: &str) -> PyResult<String> {
    let out = json::parse("vector input", input_json)
        .and_then(|input| conformance::evaluate(kind, &input));
    out.map(|v| v.to_string()).map_err(err)
}

/// The outbox insert for the application's own transaction: `messages_json` a JSON array
/// of messages, `backend` "postgres" (default) or "sqlserver"; JSON text `{"sql",
/// "params", "expect": "rows_affected", "ids"}`. A bad message raises InvalidInput naming
/// `messages[i].field`.
#[pyfunction]
#[pyo3(signature = (messages_json, placeholder, backend=None))]
fn publish_statement(
    messages_json: &str,
    placeholder: &str,
    backend: Option<&str>,
) -> PyResult<String> {
    queuebox_bridge::app_tx::publish_statement(backend, messages_json, placeholder).map_err(err)
}

/// The enqueue of pull rows for the application's transaction: `messages_json` is a JSON
/// array of `{"source", "payload", "idempotency_key", "aggregate_id", "event_type",
/// "correlation_id", "headers", "priority", "max_attempts", "delay_ms" | "scheduled_at"}`;
/// returns `{"sql", "params", "expect": "enqueue_rows"}`. Run it as a query: one row per
/// message, in order, with columns `n`, `id` and `duplicate`. A bad message raises
/// `InvalidInput` naming `messages[i].field`.
#[pyfunction]
#[pyo3(signature = (messages_json, placeholder, backend=None))]
fn enqueue_statement(
    messages_json: &str,
    placeholder: &str,
    backend: Option<&str>,
) -> PyResult<String> {
    queuebox_bridge::app_tx::enqueue_statement(backend, messages_json, placeholder).map_err(err)
}

/// Validates worker options (JSON text, camelCase names); returns the effective options.
#[pyfunction]
fn resolve_options(options_json: &str) -> PyResult<String> {
    let opts = json::parse("options", options_json)
        .and_then(|v| json::hand_out_options_from_json(&v))
        .map_err(err)?;
    Ok(json::hand_out_options_to_json(&opts).to_string())
}

/// What `migrate` and `migrate_blocking` wait for: the names of the migrations applied now.
async fn migrate_applied(database_url: String) -> PyResult<Vec<String>> {
    queuebox_bridge::migrate::migrate(database_url)
        .await
        .map(|r| r.applied)
        .map_err(err)
}

/// Applies the embedded migrations; resolves to the names applied now.
#[pyfunction]
fn migrate(py: Python<'_>, database_url: String) -> PyResult<Bound<'_, PyAny>> {
    future_into_py(py, migrate_applied(database_url))
}

/// `migrate`, waiting on the calling thread (without the GIL) instead of in asyncio.
#[pyfunction]
fn migrate_blocking(py: Python<'_>, database_url: String) -> PyResult<Vec<String>> {
    block_on(py, migrate_applied(database_url))
}

/// A small pool for enqueueing pull rows, cancelling pending rows and running statements
/// outside a handler.
#[pyclass(frozen)]
struct Database {
    db: database::Database,
}

#[pyfunction]
#[pyo3(signature = (database_url, max_connections=None))]
fn connect_database(
    py: Python<'_>,
    database_url: String,
    max_connections: Option<u32>,
) -> PyResult<Bound<'_, PyAny>> {
    future_into_py(py, Database::connect(database_url, max_connections))
}

/// `connect_database`, waiting on the calling thread (without the GIL).
#[pyfunction]
#[pyo3(signature = (database_url, max_connections=None))]
fn connect_database_blocking(
    py: Python<'_>,
    database_url: String,
    max_connections: Option<u32>,
) -> PyResult<Database> {
    block_on(py, Database::connect(database_url, max_connections))
}

impl Database {
    /// What `connect_database` and `connect_database_blocking` wait for.
    async fn connect(database_url: String, max_connections: Option<u32>) -> PyResult<Database> {
        let db = database::Database::connect(&database_url, max_connections)
            .await
            .map_err(err)?;
        Ok(Database { db })
    }

    /// What `cancel` and `cancel_blocking` wait for.
    fn cancel_rows(
        &self,
        table: String,
        target_json: String,
    ) -> impl std::future::Future<Output = PyResult<String>> + Send + 'static {
        let db = self.db.clone();
        async move { db.cancel(&table, &target_json).await.map_err(err) }
    }
}

#[pymethods]
impl Database {
    /// `execute`, `query`, `execute_script`, `enqueue` and `close` for a blocking caller:
    /// `method` names which; waits on the calling thread without the GIL and returns what
    /// the awaitable would resolve to (`int`, rows JSON text, `int`, JSON text, `None`).
    #[pyo3(signature = (method, text, params_json=None))]
    fn call_blocking<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        text: String,
        params_json: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let db = self.db.clone();
        match method {
            "execute" => {
                let p = params(params_json)?;
                let n = block_on(py, async move { db.execute(&text, &p).await.map_err(err) })?;
                n.into_bound_py_any(py)
            }
            "query" => {
                let p = params(params_json)?;
                let rows = block_on(py, async move { db.query(&text, &p).await.map_err(err) })?;
                rows.into_bound_py_any(py)
            }
            "execute_script" => {
                let n = block_on(
                    py,
                    async move { db.execute_script(&text).await.map_err(err) },
                )?;
                n.into_bound_py_any(py)
            }
            "enqueue" => {
                let r = block_on(py, async move { db.enqueue(&text).await.map_err(err) })?;
                r.into_bound_py_any(py)
            }
            "close" => {
                block_on(py, async move {
                    db.close().await;
                    Ok(())
                })?;
                Ok(py.None().into_bound(py))
            }
            other => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "no blocking Database method {other:?}"
            ))),
        }
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params_json: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (p, db) = (params(params_json)?, self.db.clone());
        future_into_py(py, async move { db.execute(&sql, &p).await.map_err(err) })
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params_json: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (p, db) = (params(params_json)?, self.db.clone());
        future_into_py(py, async move { db.query(&sql, &p).await.map_err(err) })
    }

    /// SQL text outside a transaction (simple query protocol, no parameters).
    fn execute_script<'py>(&self, py: Python<'py>, sql: String) -> PyResult<Bound<'py, PyAny>> {
        let db = self.db.clone();
        future_into_py(
            py,
            async move { db.execute_script(&sql).await.map_err(err) },
        )
    }

    /// Stores one pull row; resolves to `{"id", "duplicate"}` as JSON text.
    fn enqueue<'py>(&self, py: Python<'py>, message_json: String) -> PyResult<Bound<'py, PyAny>> {
        let db = self.db.clone();
        future_into_py(
            py,
            async move { db.enqueue(&message_json).await.map_err(err) },
        )
    }

    /// Cancels the pending rows of `table` (`"inbox"` pull rows, or `"outbox"`) that
    /// `target_json` names (`{id}`, `{source, key}`, `{source, aggregate}`, `{key, topic?}`);
    /// resolves to the core's counts `{"cancelled", "inFlight", "finished", "push"}` as JSON
    /// text. A target that names no row raises `InvalidInput` naming the field.
    fn cancel<'py>(
        &self,
        py: Python<'py>,
        table: String,
        target_json: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        future_into_py(py, self.cancel_rows(table, target_json))
    }

    /// `cancel`, waiting on the calling thread (without the GIL).
    fn cancel_blocking(
        &self,
        py: Python<'_>,
        table: String,
        target_json: String,
    ) -> PyResult<String> {
        block_on(py, self.cancel_rows(table, target_json))
    }

    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let db = self.db.clone();
        future_into_py(py, async move {
            db.close().await;
            Ok(())
        })
    }
}

/// A pull worker of the core; claims and lease renewal run on the Rust runtime.
#[pyclass(frozen)]
struct NativeWorker {
    worker: qb::Worker,
    /// The batch interface's state (`next_batch`, `next_cancelled`).
    handout: Arc<Handout>,
}

#[pyfunction]
fn connect_worker(
    py: Python<'_>,
    database_url: String,
    options_json: String,
) -> PyResult<Bound<'_, PyAny>> {
    let opts = json::parse("options", &options_json)
        .and_then(|v| json::hand_out_options_from_json(&v))
        .map_err(err)?;
    future_into_py(py, async move {
        let worker = qb::Worker::connect(&database_url, opts)
            .await
            .map_err(err)?;
        Ok(NativeWorker {
            worker,
            handout: Arc::new(Handout::new()),
        })
    })
}

#[pymethods]
impl NativeWorker {
    /// The next claimed task; `None` once shutdown has begun.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let w = self.worker.clone();
        future_into_py(py, async move {
            let task = w.next().await.map_err(err)?;
            Ok(task.map(|task| NativeTask {
                task,
                done: CancellationToken::new(),
            }))
        })
    }

    /// Up to `max` claimed tasks in one call, for a loop that crosses once per batch: waits
    /// for the first like `next()`, then takes whatever is already claimed while concurrency
    /// slots are free. Resolves to `(tasks, messages_json, first_seq)`: `messages_json` is
    /// one JSON array text of the messages in order, `tasks[i]` has the sequence number
    /// `first_seq + i` (mod 2^32) that `next_cancelled()` reports; `None` once shutdown has
    /// begun.
    fn next_batch<'py>(&self, py: Python<'py>, max: usize) -> PyResult<Bound<'py, PyAny>> {
        let (w, handout) = (self.worker.clone(), self.handout.clone());
        future_into_py(py, async move {
            let tasks = w.next_batch(max).await.map_err(err)?;
            if tasks.is_empty() {
                return Ok(None);
            }
            let messages_json = json::messages_to_text(tasks.iter().map(|t| t.message()));
            let (first_seq, handed) = handout.hand_out(tasks);
            let tasks: Vec<NativeTask> = handed
                .into_iter()
                .map(|h| NativeTask {
                    task: h.task,
                    done: h.done,
                })
                .collect();
            Ok(Some((tasks, messages_json, first_seq)))
        })
    }

    /// Completes `tasks` together (one batched statement for the plain ones; a task with its
    /// own transaction commits it), each under its own fence. Resolves to one entry per
    /// task, in order: `None` when it completed, else `(kind, message)` for that task only.
    fn complete_all<'py>(
        &self,
        py: Python<'py>,
        tasks: Vec<PyRef<'py, NativeTask>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let owned: Vec<_> = tasks
            .iter()
            .map(|t| (t.task.clone(), t.done.clone()))
            .collect();
        future_into_py(py, async move {
            let results = handout::complete_all(owned).await;
            Ok(results
                .into_iter()
                .map(|r| r.err().map(|e| (e.kind().as_str(), e.to_string())))
                .collect::<Vec<_>>())
        })
    }

    /// How long `rows` handlers ran in all (`seconds`), which sizes what the worker claims
    /// ahead of them: the loop runs them out of the core's sight. A negative or non-finite
    /// time raises `InvalidInput` naming `handlerSeconds`.
    fn handlers_took(&self, rows: usize, seconds: f64) -> PyResult<()> {
        handout::handlers_took(&self.worker, rows, seconds).map_err(err)
    }

    /// The sequence numbers of handed-out tasks cancelled since the last call (lease lost or
    /// shutdown's grace over), waiting until there is one; empty after `close_cancelled()`.
    fn next_cancelled<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handout = self.handout.clone();
        future_into_py(py, async move { Ok(handout.next_cancelled().await) })
    }

    /// Ends `next_cancelled()`: its pending and later calls resolve empty.
    fn close_cancelled(&self) {
        self.handout.close();
    }

    /// Graceful shutdown; resolves to the number of running tasks cancelled after the grace.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let w = self.worker.clone();
        future_into_py(py, async move { Ok(w.shutdown().await) })
    }

    fn is_stopping(&self) -> bool {
        self.worker.is_stopping()
    }

    fn in_flight(&self) -> usize {
        self.worker.in_flight()
    }

    fn stats_json(&self) -> String {
        json::stats_to_json(&self.worker.stats()).to_string()
    }

    /// The worker's metrics in the Prometheus text format 0.0.4 (kept and encoded by the
    /// core; `Worker.metrics()` passes it on).
    fn metrics_text(&self) -> String {
        self.worker.metrics_text()
    }

    /// The effective options as JSON text, as `resolve_options` shows them.
    fn options_json(&self) -> String {
        json::hand_out_options_to_json(self.worker.options()).to_string()
    }
}

/// One claimed row. Writes through `execute`/`query` run in the task's own transaction and
/// commit with `complete()`; every other finish rolls them back. On a cancelled task every
/// finish but `abandon()` abandons it and raises `Cancelled` (the core's rule).
#[pyclass(frozen)]
struct NativeTask {
    task: qb::Task,
    /// Fired by any finish, so a pending `cancelled()` settles.
    done: CancellationToken,
}

impl NativeTask {
    fn finish<'py, T, F>(
        &self,
        py: Python<'py>,
        f: impl FnOnce(qb::Task) -> F + Send + 'static,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        F: std::future::Future<Output = qb::Result<T>> + Send + 'static,
        T: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        let (task, done) = (self.task.clone(), self.done.clone());
        future_into_py(py, async move {
            let r = f(task).await;
            done.cancel();
            r.map_err(err)
        })
    }
}

#[pymethods]
impl NativeTask {
    fn message_json(&self) -> String {
        json::message_to_text(self.task.message())
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params_json: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let task = self.task.clone();
        future_into_py(py, async move { task.execute(&sql, &p).await.map_err(err) })
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params_json: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let task = self.task.clone();
        future_into_py(py, async move {
            task.query(&sql, &p)
                .await
                .map(json::rows_to_text)
                .map_err(err)
        })
    }

    /// The fenced completion for the application's own transaction, as JSON text
    /// `{"sql", "params", "expect": "one_row_affected"}` in `placeholder` style ("dollar",
    /// "question", "percent", "colon", "at"). From here on the application owns the
    /// completion: no lease renewal, and `complete()` writes nothing.
    fn completion_statement(&self, placeholder: &str) -> PyResult<String> {
        queuebox_bridge::app_tx::completion_statement(&self.task, placeholder).map_err(err)
    }

    /// The application's completion affected no row: settles the task and raises the
    /// ClaimLost error to raise inside the application's transaction.
    fn claim_lost(&self) -> PyResult<()> {
        let e = queuebox_bridge::app_tx::claim_lost(&self.task);
        self.done.cancel();
        Err(err(e))
    }

    fn complete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move { t.complete().await })
    }

    /// Applies the retry policy; resolves to "retry" or "dead".
    fn fail<'py>(&self, py: Python<'py>, error: String) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move {
            t.fail(&error).await.map(json::decision_name)
        })
    }

    fn retry<'py>(
        &self,
        py: Python<'py>,
        delay_ms: u64,
        error: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, move |t| async move {
            t.retry(Duration::from_millis(delay_ms), &error).await
        })
    }

    fn dead<'py>(&self, py: Python<'py>, reason: String) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move { t.dead(&reason).await })
    }

    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move { t.release().await })
    }

    /// Gives the row up without writing (its lease expires); rolls business writes back.
    fn abandon<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move {
            t.abandon().await;
            Ok(())
        })
    }

    fn is_cancelled(&self) -> bool {
        self.task.cancelled().is_cancelled()
    }

    /// Resolves True when the lease is lost or shutdown's grace ran out, False once the task
    /// is finished first.
    fn cancelled<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (cancel, done) = (self.task.cancelled().clone(), self.done.clone());
        future_into_py(py, async move {
            Ok(tokio::select! {
                _ = cancel.cancelled() => true,
                _ = done.cancelled() => cancel.is_cancelled(),
            })
        })
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("QueueBoxError", py.get_type::<QueueBoxError>())?;
    for kind in ErrorKind::ALL {
        let class = class_of(py, kind);
        class.setattr("kind", kind.as_str())?;
        m.add(class.name()?, class)?;
    }
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_options, m)?)?;
    m.add_function(wrap_pyfunction!(publish_statement, m)?)?;
    m.add_function(wrap_pyfunction!(enqueue_statement, m)?)?;
    m.add_function(wrap_pyfunction!(migrate, m)?)?;
    m.add_function(wrap_pyfunction!(migrate_blocking, m)?)?;
    m.add_function(wrap_pyfunction!(rt::shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(connect_database, m)?)?;
    m.add_function(wrap_pyfunction!(connect_database_blocking, m)?)?;
    m.add_function(wrap_pyfunction!(connect_worker, m)?)?;
    m.add_function(wrap_pyfunction!(logs::set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(logs::next_log_records, m)?)?;
    m.add_function(wrap_pyfunction!(logs::dropped_log_records, m)?)?;
    m.add_class::<Database>()?;
    m.add_class::<NativeWorker>()?;
    m.add_class::<NativeTask>()?;
    Ok(())
}
