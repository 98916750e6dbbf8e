//! # queuebox-protocol
//!
//! QueueBox's protocol with no database driver: what a row is, which states it moves
//! through, how its idempotency key, headers and trace context are read and checked, when a
//! failed attempt is retried, and how a lease is kept. `queuebox-core` builds the stores and
//! the pull worker on it and re-exports every module under its own name
//! (`queuebox_core::keys` is this crate's [`keys`]), so users depend on the core alone. A
//! crate that needs only these rules links no database driver, HTTP client or exporter.
//!
//! ## Module map
//!
//! | module | what it owns |
//! |---|---|
//! | [`message`] | rows and states: [`InboxMessage`], [`InboxState`], [`Consumption`], [`NewInboxMessage`], and the text and NUL rules every stored column follows |
//! | [`keys`] | idempotency-key extraction (header, JSONPath, broker message id, SHA-256 digest) and `AttributeRule`, the one key / event type / aggregate id rule of every source |
//! | [`headers`] | stored headers, the four relay headers, correlation ids, error redaction |
//! | [`trace`] | W3C trace context (`traceparent`, `tracestate`): validated at receipt, kept in the inbox row's columns, stamped on the relayed outbox row |
//! | [`backoff`] | [`RetryPolicy`]: the retry schedule and dead-letter ceiling |
//! | [`lease`] | lease renewal (every third of the lease; a lost claim cancels its work), shared by the pull worker and the relay's outbox |
//! | [`error`] | [`Error`]: one variant per thing a caller can act on; [`ErrorKind`]: the one error-kind table (code and name) every binding and wrapper uses |
//!
//! The modules depend on each other in one direction only: `error` and `trace` on nothing
//! here, `headers` on `trace`, `keys` and `backoff` on `error`, `message` on those, `lease` on
//! `message`.

#![forbid(unsafe_code)]

pub mod backoff;
pub mod error;
pub mod headers;
pub mod keys;
pub mod lease;
pub mod message;
pub mod trace;

pub use backoff::{Decision, RetryPolicy};
pub use error::{Error, ErrorKind, Result};
pub use message::{
    ClaimRef, ClaimedRow, Consumption, InboxMessage, InboxState, InsertOutcome, NewInboxMessage,
    OutboxState,
};
