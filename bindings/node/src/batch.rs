//! The batch interface the TypeScript worker loop runs on, so that JavaScript crosses into
//! the addon once per batch rather than two or three times per row:
//!
//! - `nextBatch(max)` hands out up to `max` claimed tasks in one Promise (the core's
//!   [`qb::Worker::next_batch`]) with their messages as one JSON array text, parsed once;
//! - `completeAll(tasks)` completes many tasks in one Promise ([`qb::Task::complete_all`]:
//!   one batched statement, each task keeping its own fence), answering per task;
//! - `nextCancelled()` reports the tasks whose lease was lost (or whose shutdown grace ran
//!   out) for the whole worker, instead of one pending `cancelled()` Promise per task;
//! - `handlersTook(rows, seconds)` reports how long the loop's handlers ran, which sizes
//!   what the worker claims ahead of them.
//!
//! Every task stays an ordinary [`NativeTask`], so its transaction, the application's
//! completion statement and the failure finishes work exactly as for `next()`.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use queuebox_bridge::handout::{self, Handout};
use queuebox_bridge::json;
use queuebox_core as qb;

use crate::{NativeTask, NativeWorker, Typed};

/// The batch JavaScript receives: the tasks as objects, the messages as one JSON text.
fn to_js(handout: &Handout, tasks: Vec<qb::Task>) -> TaskBatch {
    let messages_json = json::messages_to_text(tasks.iter().map(|t| t.message()));
    let (first_seq, handed) = handout.hand_out(tasks);
    TaskBatch {
        tasks: handed
            .into_iter()
            .map(|h| NativeTask {
                task: h.task,
                done: h.done,
            })
            .collect(),
        messages_json,
        first_seq,
    }
}

/// Tasks handed out by one `nextBatch` call.
#[napi(object, object_from_js = false)]
pub struct TaskBatch {
    /// The tasks; `tasks[i]` has the sequence number `firstSeq + i` (mod 2^32), the number
    /// `nextCancelled()` reports.
    pub tasks: Vec<NativeTask>,
    /// The messages of `tasks`, in the same order, as one JSON array text (the shape of
    /// `NativeTask.messageJson()`).
    pub messages_json: String,
    pub first_seq: u32,
}

/// Why one task of `completeAll` did not complete: `code` is the core's kind name.
#[napi(object, object_from_js = false)]
pub struct FinishError {
    pub code: String,
    pub message: String,
}

#[napi]
impl NativeWorker {
    /// Up to `max` claimed tasks: waits for the first like `next()`, then takes whatever is
    /// already claimed while concurrency slots are free. `null` once shutdown has begun.
    #[napi]
    pub async fn next_batch(&self, max: u32) -> Typed<Option<TaskBatch>> {
        let tasks = self.worker.next_batch(max as usize).await;
        tasks
            .map(|tasks| (!tasks.is_empty()).then(|| to_js(&self.handout, tasks)))
            .into()
    }

    /// Completes `tasks` together (one batched statement for the plain ones; a task with its
    /// own transaction commits it), each under its own fence. Resolves to one entry per
    /// task, in order: `null` when it completed, otherwise why not (`claim_lost`,
    /// `cancelled`, `already_finished`, `database`, ...), which touches that task only.
    #[napi(ts_return_type = "Promise<Array<FinishError | null>>")]
    pub fn complete_all<'env>(
        &self,
        env: &'env Env,
        tasks: Vec<ClassInstance<'env, NativeTask>>,
    ) -> Result<PromiseRaw<'env, Vec<Option<FinishError>>>> {
        let owned: Vec<_> = tasks
            .iter()
            .map(|t| (t.task.clone(), t.done.clone()))
            .collect();
        env.spawn_future(async move {
            let results = handout::complete_all(owned).await;
            Ok(results
                .into_iter()
                .map(|r| {
                    r.err().map(|e| FinishError {
                        code: e.kind().as_str().to_string(),
                        message: e.to_string(),
                    })
                })
                .collect())
        })
    }

    /// How long `rows` handlers ran in all (`seconds`), which sizes what the worker claims
    /// ahead of them: the loop runs them out of the core's sight. A negative or non-finite
    /// time throws, naming `handlerSeconds`.
    #[napi]
    pub fn handlers_took(&self, rows: u32, seconds: f64) -> Typed<()> {
        handout::handlers_took(&self.worker, rows as usize, seconds).into()
    }

    /// The sequence numbers of handed-out tasks cancelled since the last call (lease lost
    /// or shutdown's grace over), waiting until there is one; empty once `closeCancelled()`
    /// was called.
    #[napi]
    pub async fn next_cancelled(&self) -> Vec<u32> {
        self.handout.next_cancelled().await
    }

    /// Ends `nextCancelled()`: its pending and later calls resolve empty (the run loop is over).
    #[napi]
    pub fn close_cancelled(&self) {
        self.handout.close();
    }
}
