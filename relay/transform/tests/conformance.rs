//! The JSONata cases QueueBox's transforms rely on (tests/jsonata_cases.json:
//! paths, predicates, string and number functions, higher-order functions, constructors,
//! conditionals, `&`, `$exists`, time functions, the context variables, errors), each run
//! through the public API with the results jsonata-js gives.

use queuebox_transform::{Context, EvalError, Expression, InboxContext, Limits};
use serde_json::Value;

fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-9
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| numbers_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            // Key order matters in JSONata results ($keys, $string): compare it too.
            x.keys().eq(y.keys()) && x.iter().all(|(k, v)| numbers_equal(v, &y[k]))
        }
        _ => a == b,
    }
}

#[test]
fn documented_jsonata_cases_give_the_reference_results() {
    let all: Value = serde_json::from_str(include_str!("jsonata_cases.json")).unwrap();
    let doc = &all["doc"];
    let v = &all["vars"];
    let vars = Context::outbox(
        v["messageId"].as_str().unwrap(),
        v["topic"].as_str().unwrap(),
        v["attempt"].as_u64().unwrap() as u32,
        v["timestamp"].as_str().unwrap().parse().unwrap(),
    )
    .with_inbox(InboxContext {
        source: v["source"].as_str().unwrap().into(),
        headers: v["headers"].as_object().unwrap().clone(),
        idempotency_key: v["idempotencyKey"].as_str().unwrap().into(),
        event_type: v["eventType"].as_str().map(str::to_string),
    });
    let mut failures = Vec::new();
    let cases = all["cases"].as_array().unwrap();
    for case in cases {
        let src = case["expr"].as_str().unwrap();
        let compiled = Expression::compile(src, "case");
        if case.get("compile_error").is_some() {
            if compiled.is_ok() {
                failures.push(format!("{src}: compiled, expected a syntax error"));
            }
            continue;
        }
        let got = compiled.unwrap().evaluate(doc, &vars, Limits::TRANSFORM);
        let ok = if case.get("error").is_some() {
            matches!(got, Err(EvalError::Failed { .. }))
        } else if case.get("undefined").is_some() {
            got == Ok(None)
        } else {
            matches!(&got, Ok(Some(value)) if numbers_equal(value, &case["expect"]))
        };
        if !ok {
            failures.push(format!(
                "{src}: got {got:?}, expected {}",
                case.get("expect").unwrap_or(&Value::Null)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
