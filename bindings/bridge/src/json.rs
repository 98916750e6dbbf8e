//! JSON across the boundary: worker options and statement parameters in, messages, rows and
//! counters out. The defaults and validation stay in [`WorkerOptions`] and [`RetryPolicy`]
//! of the core; this module only maps names.

use std::time::Duration;

use queuebox_core::store::names::Names;
use queuebox_core::store::{JsonRow, SqlValue};
use queuebox_core::worker::{StatsSnapshot, WorkerOptions};
use queuebox_core::{Decision, EnqueueMessage, Error, InboxMessage, Result, RetryPolicy};
use serde_json::{Map, Value};
use uuid::Uuid;

/// Parses JSON text handed over by a binding; `what` names it in the
/// [`Error::InvalidInput`] a malformed text gives (`"options is not JSON: ..."`).
pub fn parse(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::InvalidInput(format!("{what} is not JSON: {e}")))
}

/// Statement parameters from optional JSON text (see [`params_from_json`]).
pub fn params_from_text(text: Option<&str>) -> Result<Vec<SqlValue>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => params_from_json(&parse("parameters", t)?),
    }
}

/// Query rows as the JSON array text the bindings return.
pub fn rows_to_text(rows: Vec<JsonRow>) -> String {
    Value::Array(rows.into_iter().map(Value::Object).collect()).to_string()
}

/// `"retry"` or `"dead"`: what a failed handler's row became.
pub fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Retry(_) => "retry",
        Decision::Dead => "dead",
    }
}

fn config(path: impl Into<String>, reason: &str) -> Error {
    Error::Config {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Worker options from a JSON object with the client option names (`source`, `batchSize`,
/// `concurrency`, `leaseMs`, `pollIntervalMs`, `shutdownGraceMs`, `listen`, `retry:
/// {maxAttempts, baseDelayMs, maxDelayMs, jitter}`, `otlpEndpoint`, `handOut`: a wrapper whose
/// loop queues handed-out batches and reports handler times, `WorkerOptions::hand_out`;
/// `schedules`: an array of `core::schedule::Schedule::from_json` objects).
/// Missing keys keep the defaults; an
/// unknown key or a value of the wrong type is an [`Error::Config`] naming it. The result
/// is validated.
pub fn worker_options_from_json(v: &Value) -> Result<WorkerOptions> {
    let obj = v
        .as_object()
        .ok_or_else(|| config("options", "must be an object"))?;
    let source = match obj.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => {
            return Err(config("source", "is required and must not be blank"))
        }
        Some(_) => return Err(config("source", "must be a string")),
    };
    let mut o = WorkerOptions::new(source);
    for (key, val) in obj {
        match key.as_str() {
            "source" => {}
            // Absent or null: the core's adaptive batch (`WorkerOptions::batch`).
            "batchSize" => {
                o.batch_size = match val {
                    Value::Null => None,
                    v => Some(uint(key, v)?),
                }
            }
            "concurrency" => o.concurrency = uint(key, val)?,
            "leaseMs" => o.lease = millis(key, val)?,
            "pollIntervalMs" => o.poll_interval = millis(key, val)?,
            "shutdownGraceMs" => o.shutdown_grace = millis(key, val)?,
            "listen" => {
                o.listen = val
                    .as_bool()
                    .ok_or_else(|| config(key.as_str(), "must be a boolean"))?
            }
            "retry" => o.retry = retry_from_json(val)?,
            "handOut" => {
                o.hand_out = val
                    .as_bool()
                    .ok_or_else(|| config(key.as_str(), "must be a boolean"))?
            }
            // Checked by `WorkerOptions::validate`, naming the option.
            "otlpEndpoint" => {
                o.otlp_endpoint = Some(
                    val.as_str()
                        .ok_or_else(|| config(key.as_str(), "must be a string (a URL)"))?
                        .to_string(),
                )
            }
            // Periodic schedules the worker runs beside its claims (`core::schedule`).
            "schedules" => {
                o.schedules = match val {
                    Value::Null => Vec::new(),
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            queuebox_core::schedule::Schedule::from_json(
                                s,
                                &format!("schedules[{i}]"),
                            )
                        })
                        .collect::<Result<_>>()?,
                    _ => return Err(config(key.as_str(), "must be an array of schedules")),
                }
            }
            // An own schema's names, as the relay's `database` block spells them.
            "outboxTableName" | "inboxTableName" | "columnMapping" => {}
            other => return Err(config(other, "is not a worker option")),
        }
    }
    o.names = names_from_json(obj)?;
    o.validate()?;
    Ok(o)
}

/// [`worker_options_from_json`] for a worker whose tasks a language's own loop takes in
/// batches and runs `concurrency` at a time (`WorkerOptions::hand_out`): the Node and Python
/// bindings' workers, whose resolved options then name that worker's adaptive batch. (A C
/// ABI wrapper asks for the same with the `handOut` option.)
pub fn hand_out_options_from_json(v: &Value) -> Result<WorkerOptions> {
    Ok(WorkerOptions {
        hand_out: true,
        ..worker_options_from_json(v)?
    })
}

/// The effective options a binding's user reads ([`worker_options_to_json`]): without
/// `handOut`, which the Node and Python bindings set themselves and their users never do.
pub fn hand_out_options_to_json(o: &WorkerOptions) -> Value {
    let mut v = worker_options_to_json(o);
    if let Value::Object(obj) = &mut v {
        obj.remove("handOut");
    }
    v
}

/// An own schema's names from the options ([`Names::from_json`]); the core names the relay's
/// keys (`database.columnMapping.inbox.x`), here they are options of their own.
fn names_from_json(obj: &Map<String, Value>) -> Result<Names> {
    Names::from_json(obj).map_err(|e| match e {
        Error::Config { path, reason } => Error::Config {
            path: path.trim_start_matches("database.").to_string(),
            reason,
        },
        e => e,
    })
}

fn retry_from_json(v: &Value) -> Result<RetryPolicy> {
    let obj = v
        .as_object()
        .ok_or_else(|| config("retry", "must be an object"))?;
    let mut p = RetryPolicy::default();
    for (key, val) in obj {
        let path = format!("retry.{key}");
        match key.as_str() {
            "maxAttempts" => p.max_attempts = uint(&path, val)?,
            "baseDelayMs" => p.base_delay = millis(&path, val)?,
            "maxDelayMs" => p.max_delay = millis(&path, val)?,
            "jitter" => {
                p.jitter = val
                    .as_f64()
                    .ok_or_else(|| config(path.as_str(), "must be a number"))?
            }
            _ => return Err(config(path, "is not a retry option")),
        }
    }
    p.validate()?;
    Ok(p)
}

fn uint(path: &str, v: &Value) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| config(path, "must be a non-negative integer"))
}

fn millis(path: &str, v: &Value) -> Result<Duration> {
    v.as_u64()
        .map(Duration::from_millis)
        .ok_or_else(|| config(path, "must be a non-negative integer of milliseconds"))
}

/// The effective options with the same names [`worker_options_from_json`] reads (an own
/// schema's names only when set, so a wrapper that passes them back keeps them).
/// `batchSize` is the batch in force ([`WorkerOptions::batch`]), adaptive or explicit, so a
/// wrapper that reads it follows the core without computing it.
pub fn worker_options_to_json(o: &WorkerOptions) -> Value {
    let ms = |d: Duration| d.as_millis() as u64;
    let mut v = serde_json::json!({
        "source": o.source, "batchSize": o.batch(), "concurrency": o.concurrency,
        "leaseMs": ms(o.lease), "pollIntervalMs": ms(o.poll_interval), "shutdownGraceMs": ms(o.shutdown_grace),
        "listen": o.listen,
        "retry": {"maxAttempts": o.retry.max_attempts, "baseDelayMs": ms(o.retry.base_delay),
                  "maxDelayMs": ms(o.retry.max_delay), "jitter": o.retry.jitter},
    });
    if let Value::Object(obj) = &mut v {
        obj.extend(o.names.to_json());
        if let Some(e) = &o.otlp_endpoint {
            obj.insert("otlpEndpoint".into(), e.clone().into());
        }
        if o.hand_out {
            obj.insert("handOut".into(), true.into());
        }
        if !o.schedules.is_empty() {
            let s = o.schedules.iter().map(|s| s.to_json()).collect();
            obj.insert("schedules".into(), Value::Array(s));
        }
    }
    v
}

/// A worker's counters as a JSON object.
pub fn stats_to_json(s: &StatsSnapshot) -> Value {
    serde_json::json!({
        "claimed": s.claimed, "completed": s.completed, "retried": s.retried, "dead": s.dead,
        "released": s.released, "claimsLost": s.claims_lost, "claimErrors": s.claim_errors,
    })
}

/// A pull row to enqueue from the bindings' `Database.enqueue` object, whose keys are
/// camelCase (`idempotencyKey`, `aggregateId`, `eventType`, `correlationId`, `maxAttempts`,
/// `delayMs`, `scheduledAt`; `source`, `payload`, `headers`, `priority` as they are): renamed
/// to the core's field names and read by `EnqueueMessage::from_json`, the one enqueue rule.
pub fn enqueue_message_from_json(v: &Value) -> Result<EnqueueMessage> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::InvalidInput("message must be an object".into()))?;
    let renamed: serde_json::Map<String, Value> = obj
        .iter()
        .map(|(k, v)| {
            let k = match k.as_str() {
                "idempotencyKey" => "idempotency_key",
                "aggregateId" => "aggregate_id",
                "eventType" => "event_type",
                "correlationId" => "correlation_id",
                "maxAttempts" => "max_attempts",
                "delayMs" => "delay_ms",
                "scheduledAt" => "scheduled_at",
                other => other,
            };
            (k.to_string(), v.clone())
        })
        .collect();
    EnqueueMessage::from_json(&Value::Object(renamed), "message")
}

/// The `(n, id, duplicate)` rows of an enqueue statement run by a store (`id` as text on
/// PostgreSQL, a GUID on SQL Server; `duplicate` a boolean).
pub fn enqueue_rows(rows: &[serde_json::Map<String, Value>]) -> Result<Vec<(i64, Uuid, bool)>> {
    rows.iter()
        .map(|r| {
            let bad = || Error::Database {
                operation: "inbox enqueue",
                message: format!("an enqueue result row is not (n, id, duplicate): {r:?}"),
                code: None,
            };
            let n = r.get("n").and_then(Value::as_i64).ok_or_else(bad)?;
            let id = r
                .get("id")
                .and_then(Value::as_str)
                .and_then(|s| Uuid::parse_str(s).ok())
                .ok_or_else(bad)?;
            let duplicate = match r.get("duplicate") {
                Some(Value::Bool(b)) => *b,
                Some(Value::Number(n)) => n.as_i64() == Some(1),
                _ => return Err(bad()),
            };
            Ok((n, id, duplicate))
        })
        .collect()
}

/// Statement parameters from a JSON array (see [`SqlValue::from_json`]); `null` or a missing
/// array means none.
pub fn params_from_json(v: &Value) -> Result<Vec<SqlValue>> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => Ok(a.iter().map(SqlValue::from_json).collect()),
        _ => Err(Error::InvalidInput(
            "statement parameters must be an array".into(),
        )),
    }
}

/// The message as the JSON object text handed to a handler (camelCase field names),
/// written straight from the message: going through a `Value` first built a map and copied
/// the payload for every task handed out.
pub fn message_to_text(m: &InboxMessage) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

/// The messages of a batch handed to a language at once, as one JSON array text of the
/// objects [`message_to_text`] writes, so the language parses once per batch.
pub fn messages_to_text<'a>(messages: impl IntoIterator<Item = &'a InboxMessage>) -> String {
    let all: Vec<&InboxMessage> = messages.into_iter().collect();
    serde_json::to_string(&all).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_keys_keep_the_reference_defaults() {
        let o = worker_options_from_json(&json!({"source": "orders"})).unwrap();
        assert_eq!(o, WorkerOptions::new("orders"));
    }

    #[test]
    fn schedules_read_back_and_a_bad_one_names_its_index_and_key() {
        let v = json!({"source": "s", "schedules": [
            {"name": "a", "source": "jobs", "everyMs": 1000, "payload": {}},
            {"name": "b", "source": "jobs", "cron": "*/5 * * * *", "timeZone": "Europe/Oslo", "payload": 1}]});
        let o = worker_options_from_json(&v).unwrap();
        assert_eq!(o.schedules.len(), 2);
        let shown = worker_options_to_json(&o);
        assert_eq!(shown["schedules"][1]["timeZone"], json!("Europe/Oslo"));
        assert_eq!(
            worker_options_from_json(&shown).unwrap().schedules,
            o.schedules
        );
        let e = worker_options_from_json(&json!({"source": "s", "schedules": [
            {"name": "a", "source": "jobs", "everyMs": 1000, "payload": {}},
            {"name": "b", "source": "jobs", "cron": "* * *", "payload": {}}]}))
        .unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].cron"),
            "{e}"
        );
        let e = worker_options_from_json(&json!({"source": "s", "schedules": {}})).unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules"),
            "{e}"
        );
    }

    #[test]
    fn a_hand_out_worker_reports_its_larger_adaptive_batch_and_keeps_an_explicit_one() {
        let o = hand_out_options_from_json(&json!({"source": "s", "concurrency": 8})).unwrap();
        assert_eq!(
            (o.batch_size, o.batch(), o.handler_slots()),
            (None, 1024, 8)
        );
        assert_eq!(worker_options_to_json(&o)["batchSize"], json!(1024));
        let shown = hand_out_options_to_json(&o);
        assert!(
            shown.get("handOut").is_none(),
            "the binding's own flag: {shown}"
        );
        assert_eq!(shown["batchSize"], json!(1024));
        let o = hand_out_options_from_json(&json!({"source": "s", "batchSize": 50})).unwrap();
        assert_eq!((o.batch(), o.effective_concurrency()), (50, 50));
        let o = worker_options_from_json(&json!({"source": "s", "handOut": true})).unwrap();
        assert_eq!((o.hand_out, o.batch()), (true, 1024));
        assert_eq!(worker_options_to_json(&o)["handOut"], json!(true));
        assert_eq!(
            worker_options_from_json(&worker_options_to_json(&o)).unwrap(),
            WorkerOptions {
                batch_size: Some(1024),
                ..o
            }
        );
        let plain = worker_options_from_json(&json!({"source": "s", "handOut": false})).unwrap();
        assert!(!plain.hand_out && worker_options_to_json(&plain).get("handOut").is_none());
        let e = worker_options_from_json(&json!({"source": "s", "handOut": 1})).unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "handOut"),
            "{e}"
        );
        let e = hand_out_options_from_json(&json!({"source": "s", "batchSize": 0})).unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "batchSize"),
            "{e}"
        );
    }

    #[test]
    fn an_absent_batch_size_is_the_cores_adaptive_one_and_is_reported_resolved() {
        for v in [
            json!({"source": "s", "concurrency": 32}),
            json!({"source": "s", "concurrency": 32, "batchSize": null}),
        ] {
            let o = worker_options_from_json(&v).unwrap();
            assert_eq!(o.batch_size, None);
            assert_eq!((o.batch(), o.effective_concurrency()), (256, 32));
            assert_eq!(worker_options_to_json(&o)["batchSize"], json!(256));
        }
        let o =
            worker_options_from_json(&json!({"source": "s", "concurrency": 32, "batchSize": 10}))
                .unwrap();
        assert_eq!((o.batch_size, o.effective_concurrency()), (Some(10), 10));
        assert_eq!(worker_options_to_json(&o)["batchSize"], json!(10));
        let e = worker_options_from_json(&json!({"source": "s", "batchSize": 10_001})).unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "batchSize"),
            "{e}"
        );
    }

    #[test]
    fn worker_options_carry_an_own_schemas_names() {
        let o = worker_options_from_json(&json!({"source": "s", "inboxTableName": "app.user",
            "columnMapping": {"inbox": {"idempotencyKey": "key"}}}))
        .unwrap();
        assert_eq!(
            o.names.renamed_keys(),
            [
                "database.inboxTableName",
                "database.columnMapping.inbox.idempotencyKey"
            ]
        );
        let e = worker_options_from_json(&json!({"source": "s",
            "columnMapping": {"inbox": {"sourse": "src"}}}))
        .unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "columnMapping.inbox.sourse"),
            "{e}"
        );
    }

    #[test]
    fn the_otlp_endpoint_round_trips_and_a_bad_one_is_named() {
        let o = worker_options_from_json(&json!({"source": "s", "otlpEndpoint": "http://c:4318"}))
            .unwrap();
        assert_eq!(o.otlp_endpoint.as_deref(), Some("http://c:4318"));
        let back = worker_options_from_json(&worker_options_to_json(&o)).unwrap();
        assert_eq!(back.otlp_endpoint, o.otlp_endpoint);
        for bad in [json!("c:4318"), json!(4318)] {
            let e =
                worker_options_from_json(&json!({"source": "s", "otlpEndpoint": bad})).unwrap_err();
            assert!(
                matches!(&e, Error::Config { path, .. } if path == "otlpEndpoint"),
                "{e}"
            );
        }
    }

    #[test]
    fn every_option_maps_and_unknown_keys_are_named() {
        let o = worker_options_from_json(&json!({"source": "s", "batchSize": 100, "concurrency": 4, "leaseMs": 1500,
            "pollIntervalMs": 50, "shutdownGraceMs": 0, "listen": false, "retry": {"maxAttempts": 2, "baseDelayMs": 10, "maxDelayMs": 20, "jitter": 0}}))
        .unwrap();
        assert_eq!(
            (
                o.batch(),
                o.concurrency,
                o.lease,
                o.poll_interval,
                o.shutdown_grace,
                o.listen
            ),
            (
                100,
                4,
                Duration::from_millis(1500),
                Duration::from_millis(50),
                Duration::ZERO,
                false
            )
        );
        assert_eq!(
            o.retry,
            RetryPolicy {
                max_attempts: 2,
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(20),
                jitter: 0.0,
                ..RetryPolicy::default()
            }
        );
        let e = worker_options_from_json(&json!({"source": "s", "batchsize": 1})).unwrap_err();
        assert!(
            matches!(e, Error::Config { ref path, .. } if path == "batchsize"),
            "{e}"
        );
        let e = worker_options_from_json(&json!({"source": "s", "batchSize": 0})).unwrap_err();
        assert_eq!(e.kind(), queuebox_core::ErrorKind::Config, "{e}");
    }
}
