//! Group commit for inbox inserts. Every source stores its messages through [`InsertGroup`]:
//! a message waits for a free lane (at most [`LANES`] insert statements in flight), and a
//! lane takes every message that queued meanwhile into one `Store::insert_inbox_many`. An
//! idle relay therefore stores each message at once, alone, as before; a busy one stores many
//! per statement, round trip and commit, which is where PostgreSQL spent most of an ingest's
//! cost (`benchmarks/relay.md`). Each message still gets its own outcome, and its sender is
//! acknowledged only after the statement holding it committed.
//!
//! Each message is answered within its budget (`database.connectionTimeoutMs`) from when it
//! was handed over, however many wait (with the database stopped, 50 concurrent
//! POSTs were answered after up to twice the timeout, each group waiting out the one before
//! it). A message still queued when its budget runs out is answered unavailable and never
//! inserted (the sender retries); a group's statement waits for its connection no longer
//! than its earliest message's budget ([`queuebox_core::store::deadline`]), and once it has
//! the connection it runs to its end, so nothing the database may have stored is answered
//! as refused. While the store knows the database is unreachable, statements fail at once
//! (`core/src/store/postgres/pool_watch.rs`), and so does every queued message.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::backend::Database;
use queuebox_core::store::deadline;
use queuebox_core::{Error, InsertOutcome, NewInboxMessage, Store};

use crate::metrics::Metrics;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

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
    queue: mpsc::UnboundedSender<Waiting>,
    /// How long a message may wait for its statement's connection, queueing included.
    budget: Duration,
}

/// A message waiting for its group, and the moment its budget runs out.
struct Waiting {
    msg: NewInboxMessage,
    reply: Reply,
    deadline: Instant,
}

impl InsertGroup {
    /// Starts the task that forms groups on `db`'s store; it ends when the last handle is
    /// dropped. `budget` is `database.connectionTimeoutMs`.
    pub fn start(db: Arc<dyn Database>, metrics: Arc<Metrics>, budget: Duration) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(form_groups(db, metrics, rx, LANES, MAX_GROUP));
        InsertGroup { queue, budget }
    }

    /// Stores `msg` as `Store::insert_inbox` would, in a group with whatever else waits.
    pub async fn insert(&self, msg: NewInboxMessage) -> queuebox_core::Result<InsertOutcome> {
        let (reply, outcome) = oneshot::channel();
        // The queue is unbounded: each message in it is a request or delivery that is waiting
        // for its answer, so the sources' own limits bound it.
        let waiting = Waiting {
            msg,
            reply,
            deadline: Instant::now() + self.budget,
        };
        if self.queue.send(waiting).is_err() {
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

/// Answers every queued message whose budget ran out, unstored; the queue is in arrival
/// order, so those are at its front.
fn expire(queue: &mut VecDeque<Waiting>, db: &dyn Database, now: Instant) {
    while queue.front().is_some_and(|w| w.deadline <= now) {
        let w = queue.pop_front().expect("a front");
        let cause = match db.pool_health().last_connect_error {
            Some(e) => format!("; the last attempt to open a connection failed: {e}"),
            None => String::new(),
        };
        let _ = w.reply.send(Err(Error::Unavailable {
            operation: "inbox insert",
            reason: format!(
                "no database connection within database.connectionTimeoutMs while earlier inserts waited for theirs; not stored{cause}"
            ),
        }));
    }
}

async fn form_groups(
    db: Arc<dyn Database>,
    metrics: Arc<Metrics>,
    mut rx: mpsc::UnboundedReceiver<Waiting>,
    lanes: usize,
    max_group: usize,
) {
    let store: Arc<dyn Store> = db.store();
    let lanes = Arc::new(Semaphore::new(lanes));
    let mut queue: VecDeque<Waiting> = VecDeque::new();
    let mut open = true;
    loop {
        while let Ok(w) = rx.try_recv() {
            queue.push_back(w);
        }
        expire(&mut queue, db.as_ref(), Instant::now());
        let Some(first) = queue.front().map(|w| w.deadline) else {
            if !open {
                return;
            }
            match rx.recv().await {
                Some(w) => queue.push_back(w),
                None => return,
            }
            continue;
        };
        // A lane first, then the queue: while every lane is busy, messages queue up and the
        // next free lane takes them all; a message whose budget runs out meanwhile is
        // answered then.
        tokio::select! {
            lane = lanes.clone().acquire_owned() => {
                let Ok(lane) = lane else {
                    return;
                };
                while let Ok(w) = rx.try_recv() {
                    queue.push_back(w);
                }
                expire(&mut queue, db.as_ref(), Instant::now());
                let n = queue.len().min(max_group);
                if n == 0 {
                    continue;
                }
                let group: Vec<Waiting> = queue.drain(..n).collect();
                metrics.inc("queuebox_inbox_insert_groups_total", &[]);
                let store = store.clone();
                tokio::spawn(async move {
                    // The earliest budget: the front message's (arrival order).
                    let until = group[0].deadline;
                    let (rows, replies): (Vec<_>, Vec<_>) =
                        group.into_iter().map(|w| (w.msg, w.reply)).unzip();
                    let outcomes = deadline::within(until, store.insert_inbox_many(&rows)).await;
                    drop(lane);
                    for (reply, outcome) in replies.into_iter().zip(outcomes) {
                        // A sender that stopped waiting (an HTTP client gone) has nothing to answer.
                        let _ = reply.send(outcome);
                    }
                });
            }
            _ = tokio::time::sleep_until(first) => {}
            w = rx.recv(), if open => match w {
                Some(w) => queue.push_back(w),
                None => open = false,
            },
        }
    }
}
