//! The tokio runtime every awaitable and blocking call of this extension runs on, owned here
//! so that the interpreter's exit can stop it.
//!
//! Why: pyo3-async-runtimes resolves an asyncio future from a `spawn_blocking` thread that
//! takes the GIL (`Python::attach`, then `loop.call_soon_threadsafe`). Its own runtime is a
//! `static` that is never shut down, so such a thread could still be starting or be inside
//! that call when the main thread began `Py_Finalize`. A thread that (re)takes the GIL in a
//! finalizing interpreter is ended by CPython with `pthread_exit`, which unwinds through
//! Rust frames and aborts the process ("FATAL: exception not rethrown", or
//! "PyGILState_Release: thread state ... must be current", or a segfault). Those blocking
//! threads are not tasks (`num_alive_tasks` does not count them), which is why waiting for
//! the tasks to end was not enough before. The package's `atexit` handler calls
//! [`shutdown`]: exit handlers run before finalization begins, the GIL is released while
//! the runtime stops, so every thread that wants the GIL gets it and finishes, and once
//! `shutdown_timeout` returns no runtime thread is left to touch Python. Work spawned later
//! (an object freed during finalization) is dropped by the stopped runtime, never run.
//! pyo3-async-runtimes has no shutdown of its own
//! (<https://github.com/PyO3/pyo3-async-runtimes/issues/40>, the same abort), so this module
//! gives its generic API a runtime it can stop.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{self, ContextExt, Runtime as GenericRuntime};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// The runtime until [`shutdown`] takes it; its handle stays (spawning on a stopped runtime
/// drops the work).
static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
static HANDLE: OnceLock<Handle> = OnceLock::new();

pub fn handle() -> &'static Handle {
    HANDLE.get_or_init(|| {
        let rt = Builder::new_multi_thread()
            .enable_all()
            .thread_name("queuebox-rt")
            .build()
            .expect("the tokio runtime could not start");
        let h = rt.handle().clone();
        *RUNTIME.lock().unwrap_or_else(|p| p.into_inner()) = Some(rt);
        h
    })
}

/// Stops the runtime (called once, at interpreter exit): waits without the GIL, at most
/// `timeout_ms`, for its worker and blocking threads to end. Returns whether it was running.
#[pyfunction]
pub fn shutdown(py: Python<'_>, timeout_ms: u64) -> bool {
    let rt = RUNTIME.lock().unwrap_or_else(|p| p.into_inner()).take();
    match rt {
        Some(rt) => {
            py.detach(move || rt.shutdown_timeout(Duration::from_millis(timeout_ms)));
            true
        }
        None => false,
    }
}

/// Runs `fut` to its end on the runtime, on the calling thread without the GIL: the
/// blocking twin of [`future_into_py`].
pub fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send,
    T: Send,
{
    let h = handle();
    py.detach(move || h.block_on(fut))
}

/// A Python awaitable of `fut`, run on this module's runtime.
pub fn future_into_py<F, T>(py: Python<'_>, fut: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    generic::future_into_py::<QueueBoxRuntime, _, T>(py, fut)
}

struct QueueBoxRuntime;

tokio::task_local! {
    static LOCALS: TaskLocals;
}

impl GenericRuntime for QueueBoxRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        handle().spawn(fut)
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        handle().spawn_blocking(f)
    }
}

impl ContextExt for QueueBoxRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(LOCALS.scope(locals, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        LOCALS.try_with(|l| l.clone()).ok()
    }
}
