//! Calls that need no worker: the conformance vectors, migrations and the version.

use std::ffi::{c_char, c_void};

use queuebox_core::store::postgres::PgStore;
use serde_json::Value;

use crate::boundary::{block, clear_out, guard, handle_ref, into_c_string, str_arg, Outcome, SendPtr};
use crate::error::{Failure, QbError, QbStatus};
use crate::runtime::QbRuntime;
use crate::worker::QbStringCallback;

/// Runs one case of a `proto-docs/vectors/*.json` file through the core
/// (`queuebox_core::conformance::evaluate`): `kind` is the file's `kind`, `input_json` a
/// case's `input`; `*out_json` is the output to compare with the case's `expected` as
/// JSON values (free it with `qb_string_free`). Synchronous, needs no runtime.
///
/// # Safety
/// Strings are NUL-terminated; `out_json` is writable.
#[no_mangle]
pub unsafe extern "C" fn qb_conformance_evaluate(kind: *const c_char, input_json: *const c_char, out_json: *mut *mut c_char, out_error: *mut *mut QbError) -> QbStatus {
    clear_out(out_json);
    guard(out_error, || {
        let kind = str_arg(kind, "kind")?;
        let input: Value = serde_json::from_str(str_arg(input_json, "input_json")?).map_err(|e| Failure::invalid(format!("input_json is not valid JSON: {e}")))?;
        if out_json.is_null() {
            return Err(Failure::invalid("out_json is NULL"));
        }
        let out = queuebox_core::conformance::evaluate(kind, &input)?;
        *out_json = into_c_string(out.to_string());
        Ok(())
    })
}

async fn migrate(url: String) -> Outcome<String> {
    let store = PgStore::connect(&url, 2).await?;
    let report = queuebox_core::migrate::postgres::run(&store).await?;
    store.pool().close().await;
    Ok(serde_json::json!({ "applied": report.applied, "alreadyApplied": report.already_applied }).to_string())
}

/// Applies the embedded PostgreSQL migrations to `database_url` (what `queuebox migrate`
/// does). Returns at once; the callback receives `{"applied":[...],"alreadyApplied":[...]}`.
///
/// # Safety
/// `runtime` is live; `database_url` is NUL-terminated; `user_data` stays valid until the
/// callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_migrate(runtime: *const QbRuntime, database_url: *const c_char, callback: QbStringCallback, user_data: *mut c_void, out_error: *mut *mut QbError) -> QbStatus {
    guard(out_error, || {
        let handle = handle_ref(runtime, "runtime")?.handle();
        let url = str_arg(database_url, "database_url")?.to_string();
        let ud = SendPtr(user_data);
        // sqlx's migration future is not `Send` for every lifetime, so it runs on a thread
        // of its own that blocks on the runtime; the callback still fires off the caller's thread.
        std::thread::Builder::new().name("queuebox-migrate".into()).spawn(move || {
            let ud = ud;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.block_on(migrate(url)))).unwrap_or_else(|p| Err(Failure::panic(p)));
            let (st, json, err) = match r {
                Ok(j) => (QbStatus::QB_OK, into_c_string(j), std::ptr::null_mut()),
                Err(f) => (f.status, std::ptr::null_mut(), f.into_raw()),
            };
            match callback {
                Some(cb) => cb(ud.0, st, json, err),
                None => {
                    crate::boundary::qb_string_free(json);
                    crate::error::qb_error_free(err);
                }
            }
        }).map_err(|e| Failure { status: QbStatus::QB_ERR_INTERNAL, code: None, message: format!("cannot start the migration thread: {e}") })?;
        Ok(())
    })
}

/// Blocking variant of `qb_migrate`; `out_report_json` may be NULL.
///
/// # Safety
/// As `qb_migrate`; `out_report_json` is NULL or writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_migrate_blocking(runtime: *const QbRuntime, database_url: *const c_char, out_report_json: *mut *mut c_char, out_error: *mut *mut QbError) -> QbStatus {
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
