//! What every broker client implements, and nothing that names a broker: [`BrokerKind`]
//! (builds the sources and destinations of one `type`), [`SourceClient`] and
//! [`PublisherClient`], and `not_mine`, the error of a wrong table entry. Each broker module
//! (`rabbitmq`, `nats`, `kafka`) implements them; [`crate::registry`] lists the kinds in one
//! table on top.

use std::sync::Arc;

use async_trait::async_trait;
use queuebox_config::{DestinationConfig, SourceConfig};
use tokio_util::sync::CancellationToken;

use crate::error::BrokerError;
use crate::health::Health;
use crate::ingest::Sink;
use crate::outbound::OutboundMessage;

/// One broker kind: how its sources consume and its destinations publish.
pub trait BrokerKind: Sync {
    /// The `type` value of its sources and destinations, also the first part of their
    /// health component (`nats.<name>`).
    fn type_name(&self) -> &'static str;

    /// Refuses, before anything connects, a source this kind cannot run. The parsed keys
    /// are already validated by the configuration; this is for what only the client knows.
    fn check_source(&self, _source: &SourceConfig) -> Result<(), BrokerError> {
        Ok(())
    }

    /// The consumer of `source` (of this kind), handing each message to `sink`.
    fn source(
        &self,
        source: &SourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Box<dyn SourceClient>, BrokerError>;

    /// The publisher of `destination` (of this kind).
    fn publisher(
        &self,
        destination: &DestinationConfig,
        health: Health,
    ) -> Result<Box<dyn PublisherClient>, BrokerError>;
}

/// A broker source's consumer: acknowledges each message only after `sink` stored it.
#[async_trait]
pub trait SourceClient: Send {
    /// Consumes until `stop`, riding out broker outages; an error is what reconnecting
    /// cannot fix (a missing queue or stream).
    async fn consume(self: Box<Self>, stop: CancellationToken) -> Result<(), BrokerError>;
}

/// A broker destination's publisher: `Ok` only after the broker confirmed the message.
#[async_trait]
pub trait PublisherClient: Send + Sync {
    async fn send(&self, msg: &OutboundMessage) -> Result<(), BrokerError>;
}

/// The error of a source or destination handed to a kind that is not its own (a wrong
/// table entry, never a user's mistake).
pub(crate) fn not_mine(kind: &str, path: &str) -> BrokerError {
    BrokerError::config(path, format!("not of type {kind}"))
}
