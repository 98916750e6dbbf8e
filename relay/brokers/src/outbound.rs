//! What a broker publisher needs of one outbox row.

use serde_json::{Map, Value};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq)]
pub struct OutboundMessage {
    pub id: Uuid,
    pub topic: String,
    pub key: Option<String>,
    pub aggregate_type: Option<String>,
    pub payload: Value,
    /// The row's headers (string values).
    pub headers: Map<String, Value>,
    /// Failed deliveries so far (0 on the first).
    pub attempt: i32,
    /// A route's rendered `routingKeyTemplate`, when the route sets one.
    pub routing_key: Option<String>,
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
