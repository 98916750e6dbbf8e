//! Transforms and key expressions in the relay (docs/relay.md, "Transforms and key expressions"): every
//! expression of the configuration compiled once at start-up into [`Transforms`], then
//! - at receipt: the key expressions over the original body ([`SourceExpressions::keys`],
//!   offered to the source's key chain) and the source transform ([`at_receipt`]);
//! - at delivery: the route's transform, then the destination's ([`at_delivery`]), whose
//!   failure the outbox relay writes through [`Stop`].
//!
//! Evaluations run on tokio's blocking pool: an expression may use up to its `timeoutMs`
//! of CPU, which must not stall the runtime threads that serve HTTP and the relay loops.
//! Each failure is logged, counted in `queuebox_transform_failures_total{stage, strategy}`
//! (`stage` = `source` | `route` | `destination`; `strategy` = `Fail` | `Skip` | `Dead`, the
//! reference's label) and handled by its `onError`.

use std::collections::HashMap;
use std::sync::Arc;

use queuebox_config::{key_expression, Config, RouteConfig};
use queuebox_transform::{apply_in_order, Applied, Context, KeyExpression, Transform};
use serde_json::Value;

use crate::destinations::OutboundMessage;
use crate::metrics::Metrics;
pub use crate::sources::http_rule::EvaluatedKeys;

/// Every compiled expression of the configuration.
#[derive(Default)]
pub struct Transforms {
    sources: HashMap<String, SourceExpressions>,
    /// By route index (`routes[i].transform`).
    routes: Vec<Option<Transform>>,
    destinations: HashMap<String, Transform>,
}

/// The expressions of one source.
#[derive(Default)]
pub struct SourceExpressions {
    pub transform: Option<Transform>,
    pub idempotency_key: Option<KeyExpression>,
    pub event_type: Option<KeyExpression>,
    pub aggregate_id: Option<KeyExpression>,
}

impl Transforms {
    /// Compiles every expression. Validation compiled them already (naming the key of each
    /// that does not), so an error here is a configuration the loader let through.
    pub fn compile(cfg: &Config) -> anyhow::Result<Transforms> {
        let fail =
            |p: queuebox_config::TransformProblem| anyhow::anyhow!("{}: {}", p.path, p.reason);
        let mut t = Transforms::default();
        for (name, s) in &cfg.sources {
            let transform = match &s.common.transform {
                Some(tc) => Some(
                    tc.compile(&format!("sources.{name}.transform"))
                        .map_err(fail)?,
                ),
                None => None,
            };
            t.sources.insert(
                name.clone(),
                SourceExpressions {
                    transform,
                    idempotency_key: key_expression(s, "idempotencyKeyExpression").map_err(fail)?,
                    event_type: key_expression(s, "eventTypeExpression").map_err(fail)?,
                    aggregate_id: key_expression(s, "aggregateIdExpression").map_err(fail)?,
                },
            );
        }
        for (i, r) in cfg.routes.iter().enumerate() {
            let compiled = match &r.transform {
                Some(tc) => Some(
                    tc.compile(&format!("routes[{i}].transform"))
                        .map_err(fail)?,
                ),
                None => None,
            };
            t.routes.push(compiled);
        }
        for (name, d) in &cfg.destinations {
            if let Some(tc) = &d.transform {
                let compiled = tc
                    .compile(&format!("destinations.{name}.transform"))
                    .map_err(fail)?;
                t.destinations.insert(name.clone(), compiled);
            }
        }
        Ok(t)
    }

    /// The expressions of source `name`.
    pub fn source(&self, name: &str) -> Option<&SourceExpressions> {
        self.sources.get(name)
    }

    /// The transforms a message routed by `route` goes through, in order: the route's,
    /// then its destination's.
    fn chain(&self, cfg: &Config, route: &RouteConfig) -> Vec<Transform> {
        let by_route = cfg
            .routes
            .iter()
            .position(|r| std::ptr::eq(r, route))
            .and_then(|i| self.routes.get(i).cloned().flatten());
        by_route
            .into_iter()
            .chain(self.destinations.get(&route.destination).cloned())
            .collect()
    }
}

impl SourceExpressions {
    /// True when the source has at least one key expression.
    pub fn has_key_expressions(&self) -> bool {
        self.idempotency_key.is_some() || self.event_type.is_some() || self.aggregate_id.is_some()
    }

    /// Evaluates the key expressions over the original body (before the source transform).
    /// A failure is no value and one warning line, and the next way of finding the key is tried.
    pub fn keys(&self, source: &str, body: &Value) -> EvaluatedKeys {
        let eval = |x: &Option<KeyExpression>| {
            x.as_ref().map(|x| {
                let name = x.expression().key_path().to_string();
                let value = x.extract(body).unwrap_or_else(|e| {
                    tracing::warn!(source, key = %name, error = %e, "key expression failed; trying the next key source");
                    None
                });
                (name, value)
            })
        };
        EvaluatedKeys {
            idempotency_key: eval(&self.idempotency_key),
            event_type: eval(&self.event_type),
            aggregate_id: eval(&self.aggregate_id),
        }
    }
}

/// Runs `transform` on the blocking pool.
async fn run_blocking(
    transforms: Vec<Transform>,
    payload: Value,
    vars: Context,
) -> (Applied, Vec<(String, String, String)>) {
    tokio::task::spawn_blocking(move || {
        let mut failures = Vec::new();
        let applied = apply_in_order(&transforms, payload, &vars, |t, e| {
            failures.push((
                t.expression.key_path().to_string(),
                t.on_error.as_str().to_string(),
                e.to_string(),
            ));
        });
        (applied, failures)
    })
    .await
    .unwrap_or_else(|e| {
        // A panic inside the engine: a failure of the transform, not of the relay.
        (
            Applied::Retry(queuebox_transform::EvalError::Failed {
                code: None,
                message: format!("the transform panicked: {e}"),
            }),
            Vec::new(),
        )
    })
}

/// Logs and counts each failed stage: `source`, `route` or `destination`, read from the
/// key path the transform was compiled under.
fn report(metrics: &Metrics, message: &str, failures: &[(String, String, String)]) {
    for (key, strategy, error) in failures {
        let stage = if key.starts_with("sources.") {
            "source"
        } else if key.starts_with("routes[") {
            "route"
        } else {
            "destination"
        };
        metrics.inc(
            "queuebox_transform_failures_total",
            &[("stage", stage), ("strategy", strategy_label(strategy))],
        );
        tracing::warn!(stage, key = %key, strategy = %strategy, messageId = %message, error = %error, "transform failed");
    }
}

fn strategy_label(s: &str) -> &'static str {
    match s {
        "Skip" => "Skip",
        "Dead" => "Dead",
        _ => "Fail",
    }
}

/// The source transform at receipt: the payload to store, or the refusal
/// (`Transform failed: <reason>`, HTTP 422, nothing stored). `Skip` stores the original.
pub async fn at_receipt(
    transform: &Transform,
    metrics: &Metrics,
    payload: Value,
    vars: Context,
) -> Result<Value, String> {
    let message = vars.message_id.clone();
    let (applied, failures) = run_blocking(vec![transform.clone()], payload, vars).await;
    report(metrics, &message, &failures);
    match applied {
        Applied::Transformed(p) | Applied::Skipped { original: p, .. } => Ok(p),
        stop => Err(stop.rejection().unwrap_or_default()),
    }
}

/// Why a message does not go on at delivery: its `last_error`, and whether the row is
/// dead at once (`onError: Dead`) or goes down the retry path (`Fail`).
#[derive(Debug)]
pub struct Stop {
    pub last_error: String,
    pub dead: bool,
}

/// The route's transform, then the destination's, on `msg.payload`, with `$messageId`,
/// `$topic`, `$attempt` (failed deliveries so far) and `$timestamp`. `Ok` carries the
/// message to publish (its payload transformed, or the input of a skipped stage).
pub async fn at_delivery(
    transforms: &Arc<Transforms>,
    cfg: &Config,
    metrics: &Metrics,
    route: &RouteConfig,
    mut msg: OutboundMessage,
) -> Result<OutboundMessage, Stop> {
    let chain = transforms.chain(cfg, route);
    if chain.is_empty() {
        return Ok(msg);
    }
    let vars = Context::outbox(
        msg.id.to_string(),
        msg.topic.clone(),
        msg.attempt.max(0) as u32,
        chrono::Utc::now(),
    );
    let payload = std::mem::take(&mut msg.payload);
    let (applied, failures) = run_blocking(chain, payload, vars).await;
    report(metrics, &msg.id.to_string(), &failures);
    match applied {
        Applied::Transformed(p) | Applied::Skipped { original: p, .. } => {
            msg.payload = p;
            Ok(msg)
        }
        stop @ Applied::Dead(_) => Err(Stop {
            last_error: stop.last_error().unwrap_or_default(),
            dead: true,
        }),
        stop => Err(Stop {
            last_error: stop.last_error().unwrap_or_default(),
            dead: false,
        }),
    }
}
