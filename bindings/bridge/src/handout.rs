//! Handing tasks to a language in batches: what the Node and Python bindings
//! need so that their worker loops cross the boundary once per batch, not per row.
//!
//! - [`Handout::hand_out`] numbers the tasks of a batch from [`queuebox_core::Worker::next_batch`]
//!   and watches each on the runtime for cancellation (lease lost, shutdown's grace over);
//! - [`Handout::next_cancelled`] reports the cancelled ones for the whole worker, so a
//!   language keeps one pending call instead of one per task;
//! - [`complete_all`] completes many tasks in one call ([`Task::complete_all`]: one
//!   batched statement, each task under its own fence);
//! - [`handlers_took`] passes on the language's handler times, which size the claims of a
//!   hand-out worker (`WorkerOptions::hand_out`, set by both bindings).
//!
//! Each task stays an ordinary [`Task`]: its transaction, the application's completion
//! statement and the failure finishes are unchanged.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use queuebox_core::{Error, Result, Task, Worker};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A worker's numbering of handed-out tasks and the queue of cancelled ones.
pub struct Handout {
    next_seq: AtomicU32,
    cancelled_tx: mpsc::UnboundedSender<u32>,
    cancelled_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<u32>>,
    /// Set by [`Handout::close`]: [`Handout::next_cancelled`] answers empty from then on.
    closed: CancellationToken,
}

/// One handed-out task and the token its binding fires when the task is finished (so its
/// cancellation watch ends).
pub struct HandedOut {
    pub task: Task,
    pub done: CancellationToken,
}

impl Default for Handout {
    fn default() -> Self {
        Handout::new()
    }
}

impl Handout {
    pub fn new() -> Handout {
        let (cancelled_tx, cancelled_rx) = mpsc::unbounded_channel();
        Handout {
            next_seq: AtomicU32::new(0),
            cancelled_tx,
            cancelled_rx: tokio::sync::Mutex::new(cancelled_rx),
            closed: CancellationToken::new(),
        }
    }

    /// Numbers `tasks` (the first gets the returned sequence number, the next one more,
    /// mod 2^32) and watches each until its `done` token fires: a cancellation first is
    /// queued for [`Handout::next_cancelled`]. Must run on the tokio runtime.
    pub fn hand_out(&self, tasks: Vec<Task>) -> (u32, Vec<HandedOut>) {
        let first_seq = self
            .next_seq
            .fetch_add(tasks.len() as u32, Ordering::Relaxed);
        let mut watches = FuturesUnordered::new();
        let out = tasks
            .into_iter()
            .enumerate()
            .map(|(i, task)| {
                let done = CancellationToken::new();
                let (cancel, finished) = (task.cancelled().clone(), done.clone());
                let seq = first_seq.wrapping_add(i as u32);
                watches.push(async move {
                    tokio::select! {
                        biased;
                        _ = finished.cancelled_owned() => None,
                        _ = cancel.cancelled_owned() => Some(seq),
                    }
                });
                HandedOut { task, done }
            })
            .collect();
        // One runtime task watches the whole batch rather than one per row: a batch whose
        // completion fires its `done` tokens together wakes it once, where a task per row
        // was N spawns and N wake-ups, often of a parked runtime thread.
        let report = self.cancelled_tx.clone();
        tokio::spawn(async move {
            while let Some(ended) = watches.next().await {
                if let Some(seq) = ended {
                    let _ = report.send(seq);
                }
            }
        });
        (first_seq, out)
    }

    /// The sequence numbers of tasks cancelled since the last call, waiting until there is
    /// one; empty once [`Handout::close`] was called.
    pub async fn next_cancelled(&self) -> Vec<u32> {
        let mut rx = self.cancelled_rx.lock().await;
        let mut seqs = tokio::select! {
            _ = self.closed.cancelled() => return Vec::new(),
            seq = rx.recv() => seq.into_iter().collect::<Vec<u32>>(),
        };
        while let Ok(seq) = rx.try_recv() {
            seqs.push(seq);
        }
        seqs
    }

    /// Ends the reporting: the pending and every later [`Handout::next_cancelled`] answer
    /// empty (the language's run loop is over).
    pub fn close(&self) {
        self.closed.cancel();
    }
}

/// Passes on how long a language's handlers ran ([`Worker::handlers_took`]): `rows` handlers
/// for `seconds` in all. A negative or non-finite time is refused naming `handlerSeconds`.
pub fn handlers_took(worker: &Worker, rows: usize, seconds: f64) -> Result<()> {
    let total = Duration::try_from_secs_f64(seconds).map_err(|_| {
        Error::InvalidInput(format!(
            "handlerSeconds must be a finite number of seconds, at least 0 (got {seconds})"
        ))
    })?;
    worker.handlers_took(rows, total);
    Ok(())
}

/// Completes `tasks` together and fires their `done` tokens; one result per task, in order.
pub async fn complete_all(tasks: Vec<(Task, CancellationToken)>) -> Vec<Result<()>> {
    let (tasks, done): (Vec<Task>, Vec<CancellationToken>) = tasks.into_iter().unzip();
    let results = Task::complete_all(&tasks).await;
    done.iter().for_each(CancellationToken::cancel);
    results
}
