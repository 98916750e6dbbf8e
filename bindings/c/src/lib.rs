//! # queuebox-c
//!
//! The C ABI over `queuebox-core`'s pull worker: the bridge crate between the core and the
//! Go and C# wrappers, and the only place with `unsafe` for them. It decides nothing about
//! the protocol; it converts handles, JSON, status codes and callbacks.
//!
//! | module | what it owns |
//! |---|---|
//! | [`error`] | `QbStatus`, the `QbError` object and `qb_error_free` |
//! | [`boundary`] | the panic guard, argument and out-parameter checks, blocking vs. callback paths, the NULL-safe release of every `*_free`, `qb_string_free` |
//! | [`callbacks`] | `QbCountCallback`, `QbDoneCallback`, `QbStringCallback`: the callback shapes several exports share, and how each is fired |
//! | [`runtime`] | `qb_runtime_*`: the tokio runtime callbacks fire on |
//! | [`worker`] | `qb_worker_*`: options JSON, connect, next, shutdown, stats |
//! | [`task`] | `qb_task_*`: message, transaction (execute/query), cancellation, finishes |
//! | [`batch`] | `qb_worker_next_batch*`, `qb_tasks_complete*`, `qb_task_batch_free`: the boundary crossed once per batch, not per row |
//! | [`message_batch`] | `qb_worker_next_messages*`, `qb_message_batch_free`: the same hand-out with each message as a C struct of strings, parsed by nobody |
//! | [`app_tx`] | `qb_task_completion_statement`, `qb_task_claim_lost`, `qb_publish_statement`: SQL for the application's own transaction |
//! | [`logs`] | `qb_set_log_callback`: the core's log records to one C callback |
//! | [`tools`] | `qb_conformance_evaluate`, `qb_migrate*`, `qb_cancel*`, `qb_version` |
//!
//! Rules (proto-docs/ffi.md has the full contract): opaque handles made by `*_new` (or
//! handed to a callback) and released by NULL-safe `*_free`; every call returns a
//! `QbStatus` and, on failure, a `QbError` through an out-parameter; no thread-local last
//! error; every export is behind `catch_unwind`; async calls return at once and fire a
//! callback with `user_data` from a runtime thread; `*_blocking` variants wait.

#![allow(clippy::missing_safety_doc)]

pub mod app_tx;
pub mod batch;
pub mod boundary;
pub mod callbacks;
pub mod error;
pub mod logs;
pub mod message_batch;
pub mod runtime;
pub mod task;
pub mod tools;
pub mod worker;

pub use error::{QbError, QbStatus};
pub use runtime::QbRuntime;
pub use task::QbTask;
pub use worker::{QbStats, QbWorker};
