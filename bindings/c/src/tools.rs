//! Calls that need no worker: the conformance vectors, migrations and the version.

use std::ffi::{c_char, c_void};

use serde_json::Value;

use crate::boundary::{
    block, clear_out, guard, handle_ref, into_c_string, spawn, str_arg, Outcome, SendPtr,
};
use crate::error::{Failure, QbError, QbStatus};
use crate::runtime::QbRuntime;
use crate::worker::QbStringCallback;

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
        if out_json.is_null() {
            return Err(Failure::invalid("out_json is NULL"));
        }
        let out = queuebox_bridge::conformance::evaluate(kind, &input)?;
        *out_json = into_c_string(out.to_string());
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
        let handle = handle_ref(runtime, "runtime")?.handle();
        let url = str_arg(database_url, "database_url")?.to_string();
        let ud = SendPtr(user_data);
        spawn(&handle, migrate(url), move |st, json, err| {
            let ud = ud;
            let json = json.map_or(std::ptr::null_mut(), into_c_string);
            match callback {
                Some(cb) => cb(ud.0, st, json, err),
                None => {
                    crate::boundary::qb_string_free(json);
                    crate::error::qb_error_free(err);
                }
            }
        });
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
        let handle = handle_ref(runtime, "runtime")?.handle();
        let url = str_arg(database_url, "database_url")?.to_string();
        let report = block(&handle, migrate(url))?;
        if !out_report_json.is_null() {
            *out_report_json = into_c_string(report);
        }
        Ok(())
    })
}

/// The library version (`"0.1.0"`); a static string, never freed.
#[no_mangle]
pub extern "C" fn qb_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}
