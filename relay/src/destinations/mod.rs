//! Destinations: one [`Publisher`] per configured destination. The outbox relay hands a
//! publisher an [`OutboundMessage`]; `Ok(())` means the destination took durable
//! responsibility (the row becomes `sent`), any error fails the attempt (retry, then dead).
//!
//! A new kind (RabbitMQ, Kafka, NATS) is a module with a type implementing [`Publisher`]
//! and one arm in [`build`] for its `DestinationKind` variant.

pub mod brokers;
pub mod http;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use queuebox_core::config::{Config, DestinationConfig, DestinationKind};
use queuebox_core::store::relay::OutboxRow;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::metrics::Metrics;

/// What a publisher sends: the outbox row after routing.
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
}

impl From<&OutboxRow> for OutboundMessage {
    fn from(r: &OutboxRow) -> Self {
        OutboundMessage {
            id: r.id,
            topic: r.topic.clone(),
            key: r.key.clone().filter(|k| !k.is_empty()),
            aggregate_type: r.aggregate_type.clone(),
            payload: r.payload.clone(),
            headers: r.headers.clone(),
            attempt: r.attempt,
        }
    }
}

impl OutboundMessage {
    /// The row headers as (name, text) pairs; non-string values are sent as JSON text.
    pub fn header_pairs(&self) -> impl Iterator<Item = (&str, String)> {
        self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
    }
}

/// Why a publish failed. Every variant fails the attempt (the retry policy decides what
/// follows); the text goes to `last_error` after redaction.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The destination answered and refused (HTTP non-2xx, broker nack, unroutable).
    #[error("{0}")]
    Rejected(String),
    /// No answer in time.
    #[error("Request timeout after {0}ms")]
    Timeout(u64),
    /// The destination could not be reached (connection refused, DNS, TLS, broker down).
    #[error("{0}")]
    Unavailable(String),
}

/// Sends outbox messages to one destination.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// The `type` of the destination (`http`, `rabbitmq`, ...), the `destination_type` label.
    fn destination_type(&self) -> &'static str;

    /// Publishes one message; returns only after the destination confirmed it.
    async fn publish(&self, msg: &OutboundMessage) -> Result<(), PublishError>;

    /// True when the publisher can currently publish (readiness).
    async fn ready(&self) -> bool {
        true
    }

    /// Releases connections at shutdown.
    async fn close(&self) {}
}

/// Builds the publisher of one destination.
pub fn build(dest: &DestinationConfig, cfg: &Config, metrics: &Arc<Metrics>) -> anyhow::Result<Arc<dyn Publisher>> {
    match &dest.kind {
        DestinationKind::Http(h) => Ok(Arc::new(http::HttpPublisher::new(h, &cfg.http, metrics.clone())?)),
        DestinationKind::RabbitMq(_) | DestinationKind::Kafka(_) | DestinationKind::Nats(_) => Ok(Arc::new(brokers::BrokerPublisher::new(dest)?)),
    }
}

/// Every destination's publisher, by destination name.
pub fn build_all(cfg: &Config, metrics: &Arc<Metrics>) -> anyhow::Result<BTreeMap<String, Arc<dyn Publisher>>> {
    cfg.destinations.iter().map(|(name, d)| Ok((name.clone(), build(d, cfg, metrics)?))).collect()
}
