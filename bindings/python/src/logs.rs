//! The core's log records for Python's `logging`. A record is emitted on whichever thread
//! logs, often a runtime thread while a Python thread holds the GIL and waits for that very
//! runtime; taking the GIL there could deadlock. So the sink only queues the record (never
//! blocks: a full queue drops it and counts the drop), and a Python thread of
//! `queuebox_inbox` drains the queue with [`next_log_records`], which waits without the GIL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use queuebox_bridge::logs::{self, LogLevel, Record};

/// Records waiting for the Python thread; beyond this the newest are dropped.
const QUEUE: usize = 10_000;

/// (level number 1 error .. 5 trace, target, message, fields JSON)
type Item = (u32, String, String, String);

struct Queue {
    tx: SyncSender<Item>,
    rx: Mutex<Receiver<Item>>,
    dropped: AtomicU64,
}

fn queue() -> &'static Arc<Queue> {
    static Q: OnceLock<Arc<Queue>> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE);
        Arc::new(Queue {
            tx,
            rx: Mutex::new(rx),
            dropped: AtomicU64::new(0),
        })
    })
}

/// Forwards records at `min_level` (1 error .. 5 trace) and more severe into the queue;
/// `None` stops forwarding. The filter runs in Rust: a disabled level costs one comparison.
#[pyfunction]
#[pyo3(signature = (min_level))]
pub fn set_log_level(min_level: Option<u32>) -> PyResult<()> {
    let Some(n) = min_level else {
        return logs::set_sink(None, LogLevel::Error).map_err(PyValueError::new_err);
    };
    let level = LogLevel::from_number(n).ok_or_else(|| {
        PyValueError::new_err(format!("min_level {n} is not a level (1 error .. 5 trace)"))
    })?;
    let q = queue().clone();
    let sink: logs::Sink = Arc::new(move |r: &Record| {
        let item = (
            r.level as u32,
            r.target.clone(),
            r.message.clone(),
            r.fields_json(),
        );
        if let Err(TrySendError::Full(_)) = q.tx.try_send(item) {
            q.dropped.fetch_add(1, Ordering::Relaxed);
        }
    });
    logs::set_sink(Some(sink), level).map_err(PyValueError::new_err)
}

/// Waits up to `timeout_ms` for records, without the GIL, and returns every queued one as
/// `(level, target, message, fields_json)` tuples (empty after the timeout).
#[pyfunction]
pub fn next_log_records(py: Python<'_>, timeout_ms: u64) -> Vec<Item> {
    let q = queue().clone();
    py.detach(move || {
        let rx = q.rx.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        match rx.recv_timeout(Duration::from_millis(timeout_ms)) {
            Ok(first) => out.push(first),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return out,
        }
        while let Ok(more) = rx.try_recv() {
            out.push(more);
        }
        out
    })
}

/// Records dropped because the queue was full (the Python thread fell behind).
#[pyfunction]
pub fn dropped_log_records() -> u64 {
    queue().dropped.load(Ordering::Relaxed)
}
