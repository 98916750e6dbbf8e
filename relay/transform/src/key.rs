//! Key expressions (`idempotencyKeyExpression`, `eventTypeExpression`,
//! `aggregateIdExpression`): a JSONata expression over the original body whose result
//! becomes a text value, or no value (docs/relay.md, "Transforms and key expressions").

use serde_json::Value;

use crate::{CompileError, EvalError, Expression, Limits};

/// A compiled key expression, evaluated on the original body (before any source
/// transform) under [`Limits::KEY_EXPRESSION`].
#[derive(Debug, Clone)]
pub struct KeyExpression(Expression);

impl KeyExpression {
    /// Compiles `source`; a syntax error names `key_path`
    /// (`sources.orders.aggregateIdExpression`).
    pub fn compile(source: &str, key_path: &str) -> Result<KeyExpression, CompileError> {
        Expression::compile(source, key_path).map(KeyExpression)
    }

    /// The expression underneath.
    pub fn expression(&self) -> &Expression {
        &self.0
    }

    /// The key the expression gives for `body`: `Ok(None)` when its result is no value
    /// (see [`key_text`]). An `Err` also means no value; the relay logs one warning for
    /// it and goes on to the next way of finding the key.
    pub fn extract(&self, body: &Value) -> Result<Option<String>, EvalError> {
        Ok(self
            .0
            .evaluate_plain(body, Limits::KEY_EXPRESSION)?
            .as_ref()
            .and_then(key_text))
    }
}

/// The text of a key from an expression's result: a string trimmed, a number normalised
/// (`515725.0` → `515725`), a boolean as `true`/`false`; objects, arrays, `null` and blank
/// strings are no value. The same rule as the JSONPath key sources
/// ([`queuebox_core::keys::scalar_text`]), so an expression and a path that select the same
/// value give the same key.
pub fn key_text(value: &Value) -> Option<String> {
    queuebox_core::keys::scalar_text(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(expr: &str, body: Value) -> Option<String> {
        KeyExpression::compile(expr, "sources.s.idempotencyKeyExpression")
            .unwrap()
            .extract(&body)
            .unwrap()
    }

    #[test]
    fn aggregate_id_from_a_split_subject() {
        // Acceptance row 39 (tests/acceptance/README.md).
        assert_eq!(
            key(
                "$split(subject, \"/\")[2]",
                json!({ "subject": "orders/eu/515725" })
            )
            .as_deref(),
            Some("515725")
        );
    }

    #[test]
    fn numbers_are_normalised() {
        assert_eq!(
            key("n", json!({ "n": 515725.0 })).as_deref(),
            Some("515725")
        );
        assert_eq!(key("n", json!({ "n": 2.5 })).as_deref(), Some("2.5"));
        assert_eq!(key("n * 1", json!({ "n": -7 })).as_deref(), Some("-7"));
        assert_eq!(
            key("1e21", json!({})).as_deref(),
            Some("1000000000000000000000")
        );
    }

    #[test]
    fn strings_are_trimmed_and_booleans_become_text() {
        assert_eq!(
            key("k", json!({ "k": "  evt_1 " })).as_deref(),
            Some("evt_1")
        );
        assert_eq!(
            key("flag", json!({ "flag": true })).as_deref(),
            Some("true")
        );
    }

    #[test]
    fn objects_arrays_null_blank_and_missing_give_no_value() {
        for body in [
            json!({ "k": { "a": 1 } }),
            json!({ "k": [1, 2] }),
            json!({ "k": null }),
            json!({ "k": "   " }),
            json!({}),
        ] {
            assert_eq!(key("k", body.clone()), None, "{body}");
        }
    }

    #[test]
    fn a_failing_key_expression_is_an_error_not_a_key() {
        let expr =
            KeyExpression::compile("$error(\"no key\")", "sources.s.idempotencyKeyExpression")
                .unwrap();
        assert!(expr.extract(&json!({})).is_err());
    }

    #[test]
    fn key_expressions_run_under_the_fixed_limits() {
        let expr = KeyExpression::compile(
            "(function($f){ $f($f) })(function($f){ $f($f) })",
            "sources.s.eventTypeExpression",
        )
        .unwrap();
        let started = std::time::Instant::now();
        assert!(matches!(
            expr.extract(&json!({})),
            Err(EvalError::Timeout { .. })
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn syntax_error_names_the_key() {
        let err =
            KeyExpression::compile("$split(subject, ", "sources.orders.aggregateIdExpression")
                .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("sources.orders.aggregateIdExpression: "),
            "{err}"
        );
    }
}
