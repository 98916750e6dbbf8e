//! `qb_task_completion_statement`, `qb_task_claim_lost`, `qb_publish_statement`,
//! `qb_enqueue_statement`: the statements an application runs with its own driver inside its
//! own transaction (`queuebox_core::app_tx`; the JSON shapes are in proto-docs/ffi.md and
//! sql-contract.md).

use std::ffi::c_char;

use crate::boundary::{clear_out, guard, handle_ref, into_c_string, opt_str_arg, out_arg, str_arg};
use crate::error::{QbError, QbStatus};
use crate::task::QbTask;

/// The task's fenced completion for the application's transaction, as JSON
/// `{"sql": "...", "params": ["<id>", "<claim token>"], "expect": "one_row_affected"}`
/// with the SQL in `placeholder` style (`dollar`, `question`, `percent`, `colon`, `at`);
/// free it with `qb_string_free`. From this call on the application owns the completion:
/// the worker stops renewing the lease and `qb_task_complete` writes nothing (the
/// application's commit decides); a failed handler still goes through `qb_task_fail`.
/// Zero rows affected: call `qb_task_claim_lost`. Does not block.
///
/// # Safety
/// `task` is live; `placeholder` is NUL-terminated; `out_json` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_task_completion_statement(
    task: *const QbTask,
    placeholder: *const c_char,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_json);
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let placeholder = str_arg(placeholder, "placeholder")?;
        let out = out_arg(out_json, "out_json")?;
        let json = queuebox_bridge::app_tx::completion_statement(t.task(), placeholder)?;
        out.put(into_c_string(json));
        Ok(())
    })
}

/// The application's completion statement affected no row: the claim was lost. The core
/// counts and logs the loss once and settles the task; the call returns
/// `QB_ERR_CLAIM_LOST` with the error to raise in the application's transaction (so its
/// business write rolls back). Any other status is a misuse (NULL task). Does not block.
///
/// # Safety
/// `task` is live.
#[no_mangle]
pub unsafe extern "C" fn qb_task_claim_lost(
    task: *const QbTask,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let t = handle_ref(task, "task")?;
        let e = queuebox_bridge::app_tx::claim_lost(t.task());
        t.settle();
        Err(e.into())
    })
}

/// The insert of outbox rows for the application's transaction. `backend` is `postgres`
/// (also when NULL) or `sqlserver`; `messages_json` a JSON array of
/// `{"topic", "payload", "key", "headers", "aggregate_type", "max_attempts", "delay_ms" |
/// "scheduled_at"}`; `*out_json` is `{"sql", "params": ["<json>"], "expect":
/// "rows_affected", "ids": [...]}` (free it with `qb_string_free`). A bad message is
/// `QB_ERR_INVALID_INPUT` naming `messages[i].field`. Synchronous, needs no runtime.
///
/// # Safety
/// `backend` is NULL or NUL-terminated; the other strings are NUL-terminated; `out_json`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_publish_statement(
    backend: *const c_char,
    messages_json: *const c_char,
    placeholder: *const c_char,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    render_statement(
        backend,
        messages_json,
        placeholder,
        out_json,
        out_error,
        queuebox_bridge::app_tx::publish_statement,
    )
}

/// The enqueue of pull inbox rows for the application's transaction. `backend` is
/// `postgres` (also when NULL) or `sqlserver`; `messages_json` a JSON array of
/// `{"source", "payload", "idempotency_key", "aggregate_id", "event_type", "correlation_id",
/// "headers", "priority", "max_attempts", "delay_ms" | "scheduled_at"}` (only `source` and
/// `payload` required); `*out_json` is `{"sql", "params": ["<json>"], "expect":
/// "enqueue_rows"}` (free it with `qb_string_free`). Run it as a query in the application's
/// transaction: it returns one row per message, in order, with columns `n` (the message's
/// index), `id` and `duplicate` (true: `(source, idempotency_key)` was stored already,
/// nothing was inserted and `id` is the stored row's). A bad message is
/// `QB_ERR_INVALID_INPUT` naming `messages[i].field`. Synchronous, needs no runtime.
///
/// # Safety
/// `backend` is NULL or NUL-terminated; the other strings are NUL-terminated; `out_json`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_enqueue_statement(
    backend: *const c_char,
    messages_json: *const c_char,
    placeholder: *const c_char,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    render_statement(
        backend,
        messages_json,
        placeholder,
        out_json,
        out_error,
        queuebox_bridge::app_tx::enqueue_statement,
    )
}

/// What `qb_publish_statement` and `qb_enqueue_statement` share: their arguments read and
/// checked, `render` (the bridge's statement for those messages) called, its JSON handed out.
///
/// # Safety
/// As the two exports: `backend` is NULL or NUL-terminated, the other strings are
/// NUL-terminated, `out_json` is writable.
unsafe fn render_statement(
    backend: *const c_char,
    messages_json: *const c_char,
    placeholder: *const c_char,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
    render: fn(Option<&str>, &str, &str) -> queuebox_bridge::Result<String>,
) -> QbStatus {
    clear_out(out_json);
    guard(out_error, || {
        let backend = opt_str_arg(backend, "backend")?;
        let messages = str_arg(messages_json, "messages_json")?;
        let placeholder = str_arg(placeholder, "placeholder")?;
        let out = out_arg(out_json, "out_json")?;
        out.put(into_c_string(render(backend, messages, placeholder)?));
        Ok(())
    })
}
