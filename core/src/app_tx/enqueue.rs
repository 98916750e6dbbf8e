//! Pull rows an application enqueues in its own transaction: the one validation (each error
//! names `messages[i].field`) and the one statement, for both backends.
//!
//! The statement calls the migration-installed `queuebox_enqueue_many` (PostgreSQL function
//! of migration 11, SQL Server procedure of the same name), which inserts every new row and
//! reads back, in a statement of its own, the stored id of every message: a repeat of
//! `(source, idempotency_key)` — stored earlier, by a concurrent transaction that committed
//! while this one waited for it, or by an earlier message of the same call — inserts nothing
//! and comes back as that row's id with `duplicate` true. A single `INSERT … ON CONFLICT DO
//! NOTHING` with a `SELECT` in the same statement cannot see the concurrent row (the
//! statement's snapshot predates its commit), which is why the read is a second statement
//! inside the function (`core/migrations/postgres/0011_inbox_enqueue_many.sql`).
//!
//! The idempotency key is optional. Given, it is trimmed (as every key QueueBox extracts is,
//! `crate::keys`), must not be blank, and holds at most 255 characters without control
//! characters; the same key from an HTTP header and from `enqueue` is then one message.
//! Left out, the core makes it the row's id as text: the row is new every time, which is what
//! a job without a natural identity wants, and a key is never invented from the payload
//! (two equal payloads may be two jobs).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::message_fields::{check_timing, json_rows, JsonMessage, RowFields};
use super::placeholder::{render, Marker, Placeholder};
use super::{Expect, Statement};
use crate::error::{Error, Result};
use crate::headers;
use crate::message::{check_text, nul_path, InsertOutcome, MAX_CORRELATION_CHARS, MAX_KEY_CHARS};
use crate::store::{sql, Backend};

/// The highest priority; the lowest is its negative (the claim orders by `-priority`, which
/// the SMALLINT column's -32768 would overflow).
pub const MAX_PRIORITY: i16 = i16::MAX;

/// One pull row to enqueue. Only `source` and `payload` are required.
#[derive(Debug, Clone, PartialEq)]
pub struct EnqueueMessage {
    /// The pull source whose workers claim the row.
    pub source: String,
    pub payload: Value,
    /// Deduplication key within the source; the row's id when `None` (see the module doc).
    pub idempotency_key: Option<String>,
    /// Rows of one aggregate are handled one at a time, in enqueue order, whatever their
    /// priorities.
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub correlation_id: Option<String>,
    /// Stored with the row and handed to the handler; the inbox's header rules apply.
    pub headers: Map<String, Value>,
    /// Within the source a higher priority is claimed first (-32767 to 32767, default 0).
    pub priority: i16,
    /// The row's dead-letter ceiling; the worker's retry policy's when `None`.
    pub max_attempts: Option<u32>,
    /// Not claimable before this long after the insert (database clock).
    pub delay: Option<Duration>,
    /// Not claimable before this time. Not together with `delay`.
    pub scheduled_at: Option<DateTime<Utc>>,
}

impl EnqueueMessage {
    /// A message with no options.
    pub fn new(source: impl Into<String>, payload: Value) -> Self {
        EnqueueMessage {
            source: source.into(),
            payload,
            idempotency_key: None,
            aggregate_id: None,
            event_type: None,
            correlation_id: None,
            headers: Map::new(),
            priority: 0,
            max_attempts: None,
            delay: None,
            scheduled_at: None,
        }
    }

    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    pub fn aggregate_id(mut self, aggregate_id: impl Into<String>) -> Self {
        self.aggregate_id = Some(aggregate_id.into());
        self
    }

    pub fn event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    pub fn correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .insert(name.into(), Value::String(value.into()));
        self
    }

    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
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

    /// The key the row is stored under when one is given: trimmed, as `crate::keys` trims
    /// every key it extracts.
    fn given_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref().map(str::trim)
    }

    /// Checks every field; `at` is the message's name in errors (`messages[3]`).
    pub fn validate(&self, at: &str) -> Result<()> {
        check_text(&format!("{at}.source"), &self.source, MAX_KEY_CHARS, false)?;
        if let Some(k) = self.given_key() {
            if k.is_empty() {
                return Err(Error::InvalidInput(format!(
                    "{at}.idempotency_key is blank; leave it out to have one made (a new row each time)"
                )));
            }
            check_text(&format!("{at}.idempotency_key"), k, MAX_KEY_CHARS, false)?;
        }
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
        if let Some(a) = &self.aggregate_id {
            check_text(&format!("{at}.aggregate_id"), a, MAX_KEY_CHARS, true)?;
        }
        if let Some(e) = &self.event_type {
            check_text(&format!("{at}.event_type"), e, MAX_KEY_CHARS, true)?;
        }
        if let Some(c) = &self.correlation_id {
            check_text(
                &format!("{at}.correlation_id"),
                c,
                MAX_CORRELATION_CHARS,
                true,
            )?;
        }
        for (name, value) in &self.headers {
            let value = value.as_str().ok_or_else(|| {
                Error::InvalidInput(format!(
                    "{at}.headers.{name} must be a string (headers map names to string values)"
                ))
            })?;
            headers::check_field(name, value)
                .map_err(|e| Error::InvalidInput(format!("{at}.headers.{name}: {e}")))?;
        }
        if self.priority < -MAX_PRIORITY {
            return Err(Error::InvalidInput(format!(
                "{at}.priority must be between -{MAX_PRIORITY} and {MAX_PRIORITY}"
            )));
        }
        check_timing(at, self.max_attempts, self.delay, self.scheduled_at)
    }

    /// Reads one message of a wrapper's JSON array; unknown fields are refused (a typo such
    /// as `delay` must not enqueue without the delay).
    pub fn from_json(v: &Value, at: &str) -> Result<EnqueueMessage> {
        let f = JsonMessage::new(v, at, &FIELDS)?;
        let source = f.required_text("source")?;
        let payload = f.payload()?;
        let headers = f.headers()?;
        let priority = match f.get("priority") {
            None | Some(Value::Null) => 0,
            Some(n) => n
                .as_i64()
                .filter(|p| (-(MAX_PRIORITY as i64)..=MAX_PRIORITY as i64).contains(p))
                .map(|p| p as i16)
                .ok_or_else(|| {
                    f.bad(
                        "priority",
                        &format!(
                            "must be a whole number between -{MAX_PRIORITY} and {MAX_PRIORITY} (got {n})"
                        ),
                    )
                })?,
        };
        let max_attempts = f.max_attempts()?;
        let scheduled_at = f.scheduled_at()?;
        let m = EnqueueMessage {
            source,
            payload,
            idempotency_key: f.text("idempotency_key")?,
            aggregate_id: f.text("aggregate_id")?,
            event_type: f.text("event_type")?,
            correlation_id: f.text("correlation_id")?,
            headers,
            priority,
            max_attempts,
            delay: f.delay()?,
            scheduled_at,
        };
        m.validate(at)?;
        Ok(m)
    }
}

/// The fields of a message in a wrapper's JSON array.
const FIELDS: [&str; 11] = [
    "source",
    "payload",
    "idempotency_key",
    "aggregate_id",
    "event_type",
    "correlation_id",
    "headers",
    "priority",
    "max_attempts",
    "delay_ms",
    "scheduled_at",
];

/// Parses a wrapper's JSON array of messages to enqueue (`messages[i]` named in every error).
pub fn enqueue_messages_from_json(messages: &Value) -> Result<Vec<EnqueueMessage>> {
    let items = messages
        .as_array()
        .ok_or_else(|| Error::InvalidInput("messages must be a JSON array".into()))?;
    items
        .iter()
        .enumerate()
        .map(|(i, m)| EnqueueMessage::from_json(m, &format!("messages[{i}]")))
        .collect()
}

/// The enqueue of `messages` for `backend` in `style`: one statement whose result has one
/// row per message, in order, with columns `n` (the message's index), `id` (text on
/// PostgreSQL) and `duplicate` ([`Expect::EnqueueRows`]; read it with
/// [`read_enqueue_rows`]). Validates every message first. The rows become claimable when
/// the application's transaction commits; a rollback leaves none.
pub fn enqueue_statement(
    messages: &[EnqueueMessage],
    style: Placeholder,
    backend: Backend,
) -> Result<Statement> {
    // Time-ordered (UUIDv7), like the inbox's column default: migration 0008.
    let ids = messages.iter().map(|_| Uuid::now_v7()).collect();
    enqueue_statement_with_ids(messages, style, backend, ids)
}

/// [`enqueue_statement`] with the new rows' ids given (one per message): the conformance
/// vectors use it to get the same statement in every language. Applications let the core
/// make ids.
pub fn enqueue_statement_with_ids(
    messages: &[EnqueueMessage],
    style: Placeholder,
    backend: Backend,
    ids: Vec<Uuid>,
) -> Result<Statement> {
    render_enqueue(messages, Some(style), backend, ids)
}

/// [`enqueue_statement`] in the backend's own markers (`$1` on PostgreSQL, `@P1` on SQL
/// Server), as the core's stores bind them: the bindings' `Database.enqueue` runs it on
/// the store's own pool.
pub fn enqueue_statement_native(
    messages: &[EnqueueMessage],
    backend: Backend,
) -> Result<Statement> {
    let ids = messages.iter().map(|_| Uuid::now_v7()).collect();
    render_enqueue(messages, None, backend, ids)
}

fn render_enqueue(
    messages: &[EnqueueMessage],
    style: Option<Placeholder>,
    backend: Backend,
    ids: Vec<Uuid>,
) -> Result<Statement> {
    let rows = json_rows(messages, &ids, EnqueueMessage::validate, |_, id, m| {
        row_json(id, m, backend)
    })?;
    let (text, marker) = match backend {
        Backend::Postgres => (sql::postgres::ENQUEUE, Marker::Dollar),
        Backend::SqlServer => (sql::sqlserver::ENQUEUE, Marker::AtP),
    };
    let param = Some(rows);
    let (sql, params) = match style {
        Some(style) => render(text, marker, style, &[param]),
        None => (text.to_string(), vec![param]),
    };
    Ok(Statement {
        sql,
        params,
        expect: Expect::EnqueueRows,
        ids: Vec::new(),
    })
}

/// One element of the statement's JSON array. PostgreSQL reads payload and headers as
/// `jsonb`; SQL Server's `OPENJSON … WITH` reads them as text, so they travel as JSON text.
fn row_json(id: Uuid, m: &EnqueueMessage, backend: Backend) -> Value {
    let f = RowFields::new(&m.payload, &m.headers, m.scheduled_at, m.delay, backend);
    // The key is made here, not by the database, so that the statement is the whole rule.
    let key = m
        .given_key()
        .map(str::to_string)
        .unwrap_or_else(|| id.to_string());
    // Keys in alphabetical order: the same text whether or not serde_json keeps insertion
    // order (see publish.rs).
    json!({
        "aggregate_id": m.aggregate_id,
        "correlation_id": m.correlation_id,
        "delay_ms": f.delay_ms,
        "event_type": m.event_type,
        "headers": f.headers,
        "id": id,
        "idempotency_key": key,
        "max_attempts": m.max_attempts,
        "payload": f.payload,
        "priority": m.priority,
        "scheduled_at": f.scheduled_at,
        "source": m.source,
    })
}

/// Reads the result of an enqueue statement: `rows` as `(n, id, duplicate)` in any order,
/// `count` the number of messages. Every message must have exactly one row.
pub fn read_enqueue_rows(rows: &[(i64, Uuid, bool)], count: usize) -> Result<Vec<InsertOutcome>> {
    let mut out: Vec<Option<InsertOutcome>> = vec![None; count];
    for &(n, id, duplicate) in rows {
        let slot = usize::try_from(n)
            .ok()
            .and_then(|n| out.get_mut(n))
            .ok_or_else(|| enqueue_mismatch(format!("row n = {n} for {count} messages")))?;
        *slot = Some(if duplicate {
            InsertOutcome::Duplicate(id)
        } else {
            InsertOutcome::Inserted(id)
        });
    }
    if rows.len() != count {
        return Err(enqueue_mismatch(format!(
            "{} rows for {count} messages",
            rows.len()
        )));
    }
    out.into_iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| enqueue_mismatch(format!("no row for message {i}"))))
        .collect()
}

fn enqueue_mismatch(message: String) -> Error {
    Error::Database {
        operation: "inbox enqueue",
        message: format!("the enqueue statement's result does not match its messages: {message}"),
        code: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named_with_its_message() {
        let v = json!([
            {"source": "s", "payload": 1},
            {"source": "s", "payload": 2},
            {"source": "s", "payload": 3, "priority": 40000}
        ]);
        let e = enqueue_messages_from_json(&v).unwrap_err().to_string();
        assert!(e.contains("messages[2].priority must be"), "{e}");
        let e =
            enqueue_messages_from_json(&json!([{"source": "s", "payload": 1, "priority": -32768}]))
                .unwrap_err()
                .to_string();
        assert!(e.contains("messages[0].priority"), "{e}");
        let e = enqueue_messages_from_json(&json!([{"source": "s", "payload": 1, "delay": 5}]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("messages[0].delay is not a field"), "{e}");
        let e = enqueue_messages_from_json(
            &json!([{"source": "s", "payload": 1, "idempotency_key": "  "}]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("messages[0].idempotency_key is blank"), "{e}");
        let e = enqueue_messages_from_json(
            &json!([{"source": "s", "payload": 1, "headers": {"x": "a\nb"}}]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("messages[0].headers.x"), "{e}");
        let e = enqueue_messages_from_json(&json!([{"source": "", "payload": 1}]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("messages[0].source"), "{e}");
        let e =
            enqueue_messages_from_json(&json!([{"source": "s", "payload": 1, "max_attempts": 0}]))
                .unwrap_err()
                .to_string();
        assert!(e.contains("messages[0].max_attempts"), "{e}");
    }

    #[test]
    fn a_key_is_trimmed_and_a_missing_one_is_the_rows_id() {
        let id = Uuid::now_v7();
        let st = enqueue_statement_with_ids(
            &[EnqueueMessage::new("s", json!({})).idempotency_key(" k1 ")],
            Placeholder::Dollar,
            Backend::Postgres,
            vec![id],
        )
        .unwrap();
        let rows: Value = serde_json::from_str(st.params[0].as_deref().unwrap()).unwrap();
        assert_eq!(rows[0]["idempotency_key"], "k1");
        assert_eq!(rows[0]["priority"], 0);
        assert_eq!(st.expect, Expect::EnqueueRows);
        let st = enqueue_statement_with_ids(
            &[EnqueueMessage::new("s", json!({})).priority(-5)],
            Placeholder::Dollar,
            Backend::Postgres,
            vec![id],
        )
        .unwrap();
        let rows: Value = serde_json::from_str(st.params[0].as_deref().unwrap()).unwrap();
        assert_eq!(rows[0]["idempotency_key"], id.to_string());
        assert_eq!(rows[0]["priority"], -5);
    }

    #[test]
    fn result_rows_must_match_the_messages() {
        let a = Uuid::now_v7();
        let out = read_enqueue_rows(&[(1, a, true), (0, a, false)], 2).unwrap();
        assert_eq!(
            out,
            vec![InsertOutcome::Inserted(a), InsertOutcome::Duplicate(a)]
        );
        assert!(read_enqueue_rows(&[(0, a, false)], 2).is_err());
        assert!(read_enqueue_rows(&[(0, a, false), (0, a, false)], 2).is_err());
        assert!(read_enqueue_rows(&[(5, a, false)], 1).is_err());
    }
}
