//! `qb_runtime`: the tokio runtime every worker, task and callback of a process runs on.

use std::ffi::c_char;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::boundary::{clear_out, guard, handle_ref, out_arg, release, str_arg, Outcome};
use crate::error::{Failure, QbError, QbStatus};

/// A multi-threaded tokio runtime owned by the caller. Callbacks fire on its threads.
pub struct QbRuntime {
    pub(crate) rt: Option<Runtime>,
}

impl QbRuntime {
    pub(crate) fn handle(&self) -> Handle {
        self.rt
            .as_ref()
            .expect("a runtime lives until qb_runtime_free")
            .handle()
            .clone()
    }
}

/// The runtime and the database URL every call that connects starts from, checked in this
/// order (`qb_worker_new*`, `qb_migrate*`, `qb_cancel*`).
pub(crate) fn runtime_and_url(
    runtime: *const QbRuntime,
    database_url: *const c_char,
) -> Outcome<(Handle, String)> {
    let handle = handle_ref(runtime, "runtime")?.handle();
    Ok((handle, str_arg(database_url, "database_url")?.to_string()))
}

/// Starts a runtime with `worker_threads` threads (0: two). Free it with
/// `qb_runtime_free` after every worker and task made on it.
///
/// # Safety
/// `out_runtime` points at writable storage; `out_error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn qb_runtime_new(
    worker_threads: u32,
    out_runtime: *mut *mut QbRuntime,
    out_error: *mut *mut QbError,
) -> QbStatus {
    clear_out(out_runtime);
    guard(out_error, || {
        let out = out_arg(out_runtime, "out_runtime")?;
        let threads = if worker_threads == 0 {
            2
        } else {
            worker_threads as usize
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("queuebox-rt")
            .enable_all()
            .build()
            .map_err(|e| Failure {
                status: QbStatus::QB_ERR_INTERNAL,
                code: None,
                message: format!("cannot start the runtime: {e}"),
            })?;
        out.put(Box::into_raw(Box::new(QbRuntime { rt: Some(rt) })));
        Ok(())
    })
}

/// Stops the runtime: pending callbacks that have not fired are dropped, its threads are
/// joined (up to 5 s). Blocks. NULL is ignored. Called from a runtime thread (inside a
/// callback) it cannot join and shuts down in the background instead.
///
/// # Safety
/// `runtime` is NULL or a runtime from `qb_runtime_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn qb_runtime_free(runtime: *mut QbRuntime) {
    release(runtime, |runtime| {
        let mut boxed = Box::from_raw(runtime);
        if let Some(rt) = boxed.rt.take() {
            if Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    });
}
