//! Compiling the configuration's JSONata (docs/relay.md, "Transforms and key expressions"):
//! the `transform` blocks of sources, routes and destinations ([`TransformConfig`], kept in
//! the model as configured text) and the key expressions of sources. [`expressions`] compiles
//! every one during validation, so that a syntax error stops start-up naming its key; the
//! relay compiles its own copies once at start-up with [`TransformConfig::compile`] and
//! [`key_expression`] (the same calls, so what validation accepted compiles again).

use std::time::Duration;

use crate::model::{Config, SourceConfig, TransformConfig};
use crate::strict::ConfigErrors;
use queuebox_transform::{CompileError, KeyExpression, Limits, OnError, Transform};

/// Longest `timeoutMs` a transform may set. A transform runs once per message on the
/// relay's blocking pool; a bound of minutes would let one hostile expression hold a
/// thread for that long per message.
pub const MAX_TRANSFORM_TIMEOUT_MS: u64 = 10_000;

/// Why a `transform` block does not compile, with the key path to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformProblem {
    pub path: String,
    pub reason: String,
}

impl TransformConfig {
    /// Compiles the block found at `path` (`routes[0].transform`).
    pub fn compile(&self, path: &str) -> Result<Transform, TransformProblem> {
        let on_error: OnError = self.on_error.parse().map_err(|e| TransformProblem {
            path: format!("{path}.onError"),
            reason: format!("{e}"),
        })?;
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TRANSFORM_TIMEOUT_MS {
            return Err(TransformProblem {
                path: format!("{path}.timeoutMs"),
                reason: format!(
                    "must be between 1 and {MAX_TRANSFORM_TIMEOUT_MS}, not {}",
                    self.timeout_ms
                ),
            });
        }
        if self.max_depth == 0 {
            return Err(TransformProblem {
                path: format!("{path}.maxDepth"),
                reason: "must be positive".into(),
            });
        }
        let limits = Limits {
            timeout: Duration::from_millis(self.timeout_ms),
            max_depth: self.max_depth,
            ..Limits::TRANSFORM
        };
        let key = format!("{path}.expression");
        Transform::compile(&self.expression, &key, limits, on_error).map_err(problem)
    }
}

fn problem(e: CompileError) -> TransformProblem {
    TransformProblem {
        path: e.key_path,
        reason: format!("invalid JSONata expression: {}", e.message),
    }
}

/// The key expressions of a source, each with its key name:
/// `idempotencyKeyExpression`, `eventTypeExpression`, `aggregateIdExpression`.
pub fn key_expressions(s: &SourceConfig) -> [(&'static str, Option<&str>); 3] {
    let c = &s.common;
    [
        (
            "idempotencyKeyExpression",
            c.idempotency_key_expression.as_deref(),
        ),
        ("eventTypeExpression", c.event_type_expression.as_deref()),
        (
            "aggregateIdExpression",
            c.aggregate_id_expression.as_deref(),
        ),
    ]
}

/// Compiles the key expression `key` (`aggregateIdExpression`) of source `s`, if set.
pub fn key_expression(
    s: &SourceConfig,
    key: &str,
) -> Result<Option<KeyExpression>, TransformProblem> {
    let Some((_, Some(text))) = key_expressions(s).into_iter().find(|(k, _)| *k == key) else {
        return Ok(None);
    };
    KeyExpression::compile(text, &format!("sources.{}.{key}", s.name))
        .map(Some)
        .map_err(problem)
}

/// Compiles every transform and key expression, reporting each that does not compile
/// under its key path: a configuration whose expressions do not all compile never starts.
pub(crate) fn expressions(c: &Config, errs: &mut ConfigErrors) {
    let mut check = |t: &Option<TransformConfig>, path: String| {
        if let Some(Err(p)) = t.as_ref().map(|t| t.compile(&path)) {
            errs.push(p.path, p.reason);
        }
    };
    for (i, r) in c.routes.iter().enumerate() {
        check(&r.transform, format!("routes[{i}].transform"));
    }
    for (name, d) in &c.destinations {
        check(&d.transform, format!("destinations.{name}.transform"));
    }
    for (name, s) in &c.sources {
        check(&s.common.transform, format!("sources.{name}.transform"));
    }
    for s in c.sources.values() {
        for (key, _) in key_expressions(s) {
            if let Err(p) = key_expression(s, key) {
                errs.push(p.path, p.reason);
            }
        }
    }
}
