//! Destinations: one [`Publisher`] per configured destination. The outbox relay hands a
//! publisher an [`OutboundMessage`]; `Ok(())` means the destination took durable
//! responsibility (the row becomes `sent`), any error fails the attempt (retry, then dead).
//!
//! Every broker kind is built by [`brokers`] through the broker table of `queuebox-brokers`
//! (a new broker adds nothing here); a kind that is not a broker (like HTTP) is a module
//! with a type implementing [`Publisher`] and one arm in [`build`].
//!
//! | module | role |
//! |---|---|
//! | [`http`] | the HTTP publisher and its outbound auth (bearer, api-key, basic, header, hmac signing) |
//! | [`oauth2`] | the OAuth2 client-credentials token of an HTTP destination: fetched once, cached, refreshed |
//! | [`address_guard`] | `http.blockPrivateAddresses`: the start-up check and the connect-time resolver |
//! | [`brokers`] | every broker kind (RabbitMQ, Kafka, NATS) through `queuebox-brokers`' registry |
//! | [`error_text`] | how a failed HTTP exchange reads in `last_error` (error chain, body cut to size) |
//! | [`route_keys`] | a route's `routingKeyTemplate`, rendered per row in place of the destination's key |

pub mod address_guard;
pub mod brokers;
mod error_text;
pub mod http;
pub mod oauth2;
pub mod route_keys;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use queuebox_config::{Config, DestinationConfig, DestinationKind};

use crate::metrics::Metrics;

/// What a publisher sends: the outbox row after routing (one type, owned by
/// `queuebox-brokers`, so broker publishers take it as is).
pub use queuebox_brokers::OutboundMessage;

/// Why a publish failed. Every variant fails the attempt (the retry policy decides what
/// follows; with `outbox.retryUnreachableForever`, `Unavailable` never makes a row dead: see
/// `outbox::after_publish_failure`); the text goes to `last_error` after redaction.
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
    /// The destination's credentials could not be obtained (the OAuth2 token endpoint
    /// refused or could not be reached); nothing was sent to the destination.
    #[error("{0}")]
    Credentials(String),
}

/// Sends outbox messages to one destination.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// The `type` of the destination (`http`, `rabbitmq`, ...), the `destination_type` label.
    fn destination_type(&self) -> &'static str;

    /// Publishes one message; returns only after the destination confirmed it.
    async fn publish(&self, msg: &OutboundMessage) -> Result<(), PublishError>;

    /// True when each publish is a request of its own to a receiver (HTTP, and the safe
    /// default for a new kind): such publishes count against `outbox.concurrency`'s bound on
    /// requests at once ([`queuebox_config::OutboxConfig::http_requests`]). A broker's
    /// client sends publishes on one connection and waits for each acknowledgement; its
    /// publishes count only against the rows in flight.
    fn is_request(&self) -> bool {
        true
    }

    /// True when the publisher can currently publish (readiness).
    async fn ready(&self) -> bool {
        true
    }

    /// Releases connections at shutdown.
    async fn close(&self) {}
}

/// Builds the publisher of one destination.
pub fn build(
    dest: &DestinationConfig,
    cfg: &Config,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<Arc<dyn Publisher>> {
    match &dest.kind {
        DestinationKind::Http(h) => Ok(Arc::new(http::HttpPublisher::new(
            h,
            &cfg.http,
            metrics.clone(),
        )?)),
        _ => Ok(Arc::new(brokers::BrokerPublisher::new(dest)?)),
    }
}

/// Every destination's publisher, by destination name.
pub fn build_all(
    cfg: &Config,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<BTreeMap<String, Arc<dyn Publisher>>> {
    cfg.destinations
        .iter()
        .map(|(name, d)| Ok((name.clone(), build(d, cfg, metrics)?)))
        .collect()
}
