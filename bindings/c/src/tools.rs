//! Calls that need no worker: the conformance vectors, migrations, cancel and the version.

use std::ffi::{c_char, c_void};

use serde_json::Value;
use tokio::runtime::Handle;

use crate::boundary::{
    block, clear_out, guard, into_c_string, out_arg, str_arg, write_opt_out, Outcome,
};
use crate::callbacks::{spawn_string, QbStringCallback};
use crate::error::{Failure, QbError, QbStatus};
use crate::runtime::{runtime_and_url, QbRuntime};

/// Runs one case of a `proto-docs/vectors/*.json` file through the core
/// (`queuebox_bridge::conformance::evaluate`): `kind` is the file's `kind`, `input_json` a
/// case's `input`; `*out_json` is the output to compare with the case's `expected` as
/// JSON values (free it with `qb_string_free`). Synchronous, needs no runtime.
///
/// # Safety
/// Strings are NUL-terminated; `out_json` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_conformance_evaluate(
    kind: *const c_char,
    input_json: *const c_char,
    out_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_json);
    guard(out_error, || {
        let kind = str_arg(kind, "kind")?;
        let input: Value = serde_json::from_str(str_arg(input_json, "input_json")?)
            .map_err(|e| Failure::invalid(format!("input_json is not valid JSON: {e}")))?;
        let out = out_arg(out_json, "out_json")?;
        let output = queuebox_bridge::conformance::evaluate(kind, &input)?;
        out.put(into_c_string(output.to_string()));
        Ok(())
    })
}

/// The one migrate call site of the C ABI (`queuebox_bridge::migrate`); the report as
/// `{"applied":[...],"alreadyApplied":[...]}`.
async fn migrate(url: String) -> Outcome<String> {
    let report = queuebox_bridge::migrate::migrate(url).await?;
    Ok(
        serde_json::json!({ "applied": report.applied, "alreadyApplied": report.already_applied })
            .to_string(),
    )
}

/// Applies the embedded PostgreSQL migrations to `database_url` (what `queuebox migrate`
/// does). Returns at once; the callback receives `{"applied":[...],"alreadyApplied":[...]}`.
///
/// # Safety
/// `runtime` is live; `database_url` is NUL-terminated; `user_data` stays valid until the
/// callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_migrate(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    callback: QbStringCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let (handle, url) = runtime_and_url(runtime, database_url)?;
        spawn_string(&handle, migrate(url), callback, user_data);
        Ok(())
    })
}

/// Blocking variant of `qb_migrate`; `out_report_json` may be NULL.
///
/// # Safety
/// As `qb_migrate`; `out_report_json` is NULL or writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_migrate_blocking(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    out_report_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_report_json);
    guard(out_error, || {
        let (handle, url) = runtime_and_url(runtime, database_url)?;
        let report = block(&handle, migrate(url))?;
        write_opt_out(out_report_json, || into_c_string(report));
        Ok(())
    })
}

/// The arguments of `qb_cancel*`, read before anything runs.
unsafe fn cancel_args(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    table: *const c_char,
    target_json: *const c_char,
) -> Outcome<(Handle, String, String, String)> {
    let (handle, url) = runtime_and_url(runtime, database_url)?;
    Ok((
        handle,
        url,
        str_arg(table, "table")?.to_string(),
        str_arg(target_json, "target_json")?.to_string(),
    ))
}

/// The one cancel call site of the C ABI (`queuebox_bridge::database::cancel`).
async fn cancel(url: String, table: String, target: String) -> Outcome<String> {
    Ok(queuebox_bridge::database::cancel(&url, &table, &target).await?)
}

/// Cancels pending rows (what `queuebox cancel` does): `table` is `"inbox"` (pull rows) or
/// `"outbox"`; `target_json` names them: `{"id"}`, or `{"source", "key"}` or
/// `{"source", "aggregate"}` for the inbox, `{"key", "topic"?}` for the outbox. Connects to
/// `database_url` for this call only. Returns at once; the callback receives the counts
/// `{"cancelled","inFlight","finished","push"}` (free the string with `qb_string_free`). A
/// target that names no row, or names an unknown field, fails with `QB_ERR_INVALID_INPUT`
/// and a message naming the field.
///
/// # Safety
/// `runtime` is live; strings are NUL-terminated; `user_data` stays valid until the callback
/// fired.
#[no_mangle]
pub unsafe extern "C" fn qb_cancel(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    table: *const c_char,
    target_json: *const c_char,
    callback: QbStringCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let (handle, url, table, target) = cancel_args(runtime, database_url, table, target_json)?;
        spawn_string(&handle, cancel(url, table, target), callback, user_data);
        Ok(())
    })
}

/// Blocking variant of `qb_cancel`: `*out_counts_json` receives the counts (free with
/// `qb_string_free`).
///
/// # Safety
/// As `qb_cancel`; `out_counts_json` is writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_cancel_blocking(
    runtime: *const QbRuntime,
    database_url: *const c_char,
    table: *const c_char,
    target_json: *const c_char,
    out_counts_json: *mut *mut c_char,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_counts_json);
    guard(out_error, || {
        let (handle, url, table, target) = cancel_args(runtime, database_url, table, target_json)?;
        let out = out_arg(out_counts_json, "out_counts_json")?;
        out.put(into_c_string(block(&handle, cancel(url, table, target))?));
        Ok(())
    })
}

/// The library version (`"0.1.0"`); a static string, never freed.
#[no_mangle]
pub extern "C" fn qb_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}
