//! Broker sources (into the inbox) and destinations (from the outbox): RabbitMQ, NATS
//! JetStream and Kafka. Each keeps its broker's promise (delivery-semantics): a source
//! acknowledges only after the inbox row commits; a destination reports success only after
//! the broker confirmed the publish.
//!
//! | module | what it owns |
//! |---|---|
//! | [`config`] | the `sources.<name>` / `destinations.<name>` keys of the three kinds |
//! | [`client`] | what every broker implements: [`client::BrokerKind`] (by `type`), [`client::SourceClient`], [`client::PublisherClient`] |
//! | [`error`] | [`BrokerError`]: connect, login, TLS, refused, timeout, configuration; what a caller acts on. [`error::IngestError`]: a store that ends in no acknowledgement |
//! | [`ingest`] | broker message → [`queuebox_core::NewInboxMessage`]: key chain, event type, aggregate, headers, non-JSON → dead |
//! | [`offsets`] | Kafka: the unbroken run of accepted offsets per partition |
//! | [`template`] | the vocabulary of address templates (`{{ topic }}`, `{{ key }}`, `{{ payload.x }}` …), rendered by the relay's one renderer, `queuebox_config::Template` |
//! | [`health`] | per-component up/down state for readiness |
//! | [`reconnect`] | the reconnect backoff |
//! | [`registry`] | the broker kinds, one table ([`registry::KINDS`]), the one module that names every broker: the relay builds every source and publisher through it |
//! | [`tls_check`] | why a broker's certificate was refused, when the client library does not say (Kafka) |
//! | [`rabbitmq`], [`nats`], [`kafka`] | the clients: source loop and publisher per broker, and its [`client::BrokerKind`] |

#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod error;
pub mod health;
pub mod ingest;
// Kafka is a feature (Cargo.toml): the Windows relay is built without it, as librdkafka is
// not built for MinGW here (docs/install.md, "Windows").
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod nats;
#[cfg(feature = "kafka")]
pub mod offsets;
pub mod outbound;
pub mod rabbitmq;
pub mod reconnect;
pub mod registry;
pub mod template;
#[cfg(feature = "kafka")]
pub mod tls_check;

pub use error::BrokerError;
pub use health::Health;
pub use outbound::OutboundMessage;
