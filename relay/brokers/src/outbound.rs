//! What a publisher sends: one outbox row after routing. The relay's HTTP destination and
//! the broker publishers of this crate share this one type.

use queuebox_core::headers;
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
    /// The row headers a publisher sends, as (name, text) pairs; non-string values as their
    /// JSON text. Framing and hop-by-hop fields (`Content-Length`, `Host`, …) and headers no
    /// receiver could accept are skipped with a warning (`headers::forwardable`): the inbox
    /// never stores them, but a row written by hand or by an older version may hold them, and
    /// the message must still arrive whole.
    pub fn header_pairs(&self) -> impl Iterator<Item = (&str, String)> {
        self.headers.iter().filter_map(|(k, v)| {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            match headers::forwardable(k, &text) {
                Ok(()) => Some((k.as_str(), text)),
                Err(why) => {
                    tracing::warn!(message_id = %self.id, reason = %why, "row header not sent");
                    None
                }
            }
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_and_unsendable_row_headers_are_not_sent() {
        let mut headers = Map::new();
        for (k, v) in [
            ("Content-Length", "37"),
            ("Host", "sender"),
            ("Transfer-Encoding", "chunked"),
            ("X-Bad", "a\r\nInjected: 1"),
            ("x-tenant", "acme"),
        ] {
            headers.insert(k.into(), Value::from(v));
        }
        let m = OutboundMessage {
            id: Uuid::nil(),
            topic: "t".into(),
            key: None,
            aggregate_type: None,
            payload: Value::Null,
            headers,
            attempt: 0,
            routing_key: None,
        };
        let sent: Vec<(&str, String)> = m.header_pairs().collect();
        assert_eq!(sent, [("x-tenant", "acme".to_string())]);
    }
}
