//! # queuebox-bridge
//!
//! What the three bindings of the core — the C ABI (`bindings/c`, used by Go and C#), Node
//! (`bindings/node`) and Python (`bindings/python`) — share, so that each binding is only
//! the conversion into its language's idioms: handles, promises or awaitables, and typed
//! errors. It decides nothing about the protocol (that is `queuebox-core`'s job, including
//! the rule that a cancelled task may only be abandoned); it maps JSON names, runs the
//! conformance vectors, and wraps the few database calls every binding offers.
//!
//! ## Module map
//!
//! | module | what it owns |
//! |---|---|
//! | [`app_tx`] | the application's own transaction: completion statement, claim lost, publish statement (JSON in and out) |
//! | [`json`] | worker options, statement parameters, messages, rows and counters as JSON |
//! | [`errors`] | what every binding hands over with an error besides its [`ErrorKind`] (the one kind table is the core's) |
//! | [`handout`] | tasks handed to a language in batches: numbering, one cancellation queue per worker, completing many at once |
//! | [`conformance`] | evaluates the JSON vectors of `proto-docs/vectors/` through the real core functions |
//! | [`logs`] | the core's `tracing` records forwarded to the binding's log sink (level filter in Rust) |
//! | [`migrate`] | `migrate`: the embedded migrations, run the one way every binding needs |
//! | [`database`] | [`database::Database`]: the small pool Node and Python enqueue pull rows, cancel pending rows and run statements with; [`database::cancel`] for the C ABI |
//!
//! Errors stay [`queuebox_core::Error`] here; each binding turns [`queuebox_core::Error::kind`]
//! into its own typed error (a `QB_ERR_*` status, a JavaScript `Error` whose `code` is the
//! kind name, a Python exception class per kind).

#![forbid(unsafe_code)]

pub mod app_tx;
pub mod conformance;
pub mod database;
pub mod errors;
pub mod handout;
pub mod json;
pub mod logs;
pub mod migrate;

pub use queuebox_core::{Error, ErrorKind, Result};
