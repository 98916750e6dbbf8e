//! Python binding (pyo3) of the QueueBox core, imported as `queuebox_inbox._native`.
//! Everything here is glue: claims, lease renewal, retry policy and key rules run in
//! `queuebox-core` on a tokio runtime. Every method that touches the database returns an
//! asyncio awaitable (pyo3-async-runtimes), so no call holds the GIL while it waits; the
//! pure-Python package `queuebox_inbox` (clients/python) builds the asyncio and blocking
//! worker APIs on this poll/complete interface.
//!
//! Values cross as JSON text (options, parameters, rows, messages) and errors as
//! `NativeError("[kind] message")` (see `queuebox_core::binding::tagged_error`), which the
//! wrapper turns into typed exceptions.

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use queuebox_core as qb;
use qb::binding;
use qb::store::postgres::PgStore;
use qb::{Decision, Store};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

create_exception!(_native, NativeError, PyException, "An error of the QueueBox core, as \"[kind] message\".");

fn err(e: qb::Error) -> PyErr {
    NativeError::new_err(binding::tagged_error(&e))
}

fn parse(what: &str, text: &str) -> PyResult<Value> {
    serde_json::from_str(text).map_err(|e| err(qb::Error::InvalidInput(format!("{what} is not JSON: {e}"))))
}

fn params(text: Option<String>) -> PyResult<Vec<qb::SqlValue>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => binding::params_from_json(&parse("parameters", &t)?).map_err(err),
    }
}

fn rows_json(rows: Vec<qb::store::JsonRow>) -> String {
    Value::Array(rows.into_iter().map(Value::Object).collect()).to_string()
}

/// Runs one conformance vector case through the core: JSON text in, JSON text out.
#[pyfunction]
fn evaluate(kind: &str, input_json: &str) -> PyResult<String> {
    let input = parse("vector input", input_json)?;
    qb::conformance::evaluate(kind, &input).map(|v| v.to_string()).map_err(err)
}

/// Validates worker options (JSON text, camelCase names); returns the effective options.
#[pyfunction]
fn resolve_options(options_json: &str) -> PyResult<String> {
    let opts = binding::worker_options_from_json(&parse("options", options_json)?).map_err(err)?;
    Ok(binding::worker_options_to_json(&opts).to_string())
}

/// Applies the embedded PostgreSQL migrations; resolves to the names applied now.
#[pyfunction]
fn migrate(py: Python<'_>, database_url: String) -> PyResult<Bound<'_, PyAny>> {
    future_into_py(py, async move {
        // The migration future is not provably `Send` for every lifetime (sqlx executors),
        // so it runs to completion on a blocking thread of the runtime.
        let handle = tokio::runtime::Handle::current();
        let report = tokio::task::spawn_blocking(move || {
            handle.block_on(async move {
                let store = PgStore::connect(&database_url, 2).await?;
                let report = qb::migrate::postgres::run(&store).await;
                store.pool().close().await;
                report
            })
        })
        .await
        .map_err(|e| NativeError::new_err(format!("[database] migration thread failed: {e}")))?
        .map_err(err)?;
        Ok(report.applied.iter().map(|m| m.to_string()).collect::<Vec<String>>())
    })
}

/// A small pool for enqueueing pull rows and running statements outside a handler.
#[pyclass(frozen)]
struct Database {
    store: Arc<PgStore>,
}

#[pyfunction]
#[pyo3(signature = (database_url, max_connections=None))]
fn connect_database(py: Python<'_>, database_url: String, max_connections: Option<u32>) -> PyResult<Bound<'_, PyAny>> {
    future_into_py(py, async move {
        let store = PgStore::connect(&database_url, max_connections.unwrap_or(4)).await.map_err(err)?;
        Ok(Database { store: Arc::new(store) })
    })
}

#[pymethods]
impl Database {
    #[pyo3(signature = (sql, params_json=None))]
    fn execute<'py>(&self, py: Python<'py>, sql: String, params_json: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let store = self.store.clone();
        future_into_py(py, async move {
            let mut tx = store.begin().await.map_err(err)?;
            let n = tx.execute(&sql, &p).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(n)
        })
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn query<'py>(&self, py: Python<'py>, sql: String, params_json: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let store = self.store.clone();
        future_into_py(py, async move {
            let mut tx = store.begin().await.map_err(err)?;
            let rows = tx.query(&sql, &p).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(rows_json(rows))
        })
    }

    /// SQL text outside a transaction (simple query protocol, no parameters).
    fn execute_script<'py>(&self, py: Python<'py>, sql: String) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.store.pool().clone();
        future_into_py(py, async move {
            let r = sqlx::raw_sql(&sql).execute(&pool).await;
            r.map(|d| d.rows_affected()).map_err(|e| err(qb::Error::Database { operation: "script", message: e.to_string(), code: None }))
        })
    }

    /// Stores one pull row; resolves to `{"id", "duplicate"}` as JSON text.
    fn enqueue<'py>(&self, py: Python<'py>, message_json: String) -> PyResult<Bound<'py, PyAny>> {
        let msg = binding::new_pull_message_from_json(&parse("message", &message_json)?).map_err(err)?;
        let store = self.store.clone();
        future_into_py(py, async move {
            let out = store.insert_inbox(&msg).await.map_err(err)?;
            Ok(json!({"id": out.id().to_string(), "duplicate": out.is_duplicate()}).to_string())
        })
    }

    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store.clone();
        future_into_py(py, async move {
            store.pool().close().await;
            Ok(())
        })
    }
}

/// A pull worker of the core; claims and lease renewal run on the Rust runtime.
#[pyclass(frozen)]
struct NativeWorker {
    worker: qb::Worker,
}

#[pyfunction]
fn connect_worker(py: Python<'_>, database_url: String, options_json: String) -> PyResult<Bound<'_, PyAny>> {
    let opts = binding::worker_options_from_json(&parse("options", &options_json)?).map_err(err)?;
    future_into_py(py, async move {
        let worker = qb::Worker::connect(&database_url, opts).await.map_err(err)?;
        Ok(NativeWorker { worker })
    })
}

#[pymethods]
impl NativeWorker {
    /// The next claimed task; `None` once shutdown has begun.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let w = self.worker.clone();
        future_into_py(py, async move {
            let task = w.next().await.map_err(err)?;
            Ok(task.map(|task| NativeTask { task, done: CancellationToken::new() }))
        })
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
        binding::stats_to_json(&self.worker.stats()).to_string()
    }

    fn options_json(&self) -> String {
        binding::worker_options_to_json(self.worker.options()).to_string()
    }
}

/// One claimed row. Writes through `execute`/`query` run in the task's own transaction and
/// commit with `complete()`; every other finish rolls them back.
#[pyclass(frozen)]
struct NativeTask {
    task: qb::Task,
    /// Fired by any finish, so a pending `cancelled()` settles.
    done: CancellationToken,
}

impl NativeTask {
    fn finish<'py, T, F>(&self, py: Python<'py>, f: impl FnOnce(qb::Task) -> F + Send + 'static) -> PyResult<Bound<'py, PyAny>>
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
        binding::message_to_json(self.task.message()).to_string()
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn execute<'py>(&self, py: Python<'py>, sql: String, params_json: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let task = self.task.clone();
        future_into_py(py, async move { task.execute(&sql, &p).await.map_err(err) })
    }

    #[pyo3(signature = (sql, params_json=None))]
    fn query<'py>(&self, py: Python<'py>, sql: String, params_json: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let p = params(params_json)?;
        let task = self.task.clone();
        future_into_py(py, async move { task.query(&sql, &p).await.map(rows_json).map_err(err) })
    }

    fn complete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move { t.complete().await })
    }

    /// Applies the retry policy; resolves to "retry" or "dead".
    fn fail<'py>(&self, py: Python<'py>, error: String) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, |t| async move {
            t.fail(&error).await.map(|d| match d {
                Decision::Retry(_) => "retry",
                Decision::Dead => "dead",
            })
        })
    }

    fn retry<'py>(&self, py: Python<'py>, delay_ms: u64, error: String) -> PyResult<Bound<'py, PyAny>> {
        self.finish(py, move |t| async move { t.retry(Duration::from_millis(delay_ms), &error).await })
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
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_options, m)?)?;
    m.add_function(wrap_pyfunction!(migrate, m)?)?;
    m.add_function(wrap_pyfunction!(connect_database, m)?)?;
    m.add_function(wrap_pyfunction!(connect_worker, m)?)?;
    m.add_class::<Database>()?;
    m.add_class::<NativeWorker>()?;
    m.add_class::<NativeTask>()?;
    Ok(())
}
