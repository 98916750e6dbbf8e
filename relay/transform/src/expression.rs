//! One JSONata expression: parsed once at start-up, evaluated per message under
//! [`Limits`] with the [`Context`] variables bound.

use std::io::{self, Write};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use jsonata_core::ast::AstNode;
use jsonata_core::evaluator::{self, Evaluator, EvaluatorError, EvaluatorOptions};
use jsonata_core::value::JValue;
use serde_json::Value;

use crate::{CompileError, Context, EvalError, Limits};

/// A compiled JSONata expression. Cheap to clone and safe to share between threads: the
/// parsed tree is immutable, and each evaluation builds its own evaluator (the engine's
/// values are reference-counted and single-threaded, so nothing of one evaluation outlives
/// it or crosses threads).
#[derive(Clone)]
pub struct Expression {
    source: Arc<str>,
    key_path: Arc<str>,
    ast: Arc<AstNode>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("key_path", &self.key_path)
            .field("source", &self.source)
            .finish()
    }
}

impl Expression {
    /// Parses `source`. `key_path` is where it sits in the configuration
    /// (`routes[0].transform.expression`); a syntax error names it, so start-up can stop
    /// with a message that points at the offending key.
    pub fn compile(source: &str, key_path: &str) -> Result<Expression, CompileError> {
        let ast = jsonata_core::parser::parse(source).map_err(|e| CompileError {
            key_path: key_path.to_string(),
            message: e.to_string(),
        })?;
        Ok(Expression {
            source: source.into(),
            key_path: key_path.into(),
            ast: Arc::new(ast),
        })
    }

    /// The expression's text, as configured.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The configuration key the expression came from.
    pub fn key_path(&self) -> &str {
        &self.key_path
    }

    /// Evaluates the expression against `input` with the context variables of `vars`,
    /// within `limits`. JSONata's `undefined` (no match, no value) is `Ok(None)`; a
    /// transform turns it into [`EvalError::NoResult`], a key expression into "no key".
    ///
    /// The work is synchronous and CPU-bound; `limits.timeout` bounds it, so an async
    /// caller may run it inline when the timeout is short (the default is 100 ms).
    pub fn evaluate(
        &self,
        input: &Value,
        vars: &Context,
        limits: Limits,
    ) -> Result<Option<Value>, EvalError> {
        let mut context = evaluator::Context::new();
        for (name, value) in vars.bindings() {
            context.bind(name.to_string(), value);
        }
        self.evaluate_in(input, context, limits)
    }

    /// [`Expression::evaluate`] with no context variables: key expressions read the body
    /// alone.
    pub fn evaluate_plain(
        &self,
        input: &Value,
        limits: Limits,
    ) -> Result<Option<Value>, EvalError> {
        self.evaluate_in(input, evaluator::Context::new(), limits)
    }

    fn evaluate_in(
        &self,
        input: &Value,
        context: evaluator::Context,
        limits: Limits,
    ) -> Result<Option<Value>, EvalError> {
        let options = EvaluatorOptions {
            // The engine counts whole milliseconds; never let a sub-millisecond limit round
            // down to "no limit".
            timeout_ms: Some((limits.timeout.as_millis() as u64).max(1)),
            max_stack_depth: Some(limits.max_depth),
            // Each item of a sequence costs at least one byte of output, so no sequence
            // longer than the output bound can be needed.
            max_sequence_length: Some(limits.max_output_bytes),
            ..EvaluatorOptions::default()
        };
        let data = JValue::from(input.clone());
        // The engine can panic on values it does not expect (fuzz/README.md: `[0..1e19]`
        // overflowed its range arithmetic). A panic fails this evaluation, like any error,
        // so `onError` decides; the evaluator is dropped with it, nothing of it is reused.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            Evaluator::with_options(context, options).evaluate(&self.ast, &data)
        }))
        .map_err(|panic| EvalError::Failed {
            code: None,
            message: format!("the expression engine failed: {}", panic_text(&*panic)),
        })?
        .map_err(|e| classify(e, limits))?;
        if result.is_undefined() {
            return Ok(None);
        }
        to_json(&result, limits).map(Some)
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// Sorts the engine's error into the bound it hit, if it hit one.
fn classify(error: EvaluatorError, limits: Limits) -> EvalError {
    match error.code() {
        Some("D1012") => EvalError::Timeout {
            limit: limits.timeout,
        },
        // D1011: our `max_depth`; U1001: the engine's own hard stack backstop.
        Some("D1011") | Some("U1001") => EvalError::TooDeep {
            max_depth: limits.max_depth,
        },
        Some("D2015") => EvalError::TooLarge {
            limit_bytes: limits.max_output_bytes,
        },
        code => EvalError::Failed {
            code: code.map(str::to_string),
            message: error.message().to_string(),
        },
    }
}

/// Converts the engine's result to JSON, refusing it once its serialised form passes
/// `limits.max_output_bytes` (counted while writing, so an oversized result is never
/// built twice).
fn to_json(result: &JValue, limits: Limits) -> Result<Value, EvalError> {
    let mut counter = ByteBudget {
        left: limits.max_output_bytes,
    };
    if serde_json::to_writer(&mut counter, result).is_err() {
        return Err(EvalError::TooLarge {
            limit_bytes: limits.max_output_bytes,
        });
    }
    serde_json::to_value(result).map_err(|e| EvalError::Failed {
        code: None,
        message: format!("result is not JSON: {e}"),
    })
}

/// A writer that only counts, and fails once more than `left` bytes arrive.
struct ByteBudget {
    left: usize,
}

impl Write for ByteBudget {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.left = self
            .left
            .checked_sub(buf.len())
            .ok_or_else(|| io::Error::other("over the size limit"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn ctx() -> Context {
        Context::outbox("m-1", "orders.created", 0, chrono::DateTime::UNIX_EPOCH)
    }

    fn eval(src: &str, input: Value) -> Result<Option<Value>, EvalError> {
        Expression::compile(src, "t")
            .unwrap()
            .evaluate(&input, &ctx(), Limits::TRANSFORM)
    }

    /// Found by the fuzz target `transform`: a range end beyond i64 overflowed the engine's
    /// size arithmetic (a panic in debug builds; in release a wrapped size of 0 let
    /// `[-1e19..1e19]` push elements until memory ran out). Now a failed evaluation.
    #[test]
    fn a_range_beyond_i64_is_a_failed_evaluation() {
        for source in ["[0..1e19]", "[-1e19..1e19]", "[-1e19..0]", "[0..$.n]"] {
            let e = Expression::compile(source, "routes[0].transform.expression").unwrap();
            let r = e.evaluate_plain(&json!({"n": 1e19}), Limits::TRANSFORM);
            assert!(
                matches!(
                    r,
                    Err(EvalError::Failed { .. } | EvalError::TooLarge { .. })
                ),
                "{source}: {r:?}"
            );
        }
    }

    #[test]
    fn syntax_error_names_the_key_path() {
        let err = Expression::compile("items[", "routes[0].transform.expression").unwrap_err();
        assert_eq!(err.key_path, "routes[0].transform.expression");
        let text = err.to_string();
        assert!(
            text.starts_with("routes[0].transform.expression: invalid JSONata expression: "),
            "{text}"
        );
    }

    #[test]
    fn compiled_expression_is_shared_between_threads() {
        let expr = Expression::compile("{ \"n\": n * 2 }", "t").unwrap();
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let expr = expr.clone();
                std::thread::spawn(move || {
                    expr.evaluate(&json!({ "n": i }), &ctx(), Limits::TRANSFORM)
                        .unwrap()
                })
            })
            .collect();
        let got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            got,
            (0..4)
                .map(|i| Some(json!({ "n": i * 2 })))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn no_match_is_none() {
        assert_eq!(eval("nothing.here", json!({})), Ok(None));
    }

    #[test]
    fn error_function_is_a_failure_with_its_message() {
        match eval("$error(\"card declined\")", json!({})) {
            Err(EvalError::Failed { message, .. }) => {
                assert!(message.contains("card declined"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn type_error_keeps_its_jsonata_code() {
        match eval("1 + \"a\"", json!({})) {
            // T2002: the right side of `+` is not a number.
            Err(EvalError::Failed { code, .. }) => assert_eq!(code.as_deref(), Some("T2002")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn infinite_recursion_stops_at_the_timeout() {
        let limits = Limits {
            timeout: Duration::from_millis(50),
            ..Limits::TRANSFORM
        };
        let expr =
            Expression::compile("(function($f){ $f($f) })(function($f){ $f($f) })", "t").unwrap();
        let started = std::time::Instant::now();
        let err = expr.evaluate(&json!({}), &ctx(), limits).unwrap_err();
        assert_eq!(
            err,
            EvalError::Timeout {
                limit: Duration::from_millis(50)
            }
        );
        assert!(err.is_limit());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn deep_recursion_stops_at_max_depth() {
        let limits = Limits {
            max_depth: 100,
            ..Limits::TRANSFORM
        };
        let expr =
            Expression::compile("($f := function($n){ 1 + $f($n + 1) }; $f(0))", "t").unwrap();
        assert_eq!(
            expr.evaluate(&json!({}), &ctx(), limits),
            Err(EvalError::TooDeep { max_depth: 100 })
        );
    }

    #[test]
    fn deep_recursion_within_the_limit_runs_on_a_small_thread_stack() {
        // Relay loops run on tokio worker threads (2 MiB stacks); the engine grows its stack
        // on the heap instead of overflowing the thread's, so a generous max_depth is safe.
        let limits = Limits {
            max_depth: 5000,
            timeout: Duration::from_secs(5),
            ..Limits::TRANSFORM
        };
        let expr = Expression::compile(
            "($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(1000))",
            "t",
        )
        .unwrap();
        let result = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || expr.evaluate(&json!({}), &ctx(), limits))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(result, Ok(Some(json!(1000))));
    }

    #[test]
    fn long_sequence_is_too_large() {
        let limits = Limits {
            max_output_bytes: 1000,
            ..Limits::TRANSFORM
        };
        let expr = Expression::compile("$sum([1..5000])", "t").unwrap();
        assert_eq!(
            expr.evaluate(&json!({}), &ctx(), limits),
            Err(EvalError::TooLarge { limit_bytes: 1000 })
        );
    }

    #[test]
    fn result_over_max_output_bytes_is_too_large() {
        let limits = Limits {
            max_output_bytes: 100,
            ..Limits::TRANSFORM
        };
        let expr = Expression::compile("$pad(\"\", 200)", "t").unwrap();
        assert_eq!(
            expr.evaluate(&json!({}), &ctx(), limits),
            Err(EvalError::TooLarge { limit_bytes: 100 })
        );
        // The same expression fits under a larger bound.
        let fits = Limits {
            max_output_bytes: 300,
            ..Limits::TRANSFORM
        };
        assert_eq!(
            expr.evaluate(&json!({}), &ctx(), fits)
                .unwrap()
                .unwrap()
                .as_str()
                .unwrap()
                .len(),
            200
        );
    }

    #[test]
    fn huge_range_is_refused_without_allocating_it() {
        match eval("[1..100000000]", json!({})) {
            Err(EvalError::Failed { code, .. }) => assert_eq!(code.as_deref(), Some("D2014")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn whole_numbers_come_back_as_json_integers() {
        assert_eq!(
            eval("amount", json!({ "amount": 515725.0 })),
            Ok(Some(json!(515725)))
        );
        assert_eq!(
            eval("amount / 2", json!({ "amount": 5 })),
            Ok(Some(json!(2.5)))
        );
    }
}
