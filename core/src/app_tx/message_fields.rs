//! What a published outbox message and an enqueued pull message share: the fields a wrapper's
//! JSON message is read from (`OutboxMessage::from_json`, `EnqueueMessage::from_json`), the
//! timing rules both validate, and how both statements carry their rows (one JSON array,
//! payload, headers and times in each backend's form), so the two cannot drift apart.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::Backend;

/// The longest delay: its seconds must fit SQL Server's `DATEADD` (an `INT`).
pub(super) const MAX_DELAY_MS: u64 = i32::MAX as u64 * 1000;

/// The timing rules of a message at `at` (`messages[3]`): max attempts between 1 and
/// `i32::MAX`, a delay or a scheduled time but not both, a delay within [`MAX_DELAY_MS`].
pub(super) fn check_timing(
    at: &str,
    max_attempts: Option<u32>,
    delay: Option<Duration>,
    scheduled_at: Option<DateTime<Utc>>,
) -> Result<()> {
    if max_attempts == Some(0) || max_attempts.is_some_and(|n| n > i32::MAX as u32) {
        return Err(Error::InvalidInput(format!(
            "{at}.max_attempts must be between 1 and {}",
            i32::MAX
        )));
    }
    if delay.is_some() && scheduled_at.is_some() {
        return Err(Error::InvalidInput(format!(
            "{at}: give delay_ms or scheduled_at, not both"
        )));
    }
    if delay.is_some_and(|d| d.as_millis() > MAX_DELAY_MS as u128) {
        return Err(Error::InvalidInput(format!(
            "{at}.delay_ms must be at most {MAX_DELAY_MS}"
        )));
    }
    Ok(())
}

/// One message of a wrapper's JSON array, its fields read with errors that name them
/// (`messages[3].delay_ms must be a whole number >= 0`).
pub(super) struct JsonMessage<'a> {
    obj: &'a Map<String, Value>,
    at: &'a str,
}

impl<'a> JsonMessage<'a> {
    /// `v` as a message at `at` whose fields are `fields`; an unknown field is refused (a typo
    /// such as `delay` must not be taken without the delay).
    pub(super) fn new(v: &'a Value, at: &'a str, fields: &[&str]) -> Result<Self> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::InvalidInput(format!("{at} must be a JSON object")))?;
        let m = JsonMessage { obj, at };
        for k in obj.keys() {
            if !fields.contains(&k.as_str()) {
                return Err(m.bad(
                    k,
                    &format!("is not a field of a message (one of {})", fields.join(", ")),
                ));
            }
        }
        Ok(m)
    }

    /// The field as it is, if present.
    pub(super) fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field)
    }

    /// An invalid-input error naming `field`.
    pub(super) fn bad(&self, field: &str, what: &str) -> Error {
        Error::InvalidInput(format!("{}.{field} {what}", self.at))
    }

    /// A string field; absent and null are `None`.
    pub(super) fn text(&self, field: &str) -> Result<Option<String>> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(field, "must be a string or null")),
        }
    }

    /// A string field that must be there.
    pub(super) fn required_text(&self, field: &str) -> Result<String> {
        self.text(field)?
            .ok_or_else(|| self.bad(field, "is required"))
    }

    /// A whole number >= 0; absent and null are `None`.
    pub(super) fn count(&self, field: &str) -> Result<Option<u64>> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.bad(field, "must be a whole number >= 0")),
        }
    }

    /// `payload`, required; JSON null is left to the message's own validation.
    pub(super) fn payload(&self) -> Result<Value> {
        self.obj
            .get("payload")
            .cloned()
            .ok_or_else(|| self.bad("payload", "is required"))
    }

    /// `headers`: an object (its values checked by the message's validation), or empty.
    pub(super) fn headers(&self) -> Result<Map<String, Value>> {
        match self.obj.get("headers") {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(_) => Err(self.bad("headers", "must be an object of strings or null")),
        }
    }

    /// `max_attempts` as the message holds it (its range is checked by [`check_timing`]).
    pub(super) fn max_attempts(&self) -> Result<Option<u32>> {
        match self.count("max_attempts")? {
            Some(n) if n > u32::MAX as u64 => Err(self.bad("max_attempts", "is too large")),
            n => Ok(n.map(|n| n as u32)),
        }
    }

    /// `delay_ms` as a duration.
    pub(super) fn delay(&self) -> Result<Option<Duration>> {
        Ok(self.count("delay_ms")?.map(Duration::from_millis))
    }

    /// `scheduled_at`, an RFC 3339 time.
    pub(super) fn scheduled_at(&self) -> Result<Option<DateTime<Utc>>> {
        match self.text("scheduled_at")? {
            None => Ok(None),
            Some(s) => Ok(Some(
                DateTime::parse_from_rfc3339(&s)
                    .map_err(|e| {
                        self.bad("scheduled_at", &format!("is not an RFC 3339 time ({e})"))
                    })?
                    .with_timezone(&Utc),
            )),
        }
    }
}

/// The statement's one parameter: a JSON array of one row per message, each validated at
/// `messages[i]` (the first bad one fails the whole statement) and built by `row` with its
/// index and its id. `ids` holds one id per message.
pub(super) fn json_rows<M>(
    messages: &[M],
    ids: &[Uuid],
    validate: impl Fn(&M, &str) -> Result<()>,
    row: impl Fn(usize, Uuid, &M) -> Value,
) -> Result<String> {
    if messages.is_empty() {
        return Err(Error::InvalidInput(
            "messages must hold at least one message".into(),
        ));
    }
    if ids.len() != messages.len() {
        return Err(Error::InvalidInput(format!(
            "ids: {} ids for {} messages",
            ids.len(),
            messages.len()
        )));
    }
    let mut rows = Vec::with_capacity(messages.len());
    for (i, (m, id)) in messages.iter().zip(ids).enumerate() {
        validate(m, &format!("messages[{i}]"))?;
        rows.push(row(i, *id, m));
    }
    Ok(Value::Array(rows).to_string())
}

/// A row's payload, headers and timing as the backend's statement reads them.
pub(super) struct RowFields {
    pub payload: Value,
    pub headers: Value,
    /// The scheduled time, if any: RFC 3339 for PostgreSQL, offset-less UTC for SQL Server's
    /// `DATETIME2`.
    pub scheduled_at: Option<String>,
    /// The delay in milliseconds (0 when none), absent when a time is scheduled.
    pub delay_ms: Option<u64>,
}

impl RowFields {
    /// PostgreSQL reads payload and headers as `jsonb`; SQL Server's `OPENJSON … WITH` reads
    /// them as text, so they travel as JSON text.
    pub(super) fn new(
        payload: &Value,
        headers: &Map<String, Value>,
        scheduled_at: Option<DateTime<Utc>>,
        delay: Option<Duration>,
        backend: Backend,
    ) -> RowFields {
        let headers = Value::Object(headers.clone());
        let (payload, headers) = match backend {
            Backend::Postgres => (payload.clone(), headers),
            Backend::SqlServer => (
                Value::String(payload.to_string()),
                Value::String(headers.to_string()),
            ),
        };
        let scheduled_at = scheduled_at.map(|t| match backend {
            Backend::Postgres => t.to_rfc3339_opts(SecondsFormat::Micros, true),
            // DATETIME2 columns hold UTC without an offset.
            Backend::SqlServer => t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        });
        let delay_ms = match (&scheduled_at, delay) {
            (Some(_), _) => None,
            (None, d) => Some(d.map_or(0, |d| d.as_millis() as u64)),
        };
        RowFields {
            payload,
            headers,
            scheduled_at,
            delay_ms,
        }
    }
}
