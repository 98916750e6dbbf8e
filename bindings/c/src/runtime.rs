//! `qb_runtime`: the tokio runtime every worker, task and callback of a process runs on.

use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::boundary::{clear_out, guard, write_out};
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
        if out_runtime.is_null() {
            return Err(Failure::invalid("out_runtime is NULL"));
        }
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
        write_out(
            out_runtime,
            Box::into_raw(Box::new(QbRuntime { rt: Some(rt) })),
            "out_runtime",
        )
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
    if runtime.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut boxed = Box::from_raw(runtime);
        if let Some(rt) = boxed.rt.take() {
            if Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    }));
}
