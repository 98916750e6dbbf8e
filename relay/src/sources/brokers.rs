//! Broker sources (RabbitMQ, Kafka, NATS JetStream) on the clients of `queuebox-brokers`:
//! each message goes through [`Inbox::receive_broker`] and is acknowledged only after it
//! returned `Ok`; a storage failure is requeued / nacked / sought back by the client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use queuebox_brokers::config::BrokerSourceCommon;
use queuebox_brokers::ingest::{IngestError, Received as BrokerReceived, Sink, SourceRule};
use queuebox_brokers::{kafka, nats, rabbitmq, Health};
use queuebox_config::{SourceConfig, SourceKind};
use tokio_util::sync::CancellationToken;

use super::{BrokerSource, Inbox, Rejected};

/// The broker attribute rule of a broker source.
pub fn rule(source: &SourceConfig) -> anyhow::Result<SourceRule> {
    let headers = match &source.kind {
        SourceKind::RabbitMq(r) => &r.attribute_headers,
        SourceKind::Kafka(k) => &k.attribute_headers,
        SourceKind::Nats(n) => &n.attribute_headers,
        SourceKind::Http(_) => anyhow::bail!("sources.{}: not a broker source", source.name),
    };
    let mut rule = SourceRule::new(
        &source.name,
        &BrokerSourceCommon::from_config(&source.common, headers),
    )?;
    rule.record_key_is_aggregate = matches!(source.kind, SourceKind::Kafka(_));
    Ok(rule)
}

/// The consumer of a broker source.
pub fn build(source: &SourceConfig) -> anyhow::Result<Box<dyn BrokerSource>> {
    let rule = Arc::new(rule(source)?);
    let component = format!("{}.{}", source.kind.type_name(), source.name);
    let health = Health::global();
    health.register(&component);
    if let SourceKind::Nats(n) = &source.kind {
        nats::validate_source(&source.name, n)?;
    }
    Ok(Box::new(Broker {
        rule,
        health,
        component,
    }))
}

struct Broker {
    rule: Arc<SourceRule>,
    health: Health,
    component: String,
}

/// Hands broker messages to the shared inbox entry.
struct InboxSink {
    inbox: Inbox,
    rule: Arc<SourceRule>,
    /// Test failpoint `QB_FAILPOINT_CRASH_AFTER_STORES=n`: the process aborts right
    /// after the n-th stored message, before its acknowledgement (the crash window).
    crash_after: Option<AtomicU64>,
}

#[async_trait]
impl Sink for InboxSink {
    async fn store(&self, msg: &BrokerReceived<'_>) -> Result<(), IngestError> {
        match self
            .inbox
            .receive_broker(
                &self.rule,
                msg.body,
                msg.headers.clone(),
                msg.message_id.clone(),
            )
            .await
        {
            Ok(_) => {
                if let Some(n) = &self.crash_after {
                    if n.fetch_sub(1, Ordering::SeqCst) == 1 {
                        eprintln!("queuebox: failpoint QB_FAILPOINT_CRASH_AFTER_STORES reached; aborting before the acknowledgement");
                        std::process::abort();
                    }
                }
                Ok(())
            }
            Err(Rejected::Storage(e)) => Err(IngestError::Store(e)),
            // Nothing a redelivery could change (e.g. a key too long for its column):
            // acknowledge, never block the queue or partition for ever.
            Err(other) => {
                tracing::warn!(source = %self.rule.source, reason = %other, "broker message rejected; acknowledged");
                Ok(())
            }
        }
    }
}

#[async_trait]
impl BrokerSource for Broker {
    async fn run(
        self: Box<Self>,
        inbox: Inbox,
        source: SourceConfig,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let crash_after = std::env::var("QB_FAILPOINT_CRASH_AFTER_STORES")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(AtomicU64::new);
        let sink: Arc<dyn Sink> = Arc::new(InboxSink {
            inbox,
            rule: self.rule.clone(),
            crash_after,
        });
        let name = source.name.as_str();
        let result = match &source.kind {
            SourceKind::RabbitMq(c) => {
                let s = rabbitmq::RabbitMqSource::new(name, c.clone(), sink, self.health.clone());
                s.check().await?;
                s.run(stop).await
            }
            SourceKind::Kafka(c) => {
                kafka::KafkaSource::new(name, c.clone(), sink, self.health.clone())?
                    .run(stop)
                    .await
            }
            SourceKind::Nats(c) => {
                nats::NatsSource::new(name, c.clone(), sink, self.health.clone())?
                    .run(stop)
                    .await
            }
            SourceKind::Http(_) => Ok(()),
        };
        if let Err(e) = &result {
            tracing::error!(source = %name, error = %e, "broker source stopped");
        }
        result
    }

    fn ready(&self) -> bool {
        self.health.get(&self.component).is_some_and(|c| c.up)
    }
}
