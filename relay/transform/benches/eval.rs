//! µs per evaluation of a typical route transform through this crate's API (JSON in, JSON
//! out, context variables bound, limits on), compiled once. Medians of rounds, as JSON on
//! stdout: `cargo bench -p queuebox-transform --bench eval [-- ROUNDS EVALS]`.

use std::time::Instant;

use queuebox_transform::{Applied, Context, Limits, OnError, Transform};
use serde_json::json;

const TYPICAL: &str = r#"{
  "orderId": $split(subject, "/")[2],
  "customer": customer.firstName & " " & customer.lastName,
  "email": $lowercase(customer.email),
  "lines": items.{ "sku": sku, "amount": price * qty },
  "total": $sum(items.(price * qty)),
  "big": $sum(items.(price * qty)) > 50,
  "tags": $join(tags, ","),
  "attempt": $attempt,
  "topic": $topic
}"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(7);
    let evals = args.get(1).copied().unwrap_or(20_000);
    let payload = json!({"id":"evt_1","type":"order.created","subject":"orders/eu/515725",
        "customer":{"firstName":"Ada","lastName":"Lovelace","email":"Ada@Example.com"},
        "items":[{"sku":"A1","price":5,"qty":2},{"sku":"B2","price":25.5,"qty":1},{"sku":"C3","price":12,"qty":3}],
        "total":"81.5","tags":["new","vip"],"meta":{"a":1},"extra":{"b":2},"amount":515725.0});
    let vars = Context::outbox(
        "0b7f3c1e-1111-4a2b-9c3d-000000000001",
        "orders.created",
        0,
        chrono::Utc::now(),
    );

    let started = Instant::now();
    let transform = Transform::compile(
        TYPICAL,
        "routes[0].transform.expression",
        Limits::TRANSFORM,
        OnError::Fail,
    )
    .unwrap();
    let compile_us = started.elapsed().as_secs_f64() * 1e6;
    assert!(matches!(
        transform.apply(payload.clone(), &vars),
        Applied::Transformed(_)
    ));

    let mut apply_us = Vec::new();
    let mut passthrough_us = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..evals {
            std::hint::black_box(transform.apply(payload.clone(), &vars));
        }
        apply_us.push(t.elapsed().as_secs_f64() * 1e6 / evals as f64);
        // The clone every caller pays anyway, to tell the engine's share apart.
        let t = Instant::now();
        for _ in 0..evals {
            std::hint::black_box(payload.clone());
        }
        passthrough_us.push(t.elapsed().as_secs_f64() * 1e6 / evals as f64);
    }
    let out = json!({
        "expression": TYPICAL,
        "rounds": rounds, "evals_per_round": evals,
        "compile_us": compile_us,
        "apply_us_median": median(apply_us.clone()), "apply_us_rounds": apply_us,
        "payload_clone_us_median": median(passthrough_us),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
