//! `qb_worker`: a pull worker for one source, and its options as JSON.

use std::ffi::{c_char, c_void};
use std::ptr;

use queuebox_core::{Worker, WorkerOptions};
use serde_json::Value;
use tokio::runtime::Handle;

use crate::boundary::{
    block, clear_out, guard, handle_ref, into_c_string, out_arg, release, spawn_reply, str_arg,
    write_opt_out, write_out, Handover, Outcome, Reply,
};
use crate::callbacks::{spawn_count, QbCountCallback};
use crate::error::{Failure, QbError, QbStatus};
use crate::runtime::{runtime_and_url, QbRuntime};
use crate::task::QbTask;

/// A pull worker. Thread-safe: any thread may call any function on it at once.
pub struct QbWorker {
    pub(crate) worker: Worker,
    pub(crate) handle: Handle,
}

/// Counters of one worker (`qb_worker_stats`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct QbStats {
    pub claimed: u64,
    pub completed: u64,
    pub retried: u64,
    pub dead: u64,
    pub released: u64,
    pub claims_lost: u64,
    pub claim_errors: u64,
    /// Tasks handed out and not yet finished.
    pub in_flight: u64,
}

/// Fires once with the new worker (owned by the receiver) or an error.
pub type QbWorkerCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        worker: *mut QbWorker,
        error: *mut QbError,
    ),
>;

/// Fires once with the next task and its message as JSON (both owned by the receiver), or
/// with `QB_OK` and `task == NULL` when the worker is stopping, or with an error.
pub type QbTaskCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        task: *mut QbTask,
        message_json: *mut c_char,
        error: *mut QbError,
    ),
>;

/// Options JSON → `WorkerOptions` through the glue the bindings share
/// (`queuebox_bridge::json::worker_options_from_json`: defaults for missing keys, an
/// error naming a wrong or unknown key, then `WorkerOptions::validate`).
pub(crate) fn parse_options(json: &str) -> Outcome<WorkerOptions> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Failure::config("options", format!("is not valid JSON: {e}")))?;
    Ok(queuebox_bridge::json::worker_options_from_json(&value)?)
}

async fn connect(handle: Handle, url: String, opts: WorkerOptions) -> Outcome<Box<QbWorker>> {
    let worker = Worker::connect(&url, opts).await?;
    Ok(Box::new(QbWorker { worker, handle }))
}

/// Validates `options_json` (see proto-docs/ffi.md for the keys) and connects a worker to
/// `database_url`. Returns at once; `callback` fires on a runtime thread. Option errors
/// are reported synchronously through the return value and `out_error`.
///
/// # Safety
/// `runtime` is a live runtime; the strings are NUL-terminated and live for the call;
/// `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_new(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    options_json: *const c_char,
    callback: QbWorkerCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let (handle, url) = runtime_and_url(runtime, database_url)?;
        let opts = parse_options(str_arg(options_json, "options_json")?)?;
        spawn_reply(
            &handle.clone(),
            connect(handle, url, opts),
            Reply::new(callback, user_data),
            |w| w.map_or(ptr::null_mut(), Box::into_raw),
            |cb, ud, st, w, err| cb(ud, st, w, err),
        );
        Ok(())
    })
}

/// A new worker for a callback; freed when nobody takes it.
impl Handover for *mut QbWorker {
    unsafe fn unclaimed(self) {
        qb_worker_free(self)
    }
}

/// Blocking variant of `qb_worker_new`: returns when connected (or failed).
///
/// # Safety
/// As `qb_worker_new`; `out_worker` points at writable storage. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_new_blocking(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    options_json: *const c_char,
    out_worker: *mut *mut QbWorker,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_worker);
    guard(out_error, || {
        let (handle, url) = runtime_and_url(runtime, database_url)?;
        let opts = parse_options(str_arg(options_json, "options_json")?)?;
        let out = out_arg(out_worker, "out_worker")?;
        let w = block(&handle, connect(handle.clone(), url, opts))?;
        out.put(Box::into_raw(w));
        Ok(())
    })
}

/// Releases the caller's worker handle. Tasks still out keep the worker alive until they
/// are freed. Call `qb_worker_shutdown` first for a graceful stop; freeing a worker that
/// was not shut down stops its claims and renewals (running rows are redelivered after
/// their lease). NULL is ignored. Does not block.
///
/// # Safety
/// `worker` is NULL or a worker not yet freed, with no call on it in progress.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_free(worker: *mut QbWorker) {
    release(worker, |worker| {
        let w = Box::from_raw(worker);
        let _enter = w.handle.enter();
        drop(w.worker);
    });
}

async fn next(w: Worker, handle: Handle) -> Outcome<Option<(Box<QbTask>, String)>> {
    match w.next().await? {
        None => Ok(None),
        Some(task) => {
            let json = queuebox_bridge::json::message_to_text(task.message());
            Ok(Some((QbTask::boxed(task, handle), json)))
        }
    }
}

/// A task and its message JSON for a callback; both freed (the task abandoned) when nobody
/// takes them.
impl Handover for (*mut QbTask, *mut c_char) {
    unsafe fn unclaimed(self) {
        crate::task::qb_task_free(self.0);
        crate::boundary::qb_string_free(self.1);
    }
}

/// Waits for the next claimed row. Returns at once; `callback` fires with a task (or with
/// `task == NULL` once the worker is stopping). At most `min(concurrency, batchSize)`
/// tasks are out at once: with that many unfinished, the callback waits for one to finish.
///
/// # Safety
/// `worker` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next(
    worker: *const QbWorker,
    callback: QbTaskCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        spawn_reply(
            &w.handle,
            next(w.worker.clone(), w.handle.clone()),
            Reply::new(callback, user_data),
            |r| match r.flatten() {
                Some((t, j)) => (Box::into_raw(t), into_c_string(j)),
                None => (ptr::null_mut(), ptr::null_mut()),
            },
            |cb, ud, st, (task, json), err| cb(ud, st, task, json, err),
        );
        Ok(())
    })
}

/// Blocking variant of `qb_worker_next`. On `QB_OK`, `*out_task` is the task, or NULL when
/// the worker is stopping. `out_message_json` may be NULL when the caller does not want
/// the message now (`qb_task_message` gives it later).
///
/// # Safety
/// `worker` is live; `out_task` is writable; `out_message_json` is NULL or writable. Not
/// on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next_blocking(
    worker: *const QbWorker,
    out_task: *mut *mut QbTask,
    out_message_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_task);
    clear_out(out_message_json);
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let out = out_arg(out_task, "out_task")?;
        if let Some((task, json)) = block(&w.handle, next(w.worker.clone(), w.handle.clone()))? {
            out.put(Box::into_raw(task));
            write_opt_out(out_message_json, || into_c_string(json));
        }
        Ok(())
    })
}

/// Graceful shutdown: stop claiming (pending `next` calls return "stopped"), release rows
/// claimed but never handed out, wait up to `shutdownGraceMs` for running tasks, then
/// cancel the rest (they are abandoned; their rows return after the lease). Returns at
/// once; `callback` fires with the number of tasks cancelled.
///
/// # Safety
/// `worker` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_shutdown(
    worker: *const QbWorker,
    callback: QbCountCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let worker = w.worker.clone();
        let fut = async move { Ok(worker.shutdown().await as u64) };
        spawn_count(&w.handle, fut, callback, user_data);
        Ok(())
    })
}

/// Blocking variant of `qb_worker_shutdown`; `out_abandoned` (may be NULL) receives the
/// number of tasks cancelled after the grace.
///
/// # Safety
/// `worker` is live; `out_abandoned` is NULL or writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_shutdown_blocking(
    worker: *const QbWorker,
    out_abandoned: *mut u64,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let worker = w.worker.clone();
        let n = block(&w.handle, async move { Ok(worker.shutdown().await as u64) })?;
        write_opt_out(out_abandoned, || n);
        Ok(())
    })
}

/// How long `rows` handlers ran in all (`seconds`), for a worker created with the `handOut`
/// option: its wrapper queues handed-out batches and runs the handlers itself, out of the
/// core's sight, and this sizes what the worker claims ahead of them (about `concurrency`
/// rows for slow handlers, the whole batch for fast ones). Ignored by other workers and for
/// `rows == 0`; a negative or non-finite `seconds` is `QB_ERR_INVALID_INPUT`. Does not block.
///
/// # Safety
/// `worker` is live.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_handlers_took(
    worker: *const QbWorker,
    rows: u64,
    seconds: f64,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        Ok(queuebox_bridge::handout::handlers_took(
            &w.worker, rows, seconds,
        )?)
    })
}

/// Copies the worker's counters into `*out_stats`. Does not block.
///
/// # Safety
/// `worker` is live; `out_stats` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_stats(
    worker: *const QbWorker,
    out_stats: *mut QbStats,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let s = w.worker.stats();
        let stats = QbStats {
            claimed: s.claimed,
            completed: s.completed,
            retried: s.retried,
            dead: s.dead,
            released: s.released,
            claims_lost: s.claims_lost,
            claim_errors: s.claim_errors,
            in_flight: w.worker.in_flight() as u64,
        };
        write_out(out_stats, stats, "out_stats")
    })
}

/// The worker's metrics (claimed, completed, retried, dead, released, claims lost, claim
/// errors, lease renewals; claim and handler duration histograms; each labelled by
/// `source`) in the Prometheus text format 0.0.4 (`text/plain; version=0.0.4;
/// charset=utf-8`), for the application's `/metrics`. Free it with `qb_string_free`. Does
/// not block.
///
/// # Safety
/// `worker` is live; `out_text` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_metrics_text(
    worker: *const QbWorker,
    out_text: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_text);
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        out_arg(out_text, "out_text")?.put(into_c_string(w.worker.metrics_text()));
        Ok(())
    })
}
