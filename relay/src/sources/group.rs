//! Group commit for inbox inserts. Every source stores its messages through [`InsertGroup`]:
//! a message waits for a free lane (at most [`LANES`] insert statements in flight), and a
//! lane takes every message that queued meanwhile into one `Store::insert_inbox_many`. An
//! idle relay therefore stores each message at once, alone, as before; a busy one stores many
//! per statement, round trip and commit, which is where PostgreSQL spent most of an ingest's
//! cost (`benchmarks/relay.md`). Each message still gets its own outcome, and its sender is
//! acknowledged only after the statement holding it committed.

use std::sync::Arc;

use queuebox_core::{Error, InsertOutcome, NewInboxMessage, Store};

use crate::metrics::Metrics;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Insert statements in flight at once. Fewer lanes make bigger groups (less database work
/// per message), more lanes more statements side by side. With 32 HTTP clients on the
/// 2-CPU benchmark machine 1 lane was fastest, then 2, 4, 8 and 16 (which was no faster than
/// one statement per message: `benchmarks/relay.md`). 2, not 1, so that one slow statement
/// (a lock wait on a key another transaction is inserting) does not stop all ingest.
pub const LANES: usize = 2;

/// The most messages one statement stores: bounds a statement's size and how long one
/// message waits for the others of its group.
pub const MAX_GROUP: usize = 256;

type Reply = oneshot::Sender<queuebox_core::Result<InsertOutcome>>;

/// The handle the sources insert through; cloning it shares the lanes.
#[derive(Clone)]
pub struct InsertGroup {
    queue: mpsc::UnboundedSender<(NewInboxMessage, Reply)>,
}

impl InsertGroup {
    /// Starts the task that forms groups; it ends when the last handle is dropped.
    pub fn start(store: Arc<dyn Store>, metrics: Arc<Metrics>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(form_groups(store, metrics, rx, LANES, MAX_GROUP));
        InsertGroup { queue }
    }

    /// Stores `msg` as `Store::insert_inbox` would, in a group with whatever else waits.
    pub async fn insert(&self, msg: NewInboxMessage) -> queuebox_core::Result<InsertOutcome> {
        let (reply, outcome) = oneshot::channel();
        // The queue is unbounded: each message in it is a request or delivery that is waiting
        // for its answer, so the sources' own limits bound it.
        if self.queue.send((msg, reply)).is_err() {
            return Err(stopped());
        }
        outcome.await.unwrap_or_else(|_| Err(stopped()))
    }
}

/// Neither stored nor acknowledged: the sender retries.
fn stopped() -> Error {
    Error::Unavailable {
        operation: "inbox insert",
        reason: "the relay's insert task stopped".into(),
    }
}

async fn form_groups(
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    mut rx: mpsc::UnboundedReceiver<(NewInboxMessage, Reply)>,
    lanes: usize,
    max_group: usize,
) {
    let lanes = Arc::new(Semaphore::new(lanes));
    while let Some(first) = rx.recv().await {
        // A lane first, then the queue: while every lane is busy, messages queue up and the
        // next free lane takes them all.
        let Ok(lane) = lanes.clone().acquire_owned().await else {
            return;
        };
        let mut group = vec![first];
        while group.len() < max_group {
            match rx.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        metrics.inc("queuebox_inbox_insert_groups_total", &[]);
        let store = store.clone();
        tokio::spawn(async move {
            let (rows, replies): (Vec<_>, Vec<_>) = group.into_iter().unzip();
            let outcomes = store.insert_inbox_many(&rows).await;
            drop(lane);
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                // A sender that stopped waiting (an HTTP client gone) has nothing to answer.
                let _ = reply.send(outcome);
            }
        });
    }
}
