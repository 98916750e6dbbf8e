//! The callback shapes several exports share (a count, nothing, a JSON string), so that
//! `qb_worker_*`, `qb_task_*` and the tools name one type each, and the one way each is
//! fired (`spawn_count`, `spawn_done`, `spawn_string`). Each fires on a runtime thread with
//! the caller's `user_data` (proto-docs/ffi.md, "Callback variants"); the callbacks that
//! hand out a worker, a task or a batch live with their export.

use std::ffi::{c_char, c_void};
use std::future::Future;
use std::ptr;

use tokio::runtime::Handle;

use crate::boundary::{into_c_string, spawn_reply, Outcome, Reply};
use crate::error::{QbError, QbStatus};

/// Fires once with a count (rows affected, tasks abandoned) or an error.
pub type QbCountCallback = Option<
    unsafe extern "C" fn(user_data: *mut c_void, status: QbStatus, count: u64, error: *mut QbError),
>;

/// Fires once with the outcome of an operation that returns nothing.
pub type QbDoneCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, status: QbStatus, error: *mut QbError)>;

/// Fires once with a JSON string (owned by the receiver) or an error.
pub type QbStringCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        json: *mut c_char,
        error: *mut QbError,
    ),
>;

/// Runs `fut` on the runtime and hands its count (0 with an error) to `callback`.
pub(crate) fn spawn_count(
    handle: &Handle,
    fut: impl Future<Output = Outcome<u64>> + Send + 'static,
    callback: QbCountCallback,
    user_data: *mut c_void,
) {
    spawn_reply(
        handle,
        fut,
        Reply::new(callback, user_data),
        |n| n.unwrap_or(0),
        |cb, ud, st, n, err| unsafe { cb(ud, st, n, err) },
    );
}

/// Runs `fut` on the runtime and hands its outcome to `callback`.
pub(crate) fn spawn_done(
    handle: &Handle,
    fut: impl Future<Output = Outcome<()>> + Send + 'static,
    callback: QbDoneCallback,
    user_data: *mut c_void,
) {
    spawn_reply(
        handle,
        fut,
        Reply::new(callback, user_data),
        |_| (),
        |cb, ud, st, (), err| unsafe { cb(ud, st, err) },
    );
}

/// Runs `fut` on the runtime and hands its text (NULL with an error) to `callback`.
pub(crate) fn spawn_string(
    handle: &Handle,
    fut: impl Future<Output = Outcome<String>> + Send + 'static,
    callback: QbStringCallback,
    user_data: *mut c_void,
) {
    spawn_reply(
        handle,
        fut,
        Reply::new(callback, user_data),
        |json| json.map_or(ptr::null_mut(), into_c_string),
        |cb, ud, st, json, err| unsafe { cb(ud, st, json, err) },
    );
}
