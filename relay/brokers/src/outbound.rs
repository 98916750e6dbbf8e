//! What a publisher sends: one outbox row after routing. The relay's HTTP destination and
//! the broker publishers of this crate share this one type.

use queuebox_core::store::relay::OutboxRow;
use serde_json::{Map, Value};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq)]
pub struct OutboundMessage {
    /// The outbox id: `X-Message-Id` / `x-message-id` / AMQP `messageId`.
    pub id: Uuid,
    pub topic: String,
    /// The ordering key (`X-Message-Key`, Kafka record key), when the row has one.
    pub key: Option<String>,
    pub aggregate_type: Option<String>,
    pub payload: Value,
    /// The row's headers (relay headers included), string values.
    pub headers: Map<String, Value>,
    /// Failed deliveries so far (0 on the first).
    pub attempt: i32,
    /// A route's rendered `routingKeyTemplate`, when the route sets one.
    pub routing_key: Option<String>,
}

impl From<&OutboxRow> for OutboundMessage {
    /// An empty key counts as no key; no route has rendered a routing key yet.
    fn from(r: &OutboxRow) -> Self {
        OutboundMessage {
            id: r.id,
            topic: r.topic.clone(),
            key: r.key.clone().filter(|k| !k.is_empty()),
            aggregate_type: r.aggregate_type.clone(),
            payload: r.payload.clone(),
            headers: r.headers.clone(),
            attempt: r.attempt,
            routing_key: None,
        }
    }
}

impl OutboundMessage {
    /// Row headers as (name, text) pairs; non-string values as their JSON text.
    pub fn header_pairs(&self) -> impl Iterator<Item = (&str, String)> {
        self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
    }

    /// The value of a `*From` column (`aggregate_type`, `topic`, `key`).
    pub fn column(&self, name: &str) -> Option<&str> {
        match name {
            "aggregate_type" => self.aggregate_type.as_deref(),
            "topic" => Some(self.topic.as_str()),
            "key" => self.key.as_deref(),
            _ => None,
        }
    }
}
