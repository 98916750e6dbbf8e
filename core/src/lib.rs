//! # queuebox-core
//!
//! The one place QueueBox's protocol lives. The relay binary, the C ABI and every language
//! wrapper call into this crate; none of them re-implements a claim, a fence, a backoff or
//! a key rule. The rules that need no database (rows, keys, headers, trace context, retries,
//! leases, errors) are the `queuebox-protocol` crate (`core/protocol`), re-exported here
//! module by module; this crate adds the stores, the migrations and the pull worker on them.
//! The relay's YAML configuration is not protocol and lives in the relay's
//! `queuebox-config` crate (`relay/config`), so no binding links a YAML parser.
//! The FFI JSON glue and the conformance-vector runner the bindings share are not protocol
//! either: they live in `queuebox-bridge` (`bindings/bridge`).
//!
//! ## Module map
//!
//! | module | what it owns |
//! |---|---|
//! | [`message`] | rows and states: [`InboxMessage`], [`InboxState`], [`Consumption`], [`NewInboxMessage`] (from `queuebox-protocol`) |
//! | [`backend`] | the backend factory: a database URL → a [`backend::Database`] (pull store, relay store, migrations, pool gauges); the only place that reads URL schemes |
//! | [`store`] | the store interfaces ([`Store`], [`StoreTx`], [`store::relay::RelayStore`], the pool health a store reports) and one module per database: `store::postgres`, `store::sqlserver` (feature `sqlserver`; its URL forms are recognised in every build), each with its statements in one `sql` module |
//! | [`tls`] | the process-wide rustls crypto provider every TLS client installs first |
//! | [`worker`] | the pull worker: claim, lease renewal, LISTEN/NOTIFY wake-up, complete / retry / dead, shutdown, typed payloads ([`typed`]) |
//! | [`app_tx`] | the application's own transaction: the fenced completion and the outbox publish and the pull enqueue rendered for the application's driver ([`app_tx::Placeholder`]), and the sqlx entry points `complete_in`, `publish`, `publish_many`, `enqueue`, `enqueue_many` |
//! | [`lease`] | lease renewal (every third of the lease; a lost claim cancels its work), shared by the pull worker and the relay's outbox (from `queuebox-protocol`) |
//! | [`backoff`] | [`RetryPolicy`]: the retry schedule and dead-letter ceiling (from `queuebox-protocol`) |
//! | [`keys`] | idempotency-key extraction (header, JSONPath, broker message id, SHA-256 digest) and `AttributeRule`, the one key / event type / aggregate id rule of every source (from `queuebox-protocol`) |
//! | [`headers`] | stored headers, the four relay headers, correlation ids, error redaction (from `queuebox-protocol`) |
//! | [`trace`] | W3C trace context (`traceparent`, `tracestate`): validated at receipt, kept in the inbox row's columns, stamped on the relayed outbox row (from `queuebox-protocol`) |
//! | [`migrate`] | embedded migrations and their runners (`migrate::postgres`, `migrate::sqlserver`, which live with their stores) |
//! | [`schedule`] | periodic schedules (cron in a time zone, fixed intervals): the ticks, the missed-ticks policy, the one row per tick and the runner the relay and workers share |
//! | [`metrics`] | process-wide counters such as claims lost |
//! | [`error`] | [`Error`]: one variant per thing a caller can act on; [`ErrorKind`]: the one error-kind table (code and name) every binding and wrapper uses (from `queuebox-protocol`) |
//!
//! ## Example: a pull worker
//!
//! ```no_run
//! use queuebox_core::{Outcome, Worker, WorkerOptions};
//!
//! # async fn example() -> queuebox_core::Result<()> {
//! let worker = Worker::connect("postgres://localhost/app", WorkerOptions::new("orders")).await?;
//! worker
//!     .run(
//!         |task| async move {
//!             // Business write in the same transaction as the completion.
//!             task.execute("INSERT INTO orders_seen (id) VALUES ($1::uuid)",
//!                          &[task.message().id.to_string().into()]).await?;
//!             Ok(Outcome::Complete)
//!         },
//!         async { tokio::signal::ctrl_c().await.ok(); },
//!     )
//!     .await
//! # }
//! ```

//!
//! ## Example: enqueue a job in your own transaction
//!
//! ```no_run
//! use queuebox_core::{enqueue, EnqueueMessage};
//!
//! # async fn example(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! let mut tx = pool.begin().await?;
//! // … the application's own writes in `tx` …
//! let job = enqueue(
//!     &mut tx,
//!     &EnqueueMessage::new("emails", serde_json::json!({"user": 42}))
//!         .idempotency_key("welcome-42")
//!         .priority(10),
//! )
//! .await?;
//! // `job.is_duplicate()`: "welcome-42" was enqueued before; `job.id()` is that row's id.
//! tx.commit().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The row is a pull row of source `emails`, claimable by its workers once `tx` commits
//! (none after a rollback); within a source a higher priority is claimed first, and rows of
//! one aggregate keep their order whatever their priorities. [`app_tx`] renders the same
//! statement for every other driver and language.

#![forbid(unsafe_code)]

pub use queuebox_protocol::{backoff, error, headers, keys, lease, message, trace};

pub mod app_tx;
pub mod backend;
pub mod metrics;
pub mod migrate;
pub mod otlp;
pub mod schedule;
pub mod store;
#[cfg(feature = "postgres")]
pub mod tls;
pub mod worker;

#[cfg(feature = "postgres")]
pub use app_tx::{enqueue, enqueue_many, publish, publish_many};
pub use app_tx::{EnqueueMessage, OutboxMessage, Placeholder};
pub use backend::{Database, DatabaseSettings};
pub use backoff::{Decision, RetryPolicy};
pub use error::{Error, ErrorKind, Result};
pub use message::{
    ClaimRef, ClaimedRow, Consumption, InboxMessage, InboxState, InsertOutcome, NewInboxMessage,
    OutboxState,
};
pub use store::{SqlValue, Store, StoreTx};
pub use worker::{typed, HandlerError, Outcome, PayloadError, Task, Worker, WorkerOptions};

impl From<String> for SqlValue {
    fn from(s: String) -> Self {
        SqlValue::Text(s)
    }
}
impl From<&str> for SqlValue {
    fn from(s: &str) -> Self {
        SqlValue::Text(s.to_string())
    }
}
impl From<i64> for SqlValue {
    fn from(i: i64) -> Self {
        SqlValue::Int(i)
    }
}
impl From<bool> for SqlValue {
    fn from(b: bool) -> Self {
        SqlValue::Bool(b)
    }
}
