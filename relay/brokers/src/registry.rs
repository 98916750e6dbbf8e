//! The broker kinds, one table: [`KINDS`], the one place that names every broker. The relay
//! builds every broker source and destination through it ([`kind`] by the configured
//! `type`), so adding a broker is its own module implementing [`BrokerKind`] (a
//! [`SourceClient`](crate::client::SourceClient) and a
//! [`PublisherClient`](crate::client::PublisherClient), all in [`crate::client`]) plus its
//! line in [`KINDS`]; the keys it reads live in [`queuebox_config::brokers`] (typed by the
//! broker kind table of that crate's parser). proto-docs/brokers.md, "Adding a broker", walks
//! through it.

use crate::client::BrokerKind;
use crate::error::BrokerError;
#[cfg(feature = "kafka")]
use crate::kafka;
use crate::{nats, rabbitmq};

/// Every broker kind the relay knows, by `type`.
#[cfg(feature = "kafka")]
pub static KINDS: &[&dyn BrokerKind] = &[&rabbitmq::RabbitMq, &kafka::Kafka, &nats::Nats];
/// Every broker kind the relay knows, by `type`: this build has no Kafka.
#[cfg(not(feature = "kafka"))]
pub static KINDS: &[&dyn BrokerKind] = &[&rabbitmq::RabbitMq, &nats::Nats];

/// The broker kind whose `type` is `type_name`.
pub fn kind(type_name: &str) -> Result<&'static dyn BrokerKind, BrokerError> {
    if type_name == "kafka" && !cfg!(feature = "kafka") {
        return Err(BrokerError::config(
            "type",
            "`kafka`: this relay was built without Kafka (the Windows build; docs/install.md)",
        ));
    }
    KINDS
        .iter()
        .copied()
        .find(|k| k.type_name() == type_name)
        .ok_or_else(|| BrokerError::config("type", format!("`{type_name}` is not a broker kind")))
}
