//! Broker destinations (RabbitMQ, Kafka, NATS) on the publishers of `queuebox-brokers`.

use async_trait::async_trait;
use queuebox_brokers::{kafka, nats, rabbitmq, Health};
use queuebox_config::{DestinationConfig, DestinationKind};

use super::{OutboundMessage, PublishError, Publisher};

enum Client {
    RabbitMq(rabbitmq::RabbitMqPublisher),
    Kafka(kafka::KafkaPublisher),
    Nats(nats::NatsPublisher),
}

pub struct BrokerPublisher {
    client: Client,
    kind: &'static str,
    component: String,
    health: Health,
}

impl BrokerPublisher {
    pub fn new(dest: &DestinationConfig) -> anyhow::Result<Self> {
        let health = Health::global();
        let client = match &dest.kind {
            DestinationKind::RabbitMq(c) => Client::RabbitMq(rabbitmq::RabbitMqPublisher::new(
                &dest.name,
                c.clone(),
                health.clone(),
            )?),
            DestinationKind::Kafka(c) => Client::Kafka(kafka::KafkaPublisher::new(
                &dest.name,
                c.clone(),
                health.clone(),
            )?),
            DestinationKind::Nats(c) => Client::Nats(nats::NatsPublisher::new(
                &dest.name,
                c.clone(),
                health.clone(),
            )?),
            DestinationKind::Http(_) => {
                anyhow::bail!("destinations.{}: not a broker destination", dest.name)
            }
        };
        let kind = dest.kind.type_name();
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
        let r = match &self.client {
            Client::RabbitMq(p) => p.publish(msg).await,
            Client::Kafka(p) => p.publish(msg).await,
            Client::Nats(p) => p.publish(msg).await,
        };
        r.map_err(|e| {
            let text = queuebox_core::headers::redact_error(&e.to_string(), &[]);
            if self.health.get(&self.component).is_some_and(|c| !c.up) {
                PublishError::Unavailable(text)
            } else {
                PublishError::Rejected(text)
            }
        })
    }

    async fn ready(&self) -> bool {
        // Down only after a publish failed on a lost connection; a destination that has
        // not published yet is not down.
        self.health.get(&self.component).map_or(true, |c| c.up)
    }
}
