//! Rows and states: what an inbox row is, which states it moves through, and what a
//! caller hands the store to insert one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};

/// The most characters `source`, `idempotency_key`, `aggregate_id` and `event_type` hold.
pub const MAX_KEY_CHARS: usize = 255;
/// The most characters of `correlation_id`.
pub const MAX_CORRELATION_CHARS: usize = 128;

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

/// States of an inbox row. `processed` and `dead` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InboxState {
    Pending,
    Processing,
    Processed,
    Dead,
}

impl InboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Pending => "pending",
            InboxState::Processing => "processing",
            InboxState::Processed => "processed",
            InboxState::Dead => "dead",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(InboxState::Pending),
            "processing" => Some(InboxState::Processing),
            "processed" => Some(InboxState::Processed),
            "dead" => Some(InboxState::Dead),
            _ => None,
        }
    }
}

/// States of an outbox row. `sent` and `dead` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxState {
    Pending,
    Processing,
    Sent,
    Dead,
}

impl OutboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Processing => "processing",
            OutboxState::Sent => "sent",
            OutboxState::Dead => "dead",
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
    pub consumption: Consumption,
    /// Insert directly as `dead` (a broker body that is not JSON); `last_error` says why.
    pub dead_reason: Option<String>,
    /// Hold the row until this much time after receipt (a source's `initialDelay`).
    pub delay: Option<std::time::Duration>,
}

impl NewInboxMessage {
    /// A pending message with no optional attributes.
    pub fn new(source: impl Into<String>, idempotency_key: impl Into<String>, payload: Value) -> Self {
        NewInboxMessage {
            source: source.into(),
            idempotency_key: idempotency_key.into(),
            aggregate_id: None,
            event_type: None,
            payload,
            headers: Map::new(),
            correlation_id: None,
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
        check_text("idempotency_key", &self.idempotency_key, MAX_KEY_CHARS, false)?;
        if let Some(a) = &self.aggregate_id {
            check_text("aggregate_id", a, MAX_KEY_CHARS, true)?;
        }
        if let Some(e) = &self.event_type {
            check_text("event_type", e, MAX_KEY_CHARS, true)?;
        }
        if let Some(c) = &self.correlation_id {
            check_text("correlation_id", c, MAX_CORRELATION_CHARS, true)?;
        }
        if self.headers.values().any(|v| !v.is_string()) {
            return Err(Error::InvalidInput("headers must map names to string values".into()));
        }
        Ok(())
    }
}

fn check_text(field: &str, value: &str, max: usize, empty_ok: bool) -> Result<()> {
    if !empty_ok && value.trim().is_empty() {
        return Err(Error::InvalidInput(format!("{field} is empty")));
    }
    let n = value.chars().count();
    if n > max {
        return Err(Error::InvalidInput(format!("{field} has {n} characters; the column holds {max}")));
    }
    Ok(())
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
