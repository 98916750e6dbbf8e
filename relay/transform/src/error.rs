//! The two ways an expression fails: it does not compile (a configuration problem, found at
//! start-up) or one evaluation fails (a per-message problem, handed to `onError`).

use std::time::Duration;

/// An expression that does not compile. Start-up refuses the configuration with this
/// error; it names the configuration key the expression came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key_path}: invalid JSONata expression: {message}")]
pub struct CompileError {
    /// Where the expression sits in the configuration, e.g. `routes[0].transform.expression`.
    pub key_path: String,
    /// The parser's message, with its JSONata code when it has one (`S0203: …`).
    pub message: String,
}

/// One evaluation that produced no usable result. Every variant is an `onError` case; the
/// three limit variants ([`EvalError::is_limit`]) mean the expression ran into a bound of
/// [`crate::Limits`] rather than failing by itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The expression raised an error: `$error("…")`, a type error, a bad argument.
    #[error("{message}")]
    Failed {
        /// The JSONata error code (`D3030`, `T2001`, …), when the engine gave one.
        code: Option<String>,
        /// The engine's message, code included.
        message: String,
    },
    /// The evaluation ran longer than [`crate::Limits::timeout`].
    #[error("evaluation exceeded the time limit of {} ms", .limit.as_millis())]
    Timeout {
        /// The limit that was exceeded.
        limit: Duration,
    },
    /// The evaluation nested deeper than [`crate::Limits::max_depth`] (runaway recursion).
    #[error("evaluation exceeded the depth limit of {max_depth}")]
    TooDeep {
        /// The limit that was exceeded.
        max_depth: usize,
    },
    /// The result, or a sequence built on the way, exceeded [`crate::Limits::max_output_bytes`].
    #[error("evaluation exceeded the size limit of {limit_bytes} bytes")]
    TooLarge {
        /// The limit that was exceeded.
        limit_bytes: usize,
    },
    /// The expression evaluated to nothing (JSONata's `undefined`), so there is no payload
    /// to deliver: a transform must produce a value.
    #[error("the expression produced no result")]
    NoResult,
}

impl EvalError {
    /// True when the evaluation hit one of [`crate::Limits`] (time, depth, size).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            EvalError::Timeout { .. } | EvalError::TooDeep { .. } | EvalError::TooLarge { .. }
        )
    }
}
