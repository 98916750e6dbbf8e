//! Rows and states: what an inbox row is, which states it moves through, and what a
//! caller hands the store to insert one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::headers;

// The column limits live with the rules that enforce them; they are named here too
// because a row's fields are checked against them.
pub use crate::headers::MAX_CORRELATION_CHARS;
pub use crate::keys::MAX_KEY_CHARS;

/// How a row leaves the inbox; fixed on the row at receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Consumption {
    /// The relay claims the row and forwards it into the outbox.
    #[default]
    Push,
    /// An application worker claims the row; the relay never touches it.
    Pull,
}

impl Consumption {
    pub fn as_str(self) -> &'static str {
        match self {
            Consumption::Push => "push",
            Consumption::Pull => "pull",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "push" => Some(Consumption::Push),
            "pull" => Some(Consumption::Pull),
            _ => None,
        }
    }
}

/// States of an inbox row. `processed`, `dead` and `cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InboxState {
    Pending,
    Processing,
    Processed,
    Dead,
    /// Cancelled while pending (`RelayStore::cancel`); kept for retention like `processed`.
    Cancelled,
}

impl InboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Pending => "pending",
            InboxState::Processing => "processing",
            InboxState::Processed => "processed",
            InboxState::Dead => "dead",
            InboxState::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(InboxState::Pending),
            "processing" => Some(InboxState::Processing),
            "processed" => Some(InboxState::Processed),
            "dead" => Some(InboxState::Dead),
            "cancelled" => Some(InboxState::Cancelled),
            _ => None,
        }
    }
}

/// States of an outbox row. `sent`, `dead` and `cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxState {
    Pending,
    Processing,
    Sent,
    Dead,
    /// Cancelled while pending (`RelayStore::cancel`); kept for retention like `sent`.
    Cancelled,
}

impl OutboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Processing => "processing",
            OutboxState::Sent => "sent",
            OutboxState::Dead => "dead",
            OutboxState::Cancelled => "cancelled",
        }
    }
}

/// A message handed to a pull handler: every column a handler may need, never the claim token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxMessage {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: Value,
    pub headers: Map<String, Value>,
    /// Failed attempts so far (0 on the first delivery).
    pub attempt: i32,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The W3C trace context the message arrived with (validated; `crate::trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
}

/// The fence of one claim: the row and the token the claim wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimRef {
    pub id: Uuid,
    pub token: Uuid,
}

/// A row returned by a claim: the message and its fence.
#[derive(Debug, Clone)]
pub struct ClaimedRow {
    pub message: InboxMessage,
    pub claim: ClaimRef,
    /// The row's own dead-letter ceiling (`max_attempts` of an enqueued row); `None`: the
    /// worker's retry policy decides.
    pub max_attempts: Option<u32>,
}

/// What a receiver hands the store to insert one inbox row.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInboxMessage {
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: Value,
    pub headers: Map<String, Value>,
    pub correlation_id: Option<String>,
    /// The validated W3C trace context ([`crate::trace::TraceContext::from_headers`]),
    /// stored in the row's own columns, not among `headers`.
    pub trace: Option<crate::trace::TraceContext>,
    pub consumption: Consumption,
    /// Insert directly as `dead` (a broker body that is not JSON); `last_error` says why.
    pub dead_reason: Option<String>,
    /// Hold the row until this much time after receipt (a source's `initialDelay`).
    pub delay: Option<std::time::Duration>,
}

impl NewInboxMessage {
    /// A pending message with no optional attributes.
    pub fn new(
        source: impl Into<String>,
        idempotency_key: impl Into<String>,
        payload: Value,
    ) -> Self {
        NewInboxMessage {
            source: source.into(),
            idempotency_key: idempotency_key.into(),
            aggregate_id: None,
            event_type: None,
            payload,
            headers: Map::new(),
            correlation_id: None,
            trace: None,
            consumption: Consumption::Push,
            dead_reason: None,
            delay: None,
        }
    }

    pub fn pull(mut self) -> Self {
        self.consumption = Consumption::Pull;
        self
    }

    pub fn aggregate(mut self, aggregate_id: impl Into<String>) -> Self {
        self.aggregate_id = Some(aggregate_id.into());
        self
    }

    /// Checks the column limits, naming the field that is too long or empty.
    pub fn validate(&self) -> Result<()> {
        check_text("source", &self.source, MAX_KEY_CHARS, false)?;
        check_text(
            "idempotency_key",
            &self.idempotency_key,
            MAX_KEY_CHARS,
            false,
        )?;
        if let Some(a) = &self.aggregate_id {
            check_text("aggregate_id", a, MAX_KEY_CHARS, true)?;
        }
        if let Some(e) = &self.event_type {
            check_text("event_type", e, MAX_KEY_CHARS, true)?;
        }
        if let Some(c) = &self.correlation_id {
            check_text("correlation_id", c, MAX_CORRELATION_CHARS, true)?;
        }
        if let Some(t) = &self.trace {
            t.check().map_err(Error::InvalidInput)?;
        }
        for (name, value) in &self.headers {
            let value = value.as_str().ok_or_else(|| {
                Error::InvalidInput("headers must map names to string values".into())
            })?;
            headers::check_field(name, value).map_err(Error::InvalidInput)?;
        }
        if let Some(at) = nul_path(&self.payload) {
            return Err(Error::InvalidInput(format!(
                "the payload holds the character U+0000 (NUL) at {at}; the database cannot store it (PostgreSQL refuses NUL in jsonb and text)"
            )));
        }
        Ok(())
    }

    /// Makes a message that failed [`validate`](Self::validate) storable as a `dead` row
    /// that says why: an unusable key becomes the digest of the received bytes, an unusable
    /// event type, aggregate id or correlation id is dropped, unsendable headers are dropped,
    /// and a payload the database cannot hold is kept as `{"rawBase64": …}` of the received
    /// bytes. Broker sources store such a message dead and acknowledge it, because a
    /// redelivery could not change it and a refusal would block the queue for ever.
    pub fn quarantine(&mut self, raw_body: &[u8], reason: &str) {
        self.dead_reason
            .get_or_insert_with(|| format!("{reason}; stored dead"));
        if check_text(
            "idempotency_key",
            &self.idempotency_key,
            MAX_KEY_CHARS,
            false,
        )
        .is_err()
        {
            self.idempotency_key = crate::keys::digest(raw_body);
        }
        let usable = |field: &str, v: &Option<String>, max: usize| {
            v.clone()
                .filter(|v| check_text(field, v, max, true).is_ok())
        };
        self.aggregate_id = usable("aggregate_id", &self.aggregate_id, MAX_KEY_CHARS);
        self.event_type = usable("event_type", &self.event_type, MAX_KEY_CHARS);
        self.correlation_id = usable(
            "correlation_id",
            &self.correlation_id,
            MAX_CORRELATION_CHARS,
        );
        self.trace = self.trace.take().filter(|t| t.check().is_ok());
        self.headers.retain(|k, v| {
            v.as_str()
                .is_some_and(|v| headers::check_field(k, v).is_ok())
        });
        if nul_path(&self.payload).is_some() {
            use base64::Engine as _;
            self.payload = serde_json::json!({ "rawBase64": base64::engine::general_purpose::STANDARD.encode(raw_body) });
        }
    }
}

/// Checks one text column: not blank (unless `empty_ok`), at most `max` characters, and no
/// control character — these values travel as header values (`x-idempotency-key`,
/// `X-Message-Key`) and topics, which cannot carry one, and PostgreSQL refuses U+0000.
pub fn check_text(field: &str, value: &str, max: usize, empty_ok: bool) -> Result<()> {
    if !empty_ok && value.trim().is_empty() {
        return Err(Error::InvalidInput(format!("{field} is empty")));
    }
    let n = value.chars().count();
    if n > max {
        return Err(Error::InvalidInput(format!(
            "{field} has {n} characters; the column holds {max}"
        )));
    }
    if let Some((at, c)) = headers::first_control(value) {
        return Err(Error::InvalidInput(format!(
            "{field} holds the control character U+{:04X} at character {at}; it travels as a header value, which cannot carry control characters",
            c as u32
        )));
    }
    Ok(())
}

/// Where in `value` a U+0000 sits (a JSONPath such as `$.items[2].name`), if anywhere, in a
/// string or an object key. Iterative: a deep document cannot exhaust the stack.
pub fn nul_path(value: &Value) -> Option<String> {
    let mut stack: Vec<(String, &Value)> = vec![("$".to_string(), value)];
    while let Some((path, v)) = stack.pop() {
        match v {
            Value::String(s) if s.contains('\0') => return Some(path),
            Value::Array(items) => stack.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (format!("{path}[{i}]"), item)),
            ),
            Value::Object(map) => {
                for (k, item) in map {
                    if k.contains('\0') {
                        return Some(format!("{path} (a key)"));
                    }
                    stack.push((format!("{path}.{k}"), item));
                }
            }
            _ => {}
        }
    }
    None
}

/// The result of an inbox insert: deduplication is an outcome, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new row was stored with this id.
    Inserted(Uuid),
    /// `(source, idempotency_key)` already existed; this is the id of the stored row.
    Duplicate(Uuid),
}

impl InsertOutcome {
    pub fn id(&self) -> Uuid {
        match self {
            InsertOutcome::Inserted(id) | InsertOutcome::Duplicate(id) => *id,
        }
    }
    pub fn is_duplicate(&self) -> bool {
        matches!(self, InsertOutcome::Duplicate(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The state and consumption names are the columns' values (and the states' JSON): each
    /// name reads back as its state, and an unknown one as none.
    #[test]
    fn state_names_are_the_column_values_and_read_back() {
        for c in [Consumption::Push, Consumption::Pull] {
            assert_eq!(Consumption::parse(c.as_str()), Some(c));
        }
        assert_eq!(
            (Consumption::Push.as_str(), Consumption::Pull.as_str()),
            ("push", "pull")
        );
        assert_eq!(Consumption::parse("Push"), None);
        for s in [
            InboxState::Pending,
            InboxState::Processing,
            InboxState::Processed,
            InboxState::Dead,
            InboxState::Cancelled,
        ] {
            assert_eq!(json!(s), json!(s.as_str()));
            assert_eq!(InboxState::parse(s.as_str()), Some(s));
        }
        assert_eq!(InboxState::parse("sent"), None);
        for s in [
            OutboxState::Pending,
            OutboxState::Processing,
            OutboxState::Sent,
            OutboxState::Dead,
            OutboxState::Cancelled,
        ] {
            assert_eq!(json!(s), json!(s.as_str()));
        }
    }

    /// A text column: blank is refused unless allowed, `max` characters (not bytes) fit and
    /// one more does not.
    #[test]
    fn text_columns_refuse_blank_and_over_long_values() {
        assert!(check_text("topic", "  ", 5, false).is_err());
        assert!(check_text("key", "", 5, true).is_ok());
        assert!(check_text("key", "ab", 5, false).is_ok());
        assert!(check_text("key", "ééééé", 5, false).is_ok());
        let err = check_text("key", "éééééé", 5, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("key has 6 characters; the column holds 5"),
            "{err}"
        );
    }

    #[test]
    fn an_insert_outcome_carries_its_row_id() {
        let id = Uuid::now_v7();
        assert_eq!(InsertOutcome::Inserted(id).id(), id);
        assert_eq!(InsertOutcome::Duplicate(id).id(), id);
        assert!(InsertOutcome::Duplicate(id).is_duplicate());
        assert!(!InsertOutcome::Inserted(id).is_duplicate());
    }

    #[test]
    fn a_key_with_a_control_character_is_refused_naming_the_field() {
        let m = NewInboxMessage::new("orders", "evt\u{1}1", json!({}));
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("idempotency_key") && e.contains("U+0001"), "{e}");
        let m = NewInboxMessage::new("orders", "k", json!({})).aggregate("acct\n9");
        assert!(m
            .validate()
            .unwrap_err()
            .to_string()
            .contains("aggregate_id"));
    }

    #[test]
    fn a_nul_in_the_payload_is_refused_with_its_path() {
        let m = NewInboxMessage::new("orders", "k", json!({"items": [{"name": "a\u{0}b"}]}));
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("U+0000") && e.contains("$.items[0].name"), "{e}");
    }

    #[test]
    fn quarantine_keeps_the_message_as_a_storable_dead_row() {
        let body = b"{\"id\":\"a\\u0000\",\"v\":\"\\u0000\"}";
        let mut m = NewInboxMessage::new("orders", "a\u{0}", serde_json::from_slice(body).unwrap());
        m.headers.insert("X-Bad".into(), "line\nbreak".into());
        m.headers.insert("X-Good".into(), "ok".into());
        let e = m.validate().unwrap_err().to_string();
        m.quarantine(body, &e);
        assert!(m.validate().is_ok());
        assert_eq!(m.idempotency_key, crate::keys::digest(body));
        assert_eq!(m.headers.keys().collect::<Vec<_>>(), ["X-Good"]);
        assert!(m.payload["rawBase64"].is_string());
        assert!(m.dead_reason.unwrap().contains("idempotency_key"));
    }
}
