//! # queuebox-transform
//!
//! JSONata for the relay: message transforms on sources, routes and destinations, and the
//! key expressions of sources (`idempotencyKeyExpression`, `eventTypeExpression`,
//! `aggregateIdExpression`). Expressions are compiled once at start-up (a syntax error names
//! its configuration key) and evaluated per message under [`Limits`] — time, depth and
//! output size — so a hostile or runaway expression cannot stall a relay loop; exceeding a
//! bound is an [`EvalError`] that the transform's [`OnError`] strategy handles like any
//! other failure.
//!
//! The engine is the `jsonata-core` crate, a port of the jsonata-js reference that passes its
//! test suite; why it and not another is measured in `benchmarks/jsonata.md`.
//!
//! ## Module map
//!
//! | module | what it owns |
//! |---|---|
//! | `expression` | [`Expression`]: compile once, [`Expression::evaluate`] under [`Limits`] with [`Context`] |
//! | `limits` | [`Limits`]: timeout, depth, output bytes; the transform and key-expression defaults |
//! | `context` | [`Context`], [`InboxContext`]: `$messageId`, `$topic`, `$attempt`, `$timestamp`, `$source`, `$headers`, … |
//! | `transform` | [`Transform`], [`OnError`] (`Fail`/`Skip`/`Dead`), [`Applied`], [`apply_in_order`] (route, then destination) |
//! | `key` | [`KeyExpression`] and [`key_text`]: a result as key text, or no value |
//! | `error` | [`CompileError`] (names the key path), [`EvalError`] (one variant per bound) |
//! | `admin_test` | [`run_transform_test`]: the 200/400 answers of `POST /admin/transform/test` |
//!
//! ```
//! use queuebox_transform::{Applied, Context, Limits, OnError, Transform};
//! use serde_json::json;
//!
//! let t = Transform::compile(
//!     r#"{ "orderId": id, "attempt": $attempt }"#,
//!     "routes[0].transform.expression",
//!     Limits::TRANSFORM,
//!     OnError::Fail,
//! )?;
//! let vars = Context::outbox("0b7f…", "orders.created", 0, chrono::Utc::now());
//! assert_eq!(t.apply(json!({ "id": 7 }), &vars), Applied::Transformed(json!({ "orderId": 7, "attempt": 0 })));
//! # Ok::<(), queuebox_transform::CompileError>(())
//! ```

#![forbid(unsafe_code)]

mod admin_test;
mod context;
mod error;
mod expression;
mod key;
mod limits;
mod transform;

pub use admin_test::{
    run_transform_test, TransformTestRequest, TransformTestResponse, DEFAULT_TEST_TIMEOUT,
    DEFAULT_TEST_TOPIC,
};
pub use context::{Context, InboxContext};
pub use error::{CompileError, EvalError};
pub use expression::Expression;
pub use key::{key_text, KeyExpression};
pub use limits::Limits;
pub use transform::{apply_in_order, Applied, OnError, Transform, UnknownOnError, DEAD_REASON};
