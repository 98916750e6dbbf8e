//! `qb_task`: one claimed row in the hands of a handler: its message, its transaction,
//! its cancellation and the ways to finish it.

use std::ffi::{c_char, c_void};
use std::future::Future;
use std::time::Duration;

use queuebox_core::{Error, SqlValue, Task};
use serde_json::Value;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::boundary::{
    block, clear_out, guard, handle_ref, into_c_string, opt_str_arg, out_arg, release, spawn,
    str_arg, write_opt_out, write_out, Outcome, SendPtr,
};
use crate::callbacks::{
    spawn_count, spawn_done, spawn_string, QbCountCallback, QbDoneCallback, QbStringCallback,
};
use crate::error::{Failure, QbError, QbStatus};

/// A claimed row. Thread-safe. Every async call holds its own reference, so the handle may
/// be freed as soon as the last call on it has *returned* (its callback may fire later).
pub struct QbTask {
    task: Task,
    handle: Handle,
    /// Cancelled once a finish has run or the handle was freed: ends cancellation waits.
    settled: CancellationToken,
}

/// Fires once: `cancelled` is true when the lease was lost or the shutdown grace ran out,
/// false when the task was finished or freed first.
pub type QbCancelCallback = Option<unsafe extern "C" fn(user_data: *mut c_void, cancelled: bool)>;

impl QbTask {
    pub(crate) fn boxed(task: Task, handle: Handle) -> Box<QbTask> {
        Box::new(QbTask {
            task,
            handle,
            settled: CancellationToken::new(),
        })
    }
}

impl QbTask {
    pub(crate) fn task(&self) -> &Task {
        &self.task
    }

    /// Ends the cancellation waits: the task was settled outside a finish call.
    pub(crate) fn settle(&self) {
        self.settled.cancel();
    }

    /// The token a finish cancels to end the cancellation waits (for batched finishes).
    pub(crate) fn settled_token(&self) -> CancellationToken {
        self.settled.clone()
    }

    /// The runtime the task's calls run on.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// Releases the caller's task handle. A task freed before any finish is abandoned: renewal
/// stops and the row returns after its lease; an open transaction rolls back. NULL is
/// ignored. Does not block.
///
/// # Safety
/// `task` is NULL or a task not yet freed, with no call on it still executing.
#[no_mangle]
pub unsafe extern "C" fn qb_task_free(task: *mut QbTask) {
    release(task, |task| {
        let t = Box::from_raw(task);
        let _enter = t.handle.enter();
        t.settled.cancel();
        drop(t.task);
    });
}

/// The message of the task as a JSON object (`id`, `source`, `idempotencyKey`,
/// `aggregateId`, `eventType`, `payload`, `headers`, `attempt`, `correlationId`,
/// `createdAt`); free it with `qb_string_free`. Does not block.
///
/// # Safety
/// `task` is live; `out_json` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_task_message(
    task: *const QbTask,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_json);
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let json = queuebox_bridge::json::message_to_text(t.task.message());
        out_arg(out_json, "out_json")?.put(into_c_string(json));
        Ok(())
    })
}

/// Polls the task's cancellation: true once the lease was lost or the shutdown grace ran
/// out. A cancelled task must stop; every finish except abandon then returns
/// `QB_CANCELLED` and abandons the row. Does not block.
///
/// # Safety
/// `task` is live; `out_cancelled` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_task_is_cancelled(
    task: *const QbTask,
    out_cancelled: *mut bool,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        write_out(
            out_cancelled,
            t.task.cancelled().is_cancelled(),
            "out_cancelled",
        )
    })
}

async fn wait_cancelled(cancel: CancellationToken, settled: CancellationToken) -> Outcome<bool> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Ok(true),
        _ = settled.cancelled() => Ok(cancel.is_cancelled()),
    }
}

/// Registers `callback` to fire exactly once on a runtime thread: with `true` when the
/// task is cancelled, with `false` when it is finished or freed first.
///
/// # Safety
/// `task` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_task_on_cancelled(
    task: *const QbTask,
    callback: QbCancelCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let ud = SendPtr(user_data);
        spawn(
            &t.handle,
            wait_cancelled(t.task.cancelled().clone(), t.settled.clone()),
            move |_, c, _| {
                let ud = ud;
                if let Some(cb) = callback {
                    cb(ud.0, c.unwrap_or(false));
                }
            },
        );
        Ok(())
    })
}

/// Blocks until the task is cancelled (`*out_cancelled = true`) or finished or freed
/// (`false`). Meant for a goroutine or thread that turns cancellation into its language's
/// signal.
///
/// # Safety
/// `task` is live when called; `out_cancelled` is writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_wait_cancelled_blocking(
    task: *const QbTask,
    out_cancelled: *mut bool,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let out = out_arg(out_cancelled, "out_cancelled")?;
        let (cancel, settled, handle) = (
            t.task.cancelled().clone(),
            t.settled.clone(),
            t.handle.clone(),
        );
        out.put(block(&handle, wait_cancelled(cancel, settled))?);
        Ok(())
    })
}

/// `[1, "a", null, {"k": 1}]` → parameters: strings are text, integers 64-bit, objects and
/// arrays JSON (`queuebox_bridge::json::params_from_json`). NULL means no parameters.
fn params(json: Option<&str>) -> Outcome<Vec<SqlValue>> {
    let Some(json) = json else {
        return Ok(Vec::new());
    };
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Failure::invalid(format!("params_json is not valid JSON: {e}")))?;
    Ok(queuebox_bridge::json::params_from_json(&v)?)
}

fn execute(
    t: &QbTask,
    sql: *const c_char,
    params_json: *const c_char,
) -> Outcome<impl Future<Output = Outcome<u64>>> {
    let (task, sql, params) = (
        t.task.clone(),
        str_arg(sql, "sql")?.to_string(),
        params(opt_str_arg(params_json, "params_json")?)?,
    );
    Ok(async move { Ok(task.execute(&sql, &params).await?) })
}

fn query(
    t: &QbTask,
    sql: *const c_char,
    params_json: *const c_char,
) -> Outcome<impl Future<Output = Outcome<String>>> {
    let (task, sql, params) = (
        t.task.clone(),
        str_arg(sql, "sql")?.to_string(),
        params(opt_str_arg(params_json, "params_json")?)?,
    );
    Ok(async move {
        let rows = task.query(&sql, &params).await?;
        serde_json::to_string(&rows).map_err(|e| Failure::invalid(e.to_string()))
    })
}

/// Runs a statement in the task's transaction (opened on first use; it commits with
/// `qb_task_complete` and rolls back with any other finish). `params_json` is a JSON array
/// bound to `$1`, `$2`, ... or NULL. The callback receives the affected row count.
///
/// # Safety
/// `task` is live; strings are NUL-terminated; `user_data` stays valid until the callback.
#[no_mangle]
pub unsafe extern "C" fn qb_task_execute(
    task: *const QbTask,
    sql: *const c_char,
    params_json: *const c_char,
    callback: QbCountCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        spawn_count(
            &t.handle,
            execute(t, sql, params_json)?,
            callback,
            user_data,
        );
        Ok(())
    })
}

/// Blocking variant of `qb_task_execute`; `out_rows_affected` may be NULL.
///
/// # Safety
/// As `qb_task_execute`. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_execute_blocking(
    task: *const QbTask,
    sql: *const c_char,
    params_json: *const c_char,
    out_rows_affected: *mut u64,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let n = block(&t.handle, execute(t, sql, params_json)?)?;
        write_opt_out(out_rows_affected, || n);
        Ok(())
    })
}

/// Runs a query in the task's transaction; the callback receives the rows as a JSON array
/// of objects keyed by column name.
///
/// # Safety
/// As `qb_task_execute`.
#[no_mangle]
pub unsafe extern "C" fn qb_task_query(
    task: *const QbTask,
    sql: *const c_char,
    params_json: *const c_char,
    callback: QbStringCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        spawn_string(&t.handle, query(t, sql, params_json)?, callback, user_data);
        Ok(())
    })
}

/// Blocking variant of `qb_task_query`; `*out_rows_json` is freed with `qb_string_free`.
///
/// # Safety
/// As `qb_task_execute`; `out_rows_json` is writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_query_blocking(
    task: *const QbTask,
    sql: *const c_char,
    params_json: *const c_char,
    out_rows_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_rows_json);
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let out = out_arg(out_rows_json, "out_rows_json")?;
        let rows = block(&t.handle, query(t, sql, params_json)?)?;
        out.put(into_c_string(rows));
        Ok(())
    })
}

/// How a task is finished.
enum Finish {
    Complete,
    Fail(String),
    Retry(Duration, String),
    Dead(String),
    Release,
    Abandon,
}

/// Runs a finish. The core refuses every finish but abandon on a cancelled task (lease
/// lost, shutdown grace over): it abandons the task and reports `Cancelled`.
async fn finish(task: Task, settled: CancellationToken, how: Finish) -> Outcome<()> {
    let r: Result<(), Error> = match how {
        Finish::Complete => task.complete().await,
        Finish::Fail(e) => task.fail(&e).await.map(|_| ()),
        Finish::Retry(d, e) => task.retry(d, &e).await,
        Finish::Dead(r) => task.dead(&r).await,
        Finish::Release => task.release().await,
        Finish::Abandon => {
            task.abandon().await;
            Ok(())
        }
    };
    settled.cancel();
    Ok(r?)
}

fn start_finish(
    task: *const QbTask,
    how: impl FnOnce() -> Outcome<Finish>,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let fut = finish(t.task.clone(), t.settled.clone(), how()?);
        spawn_done(&t.handle, fut, callback, user_data);
        Ok(())
    })
}

fn block_finish(
    task: *const QbTask,
    how: impl FnOnce() -> Outcome<Finish>,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        block(&t.handle, finish(t.task.clone(), t.settled.clone(), how()?))
    })
}

fn text(p: *const c_char, what: &str) -> Outcome<String> {
    Ok(opt_str_arg(p, what)?.unwrap_or("").to_string())
}

/// Marks the row processed; with an open transaction the mark commits with the business
/// writes. `QB_ERR_CLAIM_LOST` when fenced out (everything rolled back).
///
/// # Safety
/// `task` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_task_complete(
    task: *const QbTask,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(
        task,
        || Ok(Finish::Complete),
        callback,
        user_data,
        out_error,
    )
}

/// Blocking variant of `qb_task_complete`.
///
/// # Safety
/// `task` is live. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_complete_blocking(
    task: *const QbTask,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(task, || Ok(Finish::Complete), out_error)
}

/// A failed handler: the worker's retry policy decides (retry after the backoff, or dead
/// once the attempts are spent), with `error_text` (redacted) as `last_error`. Business
/// writes roll back.
///
/// # Safety
/// `task` is live; `error_text` is NULL or NUL-terminated; `user_data` stays valid until
/// the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_task_fail(
    task: *const QbTask,
    error_text: *const c_char,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(
        task,
        || Ok(Finish::Fail(text(error_text, "error_text")?)),
        callback,
        user_data,
        out_error,
    )
}

/// Blocking variant of `qb_task_fail`.
///
/// # Safety
/// As `qb_task_fail`. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_fail_blocking(
    task: *const QbTask,
    error_text: *const c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(
        task,
        || Ok(Finish::Fail(text(error_text, "error_text")?)),
        out_error,
    )
}

/// Back to pending after `delay_ms` with `attempt + 1` (the handler's own delay, not the
/// policy's). Business writes roll back.
///
/// # Safety
/// As `qb_task_fail`.
#[no_mangle]
pub unsafe extern "C" fn qb_task_retry(
    task: *const QbTask,
    delay_ms: u64,
    error_text: *const c_char,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(
        task,
        || {
            Ok(Finish::Retry(
                Duration::from_millis(delay_ms),
                text(error_text, "error_text")?,
            ))
        },
        callback,
        user_data,
        out_error,
    )
}

/// Blocking variant of `qb_task_retry`.
///
/// # Safety
/// As `qb_task_fail`. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_retry_blocking(
    task: *const QbTask,
    delay_ms: u64,
    error_text: *const c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(
        task,
        || {
            Ok(Finish::Retry(
                Duration::from_millis(delay_ms),
                text(error_text, "error_text")?,
            ))
        },
        out_error,
    )
}

/// Dead-letters the row with `reason` as `last_error`. Business writes roll back.
///
/// # Safety
/// As `qb_task_fail`.
#[no_mangle]
pub unsafe extern "C" fn qb_task_dead(
    task: *const QbTask,
    reason: *const c_char,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(
        task,
        || Ok(Finish::Dead(text(reason, "reason")?)),
        callback,
        user_data,
        out_error,
    )
}

/// Blocking variant of `qb_task_dead`.
///
/// # Safety
/// As `qb_task_fail`. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_dead_blocking(
    task: *const QbTask,
    reason: *const c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(
        task,
        || Ok(Finish::Dead(text(reason, "reason")?)),
        out_error,
    )
}

/// Back to pending at once without spending an attempt.
///
/// # Safety
/// As `qb_task_complete`.
#[no_mangle]
pub unsafe extern "C" fn qb_task_release(
    task: *const QbTask,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(task, || Ok(Finish::Release), callback, user_data, out_error)
}

/// Blocking variant of `qb_task_release`.
///
/// # Safety
/// `task` is live. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_release_blocking(
    task: *const QbTask,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(task, || Ok(Finish::Release), out_error)
}

/// Gives the row up without writing: renewal stops, the lease expires and another worker
/// takes it. Business writes roll back. Never fails on a live task.
///
/// # Safety
/// As `qb_task_complete`.
#[no_mangle]
pub unsafe extern "C" fn qb_task_abandon(
    task: *const QbTask,
    callback: QbDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    start_finish(task, || Ok(Finish::Abandon), callback, user_data, out_error)
}

/// Blocking variant of `qb_task_abandon`.
///
/// # Safety
/// `task` is live. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_task_abandon_blocking(
    task: *const QbTask,
    out_error: *mut *mut QbError,
) -> QbStatus {
    block_finish(task, || Ok(Finish::Abandon), out_error)
}
