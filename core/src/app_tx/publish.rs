//! Outbox messages an application publishes in its own transaction: the one validation
//! (each error names `messages[i].field`) and the one insert statement, for both backends.
//! The core makes every row's id, so a wrapper returns it without reading a result set.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::message_fields::{check_timing, json_rows, JsonMessage, RowFields};
use super::placeholder::{render, Marker, Placeholder};
use super::{Expect, Statement};
use crate::error::{Error, Result};
use crate::headers;
use crate::message::{check_text, nul_path, MAX_KEY_CHARS};
use crate::store::names::Names;
use crate::store::{sql, Backend};

/// The dead-letter ceiling of a row published without one (the column's default).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// One outbox row to publish. Only `topic` and `payload` are required.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    pub topic: String,
    pub payload: Value,
    /// Ordering / partition key (`X-Message-Key`, the Kafka record key).
    pub key: Option<String>,
    /// Sent with the message; validated by the relay's header rules.
    pub headers: Map<String, Value>,
    pub aggregate_type: Option<String>,
    /// Dead-letter ceiling; [`DEFAULT_MAX_ATTEMPTS`] when `None`.
    pub max_attempts: Option<u32>,
    /// Not delivered before this long after the insert (database clock).
    pub delay: Option<Duration>,
    /// Not delivered before this time. Not together with `delay`.
    pub scheduled_at: Option<DateTime<Utc>>,
}

impl OutboxMessage {
    /// A message with no options.
    pub fn new(topic: impl Into<String>, payload: Value) -> Self {
        OutboxMessage {
            topic: topic.into(),
            payload,
            key: None,
            headers: Map::new(),
            aggregate_type: None,
            max_attempts: None,
            delay: None,
            scheduled_at: None,
        }
    }

    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .insert(name.into(), Value::String(value.into()));
        self
    }

    pub fn aggregate_type(mut self, aggregate_type: impl Into<String>) -> Self {
        self.aggregate_type = Some(aggregate_type.into());
        self
    }

    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled_at = Some(at);
        self
    }

    /// Checks every field; `at` is the message's name in errors (`messages[3]`).
    pub fn validate(&self, at: &str) -> Result<()> {
        check_text(&format!("{at}.topic"), &self.topic, MAX_KEY_CHARS, false)?;
        if self.payload.is_null() {
            return Err(Error::InvalidInput(format!(
                "{at}.payload is required (JSON null is not a payload)"
            )));
        }
        if let Some(path) = nul_path(&self.payload) {
            return Err(Error::InvalidInput(format!(
                "{at}.payload holds the character U+0000 (NUL) at {path}; the database cannot store it"
            )));
        }
        if let Some(k) = &self.key {
            check_text(&format!("{at}.key"), k, MAX_KEY_CHARS, true)?;
        }
        if let Some(a) = &self.aggregate_type {
            check_text(&format!("{at}.aggregate_type"), a, MAX_KEY_CHARS, true)?;
        }
        for (name, value) in &self.headers {
            let value = value.as_str().ok_or_else(|| {
                Error::InvalidInput(format!(
                    "{at}.headers.{name} must be a string (headers map names to string values)"
                ))
            })?;
            headers::publishable(name, value)
                .map_err(|e| Error::InvalidInput(format!("{at}.headers.{name}: {e}")))?;
        }
        check_timing(at, self.max_attempts, self.delay, self.scheduled_at)
    }

    /// Reads one message of a wrapper's JSON array; unknown fields are refused (a typo such
    /// as `delay` must not publish without the delay).
    pub fn from_json(v: &Value, at: &str) -> Result<OutboxMessage> {
        let f = JsonMessage::new(v, at, &FIELDS)?;
        let topic = f.required_text("topic")?;
        let payload = f.payload()?;
        let headers = f.headers()?;
        let max_attempts = f.max_attempts()?;
        let scheduled_at = f.scheduled_at()?;
        let m = OutboxMessage {
            topic,
            payload,
            key: f.text("key")?,
            headers,
            aggregate_type: f.text("aggregate_type")?,
            max_attempts,
            delay: f.delay()?,
            scheduled_at,
        };
        m.validate(at)?;
        Ok(m)
    }
}

/// The fields of a message in a wrapper's JSON array.
const FIELDS: [&str; 8] = [
    "topic",
    "payload",
    "key",
    "headers",
    "aggregate_type",
    "max_attempts",
    "delay_ms",
    "scheduled_at",
];

/// Parses a wrapper's JSON array of messages (`messages[i]` named in every error).
pub fn messages_from_json(messages: &Value) -> Result<Vec<OutboxMessage>> {
    let items = messages
        .as_array()
        .ok_or_else(|| Error::InvalidInput("messages must be a JSON array".into()))?;
    items
        .iter()
        .enumerate()
        .map(|(i, m)| OutboxMessage::from_json(m, &format!("messages[{i}]")))
        .collect()
}

/// The insert of `messages` for `backend` in `style`, with a new id per row (returned in
/// order in [`Statement::ids`]). Validates every message first.
pub fn publish_statement(
    messages: &[OutboxMessage],
    style: Placeholder,
    backend: Backend,
) -> Result<Statement> {
    publish_statement_named(messages, style, backend, &Names::default())
}

/// [`publish_statement`] for an outbox table and columns named `names`.
pub fn publish_statement_named(
    messages: &[OutboxMessage],
    style: Placeholder,
    backend: Backend,
    names: &Names,
) -> Result<Statement> {
    // Time-ordered (UUIDv7), like the outbox's column default: migration 0008.
    let ids = messages.iter().map(|_| Uuid::now_v7()).collect();
    render_publish(messages, style, backend, names, ids)
}

/// [`publish_statement`] with the rows' ids given (one per message): the conformance vectors
/// use it to get the same statement in every language. Applications let the core make ids.
pub fn publish_statement_with_ids(
    messages: &[OutboxMessage],
    style: Placeholder,
    backend: Backend,
    ids: Vec<Uuid>,
) -> Result<Statement> {
    render_publish(messages, style, backend, &Names::default(), ids)
}

fn render_publish(
    messages: &[OutboxMessage],
    style: Placeholder,
    backend: Backend,
    names: &Names,
    ids: Vec<Uuid>,
) -> Result<Statement> {
    let rows = json_rows(messages, &ids, OutboxMessage::validate, |n, id, m| {
        row_json(n, id, m, backend)
    })?;
    let (sql, marker) = match backend {
        Backend::Postgres => (sql::postgres::PUBLISH, Marker::Dollar),
        Backend::SqlServer => (sql::sqlserver::PUBLISH, Marker::AtP),
    };
    let sql = names.render(backend, sql);
    let (sql, params) = render(&sql, marker, style, &[Some(rows)]);
    Ok(Statement {
        sql,
        params,
        expect: Expect::RowsAffected,
        ids,
    })
}

/// One element of the statement's JSON array.
fn row_json(n: usize, id: Uuid, m: &OutboxMessage, backend: Backend) -> Value {
    let f = RowFields::new(&m.payload, &m.headers, m.scheduled_at, m.delay, backend);
    // Keys in alphabetical order: the text is the same whether or not serde_json keeps
    // insertion order (a workspace build turns `preserve_order` on), so the conformance
    // vectors hold in every build.
    json!({
        "aggregate_type": m.aggregate_type,
        "delay_ms": f.delay_ms,
        "headers": f.headers,
        "id": id,
        "key": m.key,
        "max_attempts": m.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        "n": n,
        "payload": f.payload,
        "scheduled_at": f.scheduled_at,
        "topic": m.topic,
    })
}
