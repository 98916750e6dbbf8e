//! A configured transform (`transform: { expression, timeoutMs, maxDepth, onError }`) and
//! what its `onError` strategy makes of a failure.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde_json::Value;

use crate::{CompileError, Context, EvalError, Expression, Limits};

/// What happens to a message whose transform fails (`onError`, exact case: docs/relay.md, "Transforms and key expressions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum OnError {
    /// The delivery fails: the retry path, dead once the attempts are spent. At receipt the
    /// message is refused (422).
    #[default]
    Fail,
    /// The payload goes on untransformed.
    Skip,
    /// The message is dead at once. At receipt the message is refused (422).
    Dead,
}

impl OnError {
    /// The strategy's name as configured, and as the `strategy` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Fail => "Fail",
            OnError::Skip => "Skip",
            OnError::Dead => "Dead",
        }
    }

    /// Decides what becomes of a message from the transform's `result` and the payload the
    /// transform was given.
    pub fn apply(self, original: Value, result: Result<Value, EvalError>) -> Applied {
        match (result, self) {
            (Ok(payload), _) => Applied::Transformed(payload),
            (Err(error), OnError::Fail) => Applied::Retry(error),
            (Err(error), OnError::Skip) => Applied::Skipped { original, error },
            (Err(error), OnError::Dead) => Applied::Dead(error),
        }
    }
}

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value other than `Fail`, `Skip` or `Dead` (only the exact case is accepted, so a typo is not silently another strategy).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("onError must be Fail, Skip or Dead (exact case), not {0:?}")]
pub struct UnknownOnError(pub String);

impl FromStr for OnError {
    type Err = UnknownOnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Fail" => Ok(OnError::Fail),
            "Skip" => Ok(OnError::Skip),
            "Dead" => Ok(OnError::Dead),
            other => Err(UnknownOnError(other.to_string())),
        }
    }
}

/// What a transform made of one message, after its `onError` strategy.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The transform succeeded: deliver (or store) this payload.
    Transformed(Value),
    /// The transform failed under `Skip`: deliver the payload the transform was given.
    Skipped {
        /// The untransformed payload.
        original: Value,
        /// Why the transform failed, for the log line and the failure metric.
        error: EvalError,
    },
    /// The transform failed under `Fail`: the delivery goes down the retry path with
    /// [`Applied::last_error`] as its error text. At receipt: refused with
    /// [`Applied::rejection`] (422 on HTTP, stored dead on a broker source).
    Retry(EvalError),
    /// The transform failed under `Dead`: the row is dead with [`DEAD_REASON`]. At receipt:
    /// refused like `Retry`.
    Dead(EvalError),
}

/// The `last_error` of a row a transform dead-lettered (proto-docs/states.md#outbox).
pub const DEAD_REASON: &str = "Transform dead-lettered the message";

impl Applied {
    /// The payload to go on with, if the message goes on (`Transformed` or `Skipped`).
    pub fn payload(&self) -> Option<&Value> {
        match self {
            Applied::Transformed(payload)
            | Applied::Skipped {
                original: payload, ..
            } => Some(payload),
            Applied::Retry(_) | Applied::Dead(_) => None,
        }
    }

    /// The failure, if the transform failed (whatever the strategy made of it).
    pub fn error(&self) -> Option<&EvalError> {
        match self {
            Applied::Transformed(_) => None,
            Applied::Skipped { error, .. } | Applied::Retry(error) | Applied::Dead(error) => {
                Some(error)
            }
        }
    }

    /// The text for the outbox row's `last_error` when the message does not go on at
    /// delivery: `Transform failed: <reason>` for a retry, [`DEAD_REASON`] for a dead row.
    pub fn last_error(&self) -> Option<String> {
        match self {
            Applied::Retry(error) => Some(format!("Transform failed: {error}")),
            Applied::Dead(_) => Some(DEAD_REASON.to_string()),
            Applied::Transformed(_) | Applied::Skipped { .. } => None,
        }
    }

    /// The refusal at receipt when the message does not go on (`Fail` and `Dead` alike,
    /// proto-docs/ingest.md): `Transform failed: <reason>`, the `error` of the 422 body on
    /// an HTTP source and the `last_error` of the row a broker source stores dead.
    pub fn rejection(&self) -> Option<String> {
        match self {
            Applied::Retry(error) | Applied::Dead(error) => {
                Some(format!("Transform failed: {error}"))
            }
            Applied::Transformed(_) | Applied::Skipped { .. } => None,
        }
    }
}

/// A configured transform: its compiled expression, its limits and its strategy.
#[derive(Debug, Clone)]
pub struct Transform {
    /// The compiled `expression`.
    pub expression: Expression,
    /// `timeoutMs`, `maxDepth` and the output bound.
    pub limits: Limits,
    /// `onError`.
    pub on_error: OnError,
}

impl Transform {
    /// Compiles a transform; `key_path` is the key of its `expression`
    /// (`destinations.api.transform.expression`), named by a syntax error.
    pub fn compile(
        expression: &str,
        key_path: &str,
        limits: Limits,
        on_error: OnError,
    ) -> Result<Transform, CompileError> {
        Ok(Transform {
            expression: Expression::compile(expression, key_path)?,
            limits,
            on_error,
        })
    }

    /// Transforms `payload` and applies `onError` to a failure. A result of JSONata
    /// `undefined` is a failure ([`EvalError::NoResult`]): there would be nothing to send.
    pub fn apply(&self, payload: Value, vars: &Context) -> Applied {
        let result = self
            .expression
            .evaluate(&payload, vars, self.limits)
            .and_then(|v| v.ok_or(EvalError::NoResult));
        self.on_error.apply(payload, result)
    }
}

/// Runs transforms one after another (at delivery: the route's, then the destination's),
/// each on the previous one's payload. The first that stops the message (`Retry` or `Dead`)
/// ends the chain; a `Skipped` stage hands its own input on. `failures` receives each stage
/// that failed, whatever its strategy, for the log line and the failure metric.
pub fn apply_in_order<'a>(
    transforms: impl IntoIterator<Item = &'a Transform>,
    payload: Value,
    vars: &Context,
    mut failures: impl FnMut(&Transform, &EvalError),
) -> Applied {
    let mut current = Applied::Transformed(payload);
    for transform in transforms {
        let input = match current {
            Applied::Transformed(p) | Applied::Skipped { original: p, .. } => p,
            stop @ (Applied::Retry(_) | Applied::Dead(_)) => return stop,
        };
        current = transform.apply(input, vars);
        if let Some(error) = current.error() {
            failures(transform, error);
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(attempt: u32) -> Context {
        Context::outbox(
            "m-1",
            "orders.created",
            attempt,
            chrono::DateTime::UNIX_EPOCH,
        )
    }

    fn transform(expr: &str, on_error: OnError) -> Transform {
        Transform::compile(
            expr,
            "routes[0].transform.expression",
            Limits::TRANSFORM,
            on_error,
        )
        .unwrap()
    }

    #[test]
    fn on_error_accepts_the_exact_case_only() {
        assert_eq!("Skip".parse::<OnError>(), Ok(OnError::Skip));
        assert_eq!(
            "skip".parse::<OnError>(),
            Err(UnknownOnError("skip".into()))
        );
        assert_eq!(
            serde_json::from_value::<OnError>(json!("Dead")).unwrap(),
            OnError::Dead
        );
        assert!(serde_json::from_value::<OnError>(json!("DEAD")).is_err());
        assert_eq!(OnError::default(), OnError::Fail);
    }

    #[test]
    fn success_delivers_the_transformed_payload() {
        let applied = transform("{ \"id\": id, \"attempt\": $attempt }", OnError::Fail)
            .apply(json!({ "id": 7 }), &ctx(0));
        assert_eq!(
            applied,
            Applied::Transformed(json!({ "id": 7, "attempt": 0 }))
        );
        assert_eq!(applied.last_error(), None);
    }

    #[test]
    fn fail_goes_down_the_retry_path_with_the_error_text() {
        let applied = transform("$error(\"boom\")", OnError::Fail).apply(json!({}), &ctx(0));
        assert!(
            matches!(applied, Applied::Retry(EvalError::Failed { .. })),
            "{applied:?}"
        );
        assert_eq!(applied.payload(), None);
        let text = applied.last_error().unwrap();
        assert!(
            text.starts_with("Transform failed: ") && text.contains("boom"),
            "{text}"
        );
    }

    #[test]
    fn skip_delivers_the_original_payload() {
        let applied =
            transform("$error(\"boom\")", OnError::Skip).apply(json!({ "id": 7 }), &ctx(0));
        assert_eq!(applied.payload(), Some(&json!({ "id": 7 })));
        assert!(applied.error().is_some());
        assert_eq!(applied.last_error(), None);
    }

    #[test]
    fn dead_dead_letters_with_the_reference_reason() {
        let applied = transform("$error(\"boom\")", OnError::Dead).apply(json!({}), &ctx(0));
        assert!(matches!(applied, Applied::Dead(_)));
        assert_eq!(
            applied.last_error().as_deref(),
            Some("Transform dead-lettered the message")
        );
    }

    #[test]
    fn at_receipt_fail_and_dead_are_both_refused_with_the_reason() {
        for on_error in [OnError::Fail, OnError::Dead] {
            let applied =
                transform("$error(\"card declined\")", on_error).apply(json!({}), &ctx(0));
            let text = applied.rejection().unwrap();
            assert!(
                text.starts_with("Transform failed: ") && text.contains("card declined"),
                "{text}"
            );
        }
        let skipped =
            transform("$error(\"card declined\")", OnError::Skip).apply(json!({}), &ctx(0));
        assert_eq!(skipped.rejection(), None);
    }

    #[test]
    fn exceeding_a_limit_follows_on_error() {
        let mut t = transform(
            "(function($f){ $f($f) })(function($f){ $f($f) })",
            OnError::Skip,
        );
        t.limits.timeout = std::time::Duration::from_millis(20);
        match t.apply(json!({ "id": 7 }), &ctx(0)) {
            Applied::Skipped { original, error } => {
                assert_eq!(original, json!({ "id": 7 }));
                assert!(error.is_limit(), "{error:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undefined_result_is_a_failure() {
        let applied = transform("nothing.here", OnError::Fail).apply(json!({}), &ctx(0));
        assert_eq!(applied, Applied::Retry(EvalError::NoResult));
    }

    #[test]
    fn route_then_destination_transform_in_that_order() {
        let route = transform("$merge([$, { \"steps\": [\"route\"] }])", OnError::Fail);
        let destination = transform(
            "$merge([$, { \"steps\": $append(steps, \"destination\"), \"attempt\": $attempt }])",
            OnError::Fail,
        );
        let mut failed = 0;
        let applied = apply_in_order(
            [&route, &destination],
            json!({ "id": 1 }),
            &ctx(0),
            |_, _| failed += 1,
        );
        assert_eq!(
            applied,
            Applied::Transformed(
                json!({ "id": 1, "steps": ["route", "destination"], "attempt": 0 })
            )
        );
        assert_eq!(failed, 0);
    }

    #[test]
    fn a_failing_route_transform_stops_the_chain() {
        let route = transform("$error(\"route\")", OnError::Dead);
        let destination = transform("$error(\"never runs\")", OnError::Fail);
        let mut seen = Vec::new();
        let applied = apply_in_order([&route, &destination], json!({}), &ctx(0), |t, _| {
            seen.push(t.on_error)
        });
        assert!(matches!(applied, Applied::Dead(_)));
        assert_eq!(seen, [OnError::Dead]);
    }

    #[test]
    fn a_skipped_route_transform_hands_its_input_to_the_destination() {
        let route = transform("$error(\"route\")", OnError::Skip);
        let destination = transform("{ \"wrapped\": $ }", OnError::Fail);
        let mut seen = 0;
        let applied = apply_in_order(
            [&route, &destination],
            json!({ "id": 1 }),
            &ctx(0),
            |_, _| seen += 1,
        );
        assert_eq!(
            applied,
            Applied::Transformed(json!({ "wrapped": { "id": 1 } }))
        );
        assert_eq!(seen, 1);
    }
}
