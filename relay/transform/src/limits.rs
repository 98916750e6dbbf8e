//! The bounds one evaluation runs under, so that a hostile or runaway expression cannot
//! stall a relay loop or exhaust memory.

use std::time::Duration;

/// Bounds on one evaluation. Exceeding one is an [`crate::EvalError`] of its own kind
/// (`Timeout`, `TooDeep`, `TooLarge`), which the caller hands to `onError` like any other
/// failure.
///
/// What each bound covers, as measured in `benchmarks/jsonata.md`:
/// - `timeout` is checked by the engine at every expression node, every callback of a
///   higher-order function and every pass of a tail-call loop; infinite recursion stops
///   within a few milliseconds of it. A single built-in call over a large value finishes
///   before the check (e.g. `$pad("", 200000000)` takes about 1.6 s and 580 MB).
/// - `max_depth` bounds the evaluation stack (JSONata's own `stack` option): non-tail
///   recursion stops with `TooDeep` before the thread's stack is in danger.
/// - `max_output_bytes` bounds the serialised result, and also the length of any sequence
///   built during the evaluation (`[1..5000000]`), since each item of a sequence costs at
///   least one byte of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest wall-clock time one evaluation may take (`transform.timeoutMs`).
    pub timeout: Duration,
    /// Deepest evaluation stack (`transform.maxDepth`, default 100).
    pub max_depth: usize,
    /// Largest serialised result, and longest sequence built on the way.
    pub max_output_bytes: usize,
}

impl Limits {
    /// The transform defaults (`timeoutMs` 100, `maxDepth` 100), and the
    /// inbox body cap (1 MiB) as the largest payload a transform may produce.
    pub const TRANSFORM: Limits = Limits {
        timeout: Duration::from_millis(100),
        max_depth: 100,
        max_output_bytes: 1024 * 1024,
    };

    /// The fixed limits of key expressions (`idempotencyKeyExpression` …): 100 ms and depth
    /// 100. A key is at most 255 characters, so a result above 64 KiB is
    /// garbage however it is read.
    pub const KEY_EXPRESSION: Limits = Limits {
        timeout: Duration::from_millis(100),
        max_depth: 100,
        max_output_bytes: 64 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::TRANSFORM
    }
}
