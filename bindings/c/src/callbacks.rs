//! The callback shapes several exports share (a count, nothing, a JSON string), so that
//! `qb_worker_*`, `qb_task_*` and the tools name one type each. Each fires on a runtime
//! thread with the caller's `user_data` (proto-docs/ffi.md, "Callback variants"); the
//! callbacks that hand out a worker, a task or a batch live with their export.

use std::ffi::{c_char, c_void};

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
