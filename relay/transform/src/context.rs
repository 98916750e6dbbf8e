//! The variables an expression sees besides its input (docs/relay.md, "Transforms and key expressions"): `$messageId`,
//! `$topic`, `$attempt`, `$timestamp` everywhere, and for source transforms also `$source`,
//! `$headers`, `$idempotencyKey` and `$eventType`.

use chrono::{DateTime, SecondsFormat, Utc};
use jsonata_core::value::JValue;
use serde_json::{Map, Value};

/// The context variables of one evaluation. Route and destination transforms get
/// [`Context::outbox`]; source transforms add [`InboxContext`] with [`Context::with_inbox`].
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// `$messageId`: the message's id (the outbox row's id at delivery).
    pub message_id: String,
    /// `$topic`: the message's topic.
    pub topic: String,
    /// `$attempt`: failed deliveries so far, 0 on the first delivery.
    pub attempt: u32,
    /// `$timestamp`: when the evaluation runs, as an ISO-8601 UTC string.
    pub timestamp: DateTime<Utc>,
    /// The source-transform variables, present only at receipt.
    pub inbox: Option<InboxContext>,
}

/// The variables only a source transform sees.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxContext {
    /// `$source`: the source's name.
    pub source: String,
    /// `$headers`: the stored headers (credential headers already left out), exact-case keys,
    /// read as `$headers."x-tenant"`.
    pub headers: Map<String, Value>,
    /// `$idempotencyKey`: the key extracted for this message.
    pub idempotency_key: String,
    /// `$eventType`: the extracted event type; JSON `null` when there is none.
    pub event_type: Option<String>,
}

impl Context {
    /// The context of a route or destination transform.
    pub fn outbox(
        message_id: impl Into<String>,
        topic: impl Into<String>,
        attempt: u32,
        timestamp: DateTime<Utc>,
    ) -> Self {
        Context {
            message_id: message_id.into(),
            topic: topic.into(),
            attempt,
            timestamp,
            inbox: None,
        }
    }

    /// Adds the source-transform variables.
    pub fn with_inbox(mut self, inbox: InboxContext) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// `$timestamp` as the expression sees it: `2026-01-02T03:04:05.123Z`.
    pub fn timestamp_text(&self) -> String {
        self.timestamp.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// Each variable with its value, names without the `$`.
    pub(crate) fn bindings(&self) -> Vec<(&'static str, JValue)> {
        let mut vars = vec![
            ("messageId", JValue::from(self.message_id.as_str())),
            ("topic", JValue::from(self.topic.as_str())),
            ("attempt", JValue::from(i64::from(self.attempt))),
            ("timestamp", JValue::from(self.timestamp_text())),
        ];
        if let Some(inbox) = &self.inbox {
            vars.push(("source", JValue::from(inbox.source.as_str())));
            vars.push((
                "headers",
                JValue::from(Value::Object(inbox.headers.clone())),
            ));
            vars.push((
                "idempotencyKey",
                JValue::from(inbox.idempotency_key.as_str()),
            ));
            vars.push((
                "eventType",
                inbox
                    .event_type
                    .as_deref()
                    .map_or(JValue::Null, JValue::from),
            ));
        }
        vars
    }
}
