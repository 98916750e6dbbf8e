//! `qb_worker_next_messages*` and `qb_message_batch_free`: a batch of tasks whose messages
//! cross as C structs of strings instead of JSON text, so a language reads each field where
//! the library wrote it and parses nothing (decoding each message's JSON was the
//! Go wrapper's largest single cost, with `encoding/json`). The hand-out is
//! `qb_worker_next_batch`'s (same core call, same slots); only the message format differs.
//!
//! All of a batch's text lives in one buffer owned by the batch; every [`QbStr`] points
//! into it, so one `qb_message_batch_free` releases everything but the tasks.

use std::ffi::{c_char, c_void};
use std::ptr;

use queuebox_core::{InboxMessage, Task};
use serde_json::Value;
use tokio::runtime::Handle;

use crate::batch::{hand_out, hand_out_blocking, HandOut};
use crate::boundary::release;
use crate::error::{QbError, QbStatus};
use crate::task::QbTask;

/// UTF-8 text the library owns: `len` bytes at `ptr`, **not** NUL-terminated. `ptr` is NULL
/// for a field the message does not have (an absent aggregate id, no trace context); an
/// empty string has a non-NULL `ptr` and `len == 0`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QbStr {
    pub ptr: *const c_char,
    pub len: usize,
}

/// One header of a message: name and value (a value that was not a JSON string is its JSON
/// text).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QbHeader {
    pub name: QbStr,
    pub value: QbStr,
}

/// A claimed message, field by field (the fields of `qb_task_message`'s JSON object).
/// Everything it points to belongs to its batch.
#[repr(C)]
pub struct QbMessage {
    /// The inbox row id (a UUID, lower-case hyphenated).
    pub id: QbStr,
    pub source: QbStr,
    pub idempotency_key: QbStr,
    /// NULL `ptr` when the row has none.
    pub aggregate_id: QbStr,
    /// NULL `ptr` when the row has none.
    pub event_type: QbStr,
    /// The payload as JSON text.
    pub payload_json: QbStr,
    /// `headers_len` headers (NULL when there are none).
    pub headers: *const QbHeader,
    pub headers_len: usize,
    /// Failed deliveries so far (0 on the first).
    pub attempt: i32,
    /// NULL `ptr` when the row has none.
    pub correlation_id: QbStr,
    /// When the row was stored: nanoseconds since the Unix epoch, UTC.
    pub created_at_unix_nanos: i64,
    /// The W3C trace context to continue the message's trace from (`qb_task_message`'s
    /// `trace`): NULL `ptr` when the row has none.
    pub traceparent: QbStr,
    /// NULL `ptr` when there is none (always when `traceparent` is absent).
    pub tracestate: QbStr,
}

/// Tasks handed out by one `qb_worker_next_messages*` call; `len == 0` means the worker is
/// stopping. Ownership as for `QbTaskBatch`:
/// - each `tasks[i]` belongs to the caller from hand-out on: finish it (or not) and release
///   it with `qb_task_free`;
/// - `tasks`, `messages` and all the text they point to belong to the batch and are released
///   together by `qb_message_batch_free` (which never frees a task). Copy what is needed
///   later before freeing the batch.
#[repr(C)]
pub struct QbMessageBatch {
    /// Number of tasks (and of messages).
    pub len: usize,
    /// `len` task handles.
    pub tasks: *mut *mut QbTask,
    /// `len` messages, `messages[i]` being the message of `tasks[i]`.
    pub messages: *const QbMessage,
    /// The library's storage behind `messages`; never read or written by the caller.
    pub storage: *mut c_void,
}

/// Fires once with a batch (owned by the receiver, never NULL on `QB_OK`; `len == 0` when
/// the worker is stopping) or with an error and `batch == NULL`.
pub type QbMessageBatchCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: QbStatus,
        batch: *mut QbMessageBatch,
        error: *mut QbError,
    ),
>;

/// What the struct of a batch points into: the text of every field, the headers of every
/// message, and the messages. Nothing here moves once the batch is built (the vectors are
/// never grown again), so the pointers stay valid until it is dropped.
struct Storage {
    /// UTF-8: every field pushed into it is a `str` or serde_json's output.
    _text: Vec<u8>,
    _headers: Vec<QbHeader>,
    messages: Vec<QbMessage>,
}

/// Where a field sits in the text buffer while it is still growing.
#[derive(Clone, Copy)]
enum Span {
    Absent,
    At(usize, usize),
}

/// One message's spans, turned into a [`QbMessage`] once the buffer is final.
struct Spans {
    id: Span,
    source: Span,
    idempotency_key: Span,
    aggregate_id: Span,
    event_type: Span,
    payload_json: Span,
    headers: (usize, usize),
    attempt: i32,
    correlation_id: Span,
    created_at_unix_nanos: i64,
    traceparent: Span,
    tracestate: Span,
}

fn push(text: &mut Vec<u8>, s: &str) -> Span {
    let at = text.len();
    text.extend_from_slice(s.as_bytes());
    Span::At(at, s.len())
}

fn push_opt(text: &mut Vec<u8>, s: Option<&str>) -> Span {
    s.map_or(Span::Absent, |s| push(text, s))
}

/// A JSON value's text, serialized straight into the buffer.
fn push_json(text: &mut Vec<u8>, v: &Value) -> Span {
    let at = text.len();
    // Writing into a Vec cannot fail, and a Value always serializes (as UTF-8).
    let _ = serde_json::to_writer(&mut *text, v);
    Span::At(at, text.len() - at)
}

/// A JSON value as header text: a string as itself, anything else as its JSON.
fn push_value(text: &mut Vec<u8>, v: &Value) -> Span {
    match v {
        Value::String(s) => push(text, s),
        other => push_json(text, other),
    }
}

fn spans(text: &mut Vec<u8>, header_spans: &mut Vec<(Span, Span)>, m: &InboxMessage) -> Spans {
    let first_header = header_spans.len();
    for (k, v) in &m.headers {
        let name = push(text, k);
        header_spans.push((name, push_value(text, v)));
    }
    let payload_json = push_json(text, &m.payload);
    Spans {
        id: push(
            text,
            m.id.hyphenated()
                .encode_lower(&mut uuid::Uuid::encode_buffer()),
        ),
        source: push(text, &m.source),
        idempotency_key: push(text, &m.idempotency_key),
        aggregate_id: push_opt(text, m.aggregate_id.as_deref()),
        event_type: push_opt(text, m.event_type.as_deref()),
        payload_json,
        headers: (first_header, m.headers.len()),
        attempt: m.attempt,
        correlation_id: push_opt(text, m.correlation_id.as_deref()),
        // Outside 1677–2262 the nanoseconds do not fit an i64: saturate rather than wrap.
        created_at_unix_nanos: m.created_at.timestamp_nanos_opt().unwrap_or(
            if m.created_at.timestamp() < 0 {
                i64::MIN
            } else {
                i64::MAX
            },
        ),
        traceparent: push_opt(text, m.trace.as_ref().map(|t| t.traceparent.as_str())),
        tracestate: push_opt(text, m.trace.as_ref().and_then(|t| t.tracestate.as_deref())),
    }
}

impl Storage {
    fn build(messages: &[&InboxMessage]) -> Box<Storage> {
        let mut text = Vec::with_capacity(messages.len() * 256);
        let mut header_spans = Vec::new();
        let spans: Vec<Spans> = messages
            .iter()
            .map(|m| spans(&mut text, &mut header_spans, m))
            .collect();
        // The buffer is final from here on: pointers into it stay valid.
        let base = text.as_ptr() as *const c_char;
        let s = |span: Span| match span {
            Span::Absent => QbStr {
                ptr: ptr::null(),
                len: 0,
            },
            // SAFETY: the span lies within `text`, which is not changed again.
            Span::At(at, len) => QbStr {
                ptr: unsafe { base.add(at) },
                len,
            },
        };
        let headers: Vec<QbHeader> = header_spans
            .iter()
            .map(|&(n, v)| QbHeader {
                name: s(n),
                value: s(v),
            })
            .collect();
        let messages = spans
            .iter()
            .map(|m| QbMessage {
                id: s(m.id),
                source: s(m.source),
                idempotency_key: s(m.idempotency_key),
                aggregate_id: s(m.aggregate_id),
                event_type: s(m.event_type),
                payload_json: s(m.payload_json),
                headers: if m.headers.1 == 0 {
                    ptr::null()
                } else {
                    // SAFETY: `headers` holds every message's headers; this one's start there.
                    unsafe { headers.as_ptr().add(m.headers.0) }
                },
                headers_len: m.headers.1,
                attempt: m.attempt,
                correlation_id: s(m.correlation_id),
                created_at_unix_nanos: m.created_at_unix_nanos,
                traceparent: s(m.traceparent),
                tracestate: s(m.tracestate),
            })
            .collect();
        Box::new(Storage {
            _text: text,
            _headers: headers,
            messages,
        })
    }
}

impl HandOut for QbMessageBatch {
    fn build(tasks: Vec<Task>, handle: &Handle) -> Box<QbMessageBatch> {
        let storage = Storage::build(&tasks.iter().map(Task::message).collect::<Vec<_>>());
        let handles: Vec<*mut QbTask> = tasks
            .into_iter()
            .map(|t| Box::into_raw(QbTask::boxed(t, handle.clone())))
            .collect();
        let len = handles.len();
        let messages = storage.messages.as_ptr();
        Box::new(QbMessageBatch {
            len,
            tasks: Box::into_raw(handles.into_boxed_slice()) as *mut *mut QbTask,
            messages,
            storage: Box::into_raw(storage) as *mut c_void,
        })
    }
    unsafe fn tasks(b: &Self) -> &[*mut QbTask] {
        std::slice::from_raw_parts(b.tasks, b.len)
    }
    unsafe fn free(batch: *mut Self) {
        qb_message_batch_free(batch)
    }
}

/// `qb_worker_next_batch` with the messages as [`QbMessage`] structs: waits for at least one
/// claimed row, then hands out up to `max` tasks (the first, plus whatever is already claimed
/// and waiting, as far as free concurrency slots allow). Returns at once; `callback` fires on
/// a runtime thread with the batch (see `QbMessageBatch` for who frees what).
///
/// # Safety
/// `worker` is live; `user_data` stays valid until the callback fired.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next_messages(
    worker: *const crate::worker::QbWorker,
    max: usize,
    callback: QbMessageBatchCallback,
    user_data: *mut c_void,
    out_error: *mut *mut QbError,
) -> QbStatus {
    hand_out::<QbMessageBatch>(worker, max, callback, user_data, out_error)
}

/// Blocking variant of `qb_worker_next_messages`: on `QB_OK`, `*out_batch` is the batch
/// (`len == 0` when the worker is stopping); release it with `qb_message_batch_free` after
/// taking the tasks and reading the messages.
///
/// # Safety
/// `worker` is live; `out_batch` is writable. Not on a runtime thread.
#[no_mangle]
pub unsafe extern "C" fn qb_worker_next_messages_blocking(
    worker: *const crate::worker::QbWorker,
    max: usize,
    out_batch: *mut *mut QbMessageBatch,
    out_error: *mut *mut QbError,
) -> QbStatus {
    hand_out_blocking(worker, max, out_batch, out_error)
}

/// Releases a message batch: its task array, its messages and all their text, never its
/// tasks (they are the caller's). NULL is ignored. Does not block.
///
/// # Safety
/// `batch` is NULL or a batch the library returned and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn qb_message_batch_free(batch: *mut QbMessageBatch) {
    release(batch, |batch| {
        let b = Box::from_raw(batch);
        drop(Box::from_raw(b.storage as *mut Storage));
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(b.tasks, b.len)));
    });
}
