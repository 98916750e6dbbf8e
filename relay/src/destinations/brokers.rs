//! Broker destinations on the publishers of `queuebox-brokers`, built through its one
//! table of kinds (`registry`), so no line here names a broker.

use async_trait::async_trait;
use queuebox_brokers::client::PublisherClient;
use queuebox_brokers::registry;
use queuebox_brokers::{BrokerError, Health};
use queuebox_config::DestinationConfig;

use super::{OutboundMessage, PublishError, Publisher};

pub struct BrokerPublisher {
    client: Box<dyn PublisherClient>,
    kind: &'static str,
    component: String,
    health: Health,
}

impl BrokerPublisher {
    pub fn new(dest: &DestinationConfig) -> anyhow::Result<Self> {
        let health = Health::global();
        let kind = dest.kind.type_name();
        let client = registry::kind(kind)?.publisher(dest, health.clone())?;
        Ok(BrokerPublisher {
            client,
            kind,
            component: format!("{kind}.{}", dest.name),
            health,
        })
    }
}

#[async_trait]
impl Publisher for BrokerPublisher {
    fn destination_type(&self) -> &'static str {
        self.kind
    }

    async fn publish(&self, msg: &OutboundMessage) -> Result<(), PublishError> {
        self.client.send(msg).await.map_err(|e| {
            let text = queuebox_core::headers::redact_error(&e.to_string(), &[]);
            // Every variant fails the attempt; the kind says why. A broker timeout keeps its
            // own text (it names the broker and the budget), so it travels as Unavailable.
            match e {
                BrokerError::Connect { .. }
                | BrokerError::Auth { .. }
                | BrokerError::Tls { .. }
                | BrokerError::Timeout { .. } => PublishError::Unavailable(text),
                BrokerError::Refused { .. }
                | BrokerError::Config { .. }
                | BrokerError::Crashed(_) => PublishError::Rejected(text),
            }
        })
    }

    fn is_request(&self) -> bool {
        false
    }

    async fn ready(&self) -> bool {
        // Down only after a publish failed on a lost connection; a destination that has
        // not published yet is not down.
        self.health.get(&self.component).map_or(true, |c| c.up)
    }
}
