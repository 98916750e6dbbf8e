//! `qb_worker_next_batch` and `qb_tasks_complete`: the boundary crossed once per batch of
//! tasks instead of once per row. The core decides everything as for single
//! tasks (`Worker::next_batch`, `Task::complete_all`): each task of a batch keeps its own
//! permit, lease, fence and finish, so a lost claim affects only that task.

use std::ffi::{c_char, c_void};
use std::ptr;

use queuebox_core::{Task, Worker};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::boundary::{
    block, guard, handle_ref, into_c_string, out_arg, release, spawn_reply, Handover, Outcome,
    Reply,
};
use crate::error::{Failure, QbError, QbStatus};
use crate::task::QbTask;

/// Tasks handed out by one `qb_worker_next_batch*` call; `len == 0` means the worker is
/// stopping. Ownership is split on purpose, so that tasks can be finished and freed one by
/// one while the batch goes at once:
/// - each `tasks[i]` belongs to the caller from hand-out on, exactly like a task from
///   `qb_worker_next`: finish it (or not) and release it with `qb_task_free`;
/// - the two arrays and the `messages_json[i]` strings belong to the batch and are
///   released, all together, by `qb_task_batch_free` (which never frees a task). Copy a
///   message before freeing the batch if it is needed later.
#[repr(C)]
pub struct QbTaskBatch {
    /// Number of tasks (and of messages).
    pub len: usize,
    /// `len` task handles.
    pub tasks: *mut *mut QbTask,
    /// `len` NUL-terminated message JSON objects (the format of `qb_task_message`), in
    /// the order of `tasks`.
    pub messages_json: *mut *mut c_char,
}

/// Fires once with a batch (owned by the receiver, never NULL on `QB_OK`; `len == 0` when
/// the worker is stopping) or with an error and `batch == NULL`.
pub type QbTaskBatchCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        batch: *mut QbTaskBatch,
        error: *mut QbError,
    ),
>;

/// Fires once after `qb_tasks_complete`: `status` is the call's (QB_OK once the tasks were
/// finished, whatever each outcome); `results[i]` is the outcome of `tasks[i]` (QB_OK,
/// QB_ERR_CLAIM_LOST, QB_CANCELLED, QB_ERR_ALREADY_FINISHED, QB_ERR_DATABASE, ...).
/// `results` is valid only during the callback (NULL on error).
pub type QbTasksDoneCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        results: *const QbStatus,
        len: usize,
        error: *mut QbError,
    ),
>;

/// The function a `QbTasksDoneCallback` holds.
type TasksDone = unsafe extern "C" fn(*mut c_void, QbStatus, *const QbStatus, usize, *mut QbError);

/// A batch the hand-out builds for C: [`QbTaskBatch`] (messages as JSON) or
/// `QbMessageBatch` (messages as structs). Both hand out the same tasks; only the message
/// format differs, so the two entry points of each share [`hand_out`] and [`hand_out_blocking`].
pub(crate) trait HandOut: Sized {
    /// The batch of `tasks` (taken by the caller from here on), for the runtime of `handle`.
    fn build(tasks: Vec<Task>, handle: &Handle) -> Box<Self>;
    /// The tasks of a batch, for freeing a batch nobody received.
    unsafe fn tasks(batch: &Self) -> &[*mut QbTask];
    /// Releases the batch, never its tasks.
    unsafe fn free(batch: *mut Self);
}

impl HandOut for QbTaskBatch {
    fn build(tasks: Vec<Task>, handle: &Handle) -> Box<Self> {
        let len = tasks.len();
        let (handles, messages): (Vec<*mut QbTask>, Vec<*mut c_char>) = tasks
            .into_iter()
            .map(|task| {
                let json = queuebox_bridge::json::message_to_text(task.message());
                (
                    Box::into_raw(QbTask::boxed(task, handle.clone())),
                    into_c_string(json),
                )
            })
            .unzip();
        Box::new(QbTaskBatch {
            len,
            tasks: Box::into_raw(handles.into_boxed_slice()) as *mut *mut QbTask,
            messages_json: Box::into_raw(messages.into_boxed_slice()) as *mut *mut c_char,
        })
    }
    unsafe fn tasks(b: &Self) -> &[*mut QbTask] {
        std::slice::from_raw_parts(b.tasks, b.len)
    }
    unsafe fn free(batch: *mut Self) {
        qb_task_batch_free(batch)
    }
}

/// A batch (or NULL) on its way to a callback.
pub(crate) struct Batch<B>(*mut B);

impl<B: HandOut> Handover for Batch<B> {
    unsafe fn unclaimed(self) {
        // Nobody takes the tasks: free them (abandoned), then the batch.
        if let Some(b) = self.0.as_ref() {
            for &t in B::tasks(b) {
                crate::task::qb_task_free(t);
            }
        }
        B::free(self.0);
    }
}

/// The callback a batch of type `B` is delivered to.
pub(crate) type HandOutCallback<B> = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        batch: *mut B,
        error: *mut QbError,
    ),
>;

async fn next_tasks(w: Worker, max: usize) -> Outcome<Vec<Task>> {
    Ok(w.next_batch(max).await?)
}

fn max_arg(max: usize) -> Outcome<usize> {
    if max == 0 {
        return Err(Failure::invalid("max must be at least 1"));
    }
    Ok(max)
}

/// The async hand-out of either batch type: returns at once; `callback` fires on a runtime
/// thread with the batch, or, when it is NULL, the tasks are freed (abandoned) and the batch.
pub(crate) unsafe fn hand_out<B: HandOut + 'static>(
    worker: *const crate::worker::QbWorker,
    max: usize,
    callback: HandOutCallback<B>,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let max = max_arg(max)?;
        let handle = w.handle.clone();
        spawn_reply(
            &w.handle,
            next_tasks(w.worker.clone(), max),
            Reply::new(callback, user_data),
            move |tasks| {
                Batch(tasks.map_or(ptr::null_mut(), |t| Box::into_raw(B::build(t, &handle))))
            },
            |cb, ud, st, batch, err| cb(ud, st, batch.0, err),
        );
        Ok(())
    })
}

/// The blocking hand-out of either batch type into `*out_batch`.
pub(crate) unsafe fn hand_out_blocking<B: HandOut>(
    worker: *const crate::worker::QbWorker,
    max: usize,
    out_batch: *mut *mut B,
    out_error: *mut *mut QbError,
) -> QbStatus {
    crate::boundary::clear_out(out_batch);
    guard(out_error, || {
        let w = handle_ref(worker, "worker")?;
        let max = max_arg(max)?;
        let out = out_arg(out_batch, "out_batch")?;
        let tasks = block(&w.handle, next_tasks(w.worker.clone(), max))?;
        out.put(Box::into_raw(B::build(tasks, &w.handle)));
        Ok(())
    })
}

/// Waits for at least one claimed row, then hands out up to `max` tasks in one batch: the
/// first, plus whatever is already claimed and waiting (no further wait, no extra claim),
/// as far as free concurrency slots allow (at most `min(concurrency, batchSize)` tasks are
/// out at once, counting earlier batches). Returns at once; `callback` fires on a runtime
/// thread with the batch (see `QbTaskBatch` for who frees what).
///
/// # Safety
/// `worker` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next_batch(
    worker: *const crate::worker::QbWorker,
    max: usize,
    callback: QbTaskBatchCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    hand_out::<QbTaskBatch>(worker, max, callback, user_data, out_error)
}

/// Blocking variant of `qb_worker_next_batch`: on `QB_OK`, `*out_batch` is the batch
/// (`len == 0` when the worker is stopping); release it with `qb_task_batch_free` after
/// taking the tasks.
///
/// # Safety
/// `worker` is live; `out_batch` is writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next_batch_blocking(
    worker: *const crate::worker::QbWorker,
    max: usize,
    out_batch: *mut *mut QbTaskBatch,
    out_error: *mut *mut QbError,
) -> QbStatus {
    hand_out_blocking(worker, max, out_batch, out_error)
}

/// Releases a batch: its two arrays and its message strings, never its tasks (they are the
/// caller's; see `QbTaskBatch`). NULL is ignored. Does not block.
///
/// # Safety
/// `batch` is NULL or a batch the library returned and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn qb_task_batch_free(batch: *mut QbTaskBatch) {
    release(batch, |batch| {
        let b = Box::from_raw(batch);
        let messages = Box::from_raw(ptr::slice_from_raw_parts_mut(b.messages_json, b.len));
        for m in messages.iter() {
            crate::boundary::qb_string_free(*m);
        }
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(b.tasks, b.len)));
    });
}

/// What a batched finish needs from `len` handles: a clone of each core task (each holds
/// its own reference, so the handles may be freed as soon as the call returned), each
/// handle's "settled" token (ends its cancellation waits), and the runtime to run on.
struct Refs {
    tasks: Vec<Task>,
    settled: Vec<CancellationToken>,
    handle: Option<Handle>,
}

unsafe fn task_refs(tasks: *const *const QbTask, len: usize) -> Outcome<Refs> {
    let mut refs = Refs {
        tasks: Vec::with_capacity(len),
        settled: Vec::with_capacity(len),
        handle: None,
    };
    if len > 0 && tasks.is_null() {
        return Err(Failure::invalid("tasks is NULL"));
    }
    for i in 0..len {
        let t: &QbTask = handle_ref(*tasks.add(i), &format!("tasks[{i}]"))?;
        refs.tasks.push(t.task().clone());
        refs.settled.push(t.settled_token());
        refs.handle.get_or_insert_with(|| t.handle().clone());
    }
    Ok(refs)
}

/// Completes every task of the batch: the same as `qb_task_complete` on each at once (a
/// task with an open transaction commits it with its mark; the plain ones share one
/// batched statement), with one crossing and one callback. Each task keeps its own fence:
/// `results[i]` says how `tasks[i]` ended, and a lost claim touches no other task. The
/// handles may be freed as soon as this call returned. `callback` may be NULL when the
/// caller does not want the results (the core counts and logs lost claims either way).
///
/// # Safety
/// `tasks` points at `len` live task handles (it may be NULL when `len` is 0);
/// `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_tasks_complete(
    tasks: *const *const QbTask,
    len: usize,
    callback: QbTasksDoneCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let refs = task_refs(tasks, len)?;
        let reply = Reply::new(callback, user_data);
        let call = |cb: TasksDone, ud, st, results: Vec<QbStatus>, err| {
            let at = if results.is_empty() {
                ptr::null()
            } else {
                results.as_ptr()
            };
            cb(ud, st, at, results.len(), err)
        };
        match refs.handle {
            Some(h) => spawn_reply(
                &h,
                complete_all(refs.tasks, refs.settled),
                reply,
                Option::unwrap_or_default,
                call,
            ),
            // Nothing to complete: answer at once, on the calling thread.
            None => reply.send(QbStatus::QB_OK, Vec::new(), ptr::null_mut(), call),
        }
        Ok(())
    })
}

/// Blocking variant of `qb_tasks_complete`: `out_results` (NULL, or room for `len`
/// statuses) receives the outcome of each task.
///
/// # Safety
/// As `qb_tasks_complete`; `out_results` is NULL or writable for `len` values. Not on a
/// runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_tasks_complete_blocking(
    tasks: *const *const QbTask,
    len: usize,
    out_results: *mut QbStatus,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let refs = task_refs(tasks, len)?;
        let Some(h) = refs.handle else {
            return Ok(());
        };
        let results = block(&h, complete_all(refs.tasks, refs.settled))?;
        if !out_results.is_null() {
            ptr::copy_nonoverlapping(results.as_ptr(), out_results, results.len());
        }
        Ok(())
    })
}

async fn complete_all(tasks: Vec<Task>, settled: Vec<CancellationToken>) -> Outcome<Vec<QbStatus>> {
    let results = Task::complete_all(&tasks).await;
    for s in settled {
        s.cancel();
    }
    Ok(results
        .into_iter()
        .map(|r| match r {
            Ok(()) => QbStatus::QB_OK,
            Err(e) => Failure::from(e).status,
        })
        .collect())
}
