//! Broker sources on the clients of `queuebox-brokers`, built through its one table of
//! kinds (`registry`), so no line here names a broker:
//! each message goes through [`Inbox::receive_broker`] and is acknowledged only after it
//! returned `Ok`; a storage failure is requeued / nacked / sought back by the client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use queuebox_brokers::config::BrokerSourceCommon;
use queuebox_brokers::error::IngestError;
use queuebox_brokers::ingest::{Received as BrokerReceived, Sink, SourceRule};
use queuebox_brokers::{registry, Health};
use queuebox_config::SourceConfig;
use tokio_util::sync::CancellationToken;

use super::{BrokerSource, Inbox, Rejected};

/// The broker attribute rule of a broker source.
pub fn rule(source: &SourceConfig) -> anyhow::Result<SourceRule> {
    let Some(keys) = source.kind.broker() else {
        anyhow::bail!("sources.{}: not a broker source", source.name);
    };
    let mut rule = SourceRule::new(
        &source.name,
        &BrokerSourceCommon::from_config(&source.common, keys.attribute_headers()),
    )?;
    rule.record_key_is_aggregate = keys.record_key_is_aggregate();
    Ok(rule)
}

/// The consumer of a broker source.
pub fn build(source: &SourceConfig) -> anyhow::Result<Box<dyn BrokerSource>> {
    let rule = Arc::new(rule(source)?);
    let component = format!("{}.{}", source.kind.type_name(), source.name);
    let health = Health::global();
    health.register(&component);
    registry::kind(source.kind.type_name())?.check_source(source)?;
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
                msg.broker_time_ms,
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
        let result = match registry::kind(source.kind.type_name())
            .and_then(|kind| kind.source(&source, sink, self.health.clone()))
        {
            Ok(client) => client.consume(stop).await.map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = &result {
            tracing::error!(source = %name, error = %e, "broker source stopped");
            // A source that stopped (a refused certificate at its first connect, a missing
            // queue) is down for good: readiness says why instead of "connecting" for ever.
            self.health.set_down(&self.component, &e.to_string());
        }
        result
    }

    fn ready(&self) -> bool {
        self.health.get(&self.component).is_some_and(|c| c.up)
    }
}
