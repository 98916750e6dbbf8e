//! Kafka (rdkafka over Debian's librdkafka). The source is one consumer group per source:
//! records of a partition are stored in offset order, and the group commits only the
//! unbroken run of records the inbox accepted ([`OffsetTracker`]); the first failed record's
//! partition is sought back to it so the next poll rereads it. The destination is one
//! idempotent producer (`acks=all`) per destination; a publish succeeds only after the ack.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::client::{not_mine, BrokerKind, PublisherClient, SourceClient};
use async_trait::async_trait;
use queuebox_config::{DestinationConfig, DestinationKind, SourceConfig, SourceKind};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::config::{BrokerTls, KafkaDestinationConfig, KafkaSourceConfig, OffsetReset};
use crate::error::{BrokerError, IngestError};
use crate::health::Health;
use crate::ingest::{Received, Sink};
use crate::offsets::{Admit, OffsetTracker, Tp};
use crate::outbound::OutboundMessage;
use crate::template::{self, Template};
use crate::tls_check;
use queuebox_config::Secret;

/// Reports broker trouble from librdkafka's error callback into [`Health`]. librdkafka
/// reconnects by itself (reconnect.backoff.ms .. reconnect.backoff.max.ms).
pub struct HealthContext {
    health: Health,
    component: String,
    /// Explains librdkafka's "certificate verify failed", which reads the same for an
    /// untrusted CA, an expired certificate and a host name the certificate does not name.
    untrusted: Option<Arc<UntrustedCause>>,
}

impl HealthContext {
    fn new(health: Health, component: String, servers: &str, tls: &Option<BrokerTls>) -> Self {
        let untrusted = tls.as_ref().and_then(|t| t.ca_file.clone()).map(|ca_file| {
            Arc::new(UntrustedCause {
                servers: servers.to_string(),
                ca_file,
                cause: std::sync::Mutex::new(None),
                checking: std::sync::atomic::AtomicBool::new(false),
            })
        });
        HealthContext {
            health,
            component,
            untrusted,
        }
    }
}

/// The cause of a refused broker certificate, found once by [`tls_check::why_untrusted`] on
/// a thread of its own (librdkafka's callback must not wait on a network round trip).
struct UntrustedCause {
    servers: String,
    ca_file: String,
    cause: std::sync::Mutex<Option<String>>,
    checking: std::sync::atomic::AtomicBool,
}

impl UntrustedCause {
    /// `said` with the cause appended once it is known; the first call starts the check,
    /// which then reports `said` and the cause itself if the component is still down.
    fn explain(self: &Arc<Self>, said: String, health: &Health, component: &str) -> String {
        if let Some(cause) = self.cause.lock().expect("never poisoned").as_deref() {
            return format!("{said}; {cause}");
        }
        if !self
            .checking
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let (me, health, component) = (self.clone(), health.clone(), component.to_string());
            let said = said.clone();
            std::thread::spawn(move || {
                let Some(why) = tls_check::why_untrusted(&me.servers, &me.ca_file) else {
                    return;
                };
                let cause = format!("checked again with tls.caFile: {why}");
                let text = format!("{said}; {cause}");
                tracing::warn!(%component, %cause, "kafka broker certificate refused");
                *me.cause.lock().expect("never poisoned") = Some(cause);
                if health.get(&component).is_some_and(|c| !c.up) {
                    health.set_down(&component, &text);
                }
            });
        }
        said
    }
}

impl ClientContext for HealthContext {
    fn error(&self, error: KafkaError, reason: &str) {
        let down = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::AllBrokersDown)
                | Some(RDKafkaErrorCode::BrokerTransportFailure)
                // A refused certificate or SASL login: readiness says why, by name.
                | Some(RDKafkaErrorCode::SSL)
                | Some(RDKafkaErrorCode::Authentication)
        ) || matches!(error, KafkaError::Global(RDKafkaErrorCode::AllBrokersDown));
        // "All brokers are down" follows the error that says why (a refused certificate or
        // password); it must not replace that reason, only report an outage not yet explained.
        let all_down = error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown);
        let explained = self
            .health
            .get(&self.component)
            .is_some_and(|c| !c.up && c.error.as_deref() != Some("connecting"));
        if down && !(all_down && explained) {
            let mut said = format!("{error}: {reason}");
            if let (Some(u), true) = (
                &self.untrusted,
                reason.contains("certificate verify failed"),
            ) {
                said = u.explain(said, &self.health, &self.component);
            }
            self.health.set_down(&self.component, &said);
        }
        tracing::warn!(component = %self.component, error = %error, reason, "kafka client error");
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            tracing::debug!(component = %self.component, fac, "{log_message}");
        }
    }
}

impl ConsumerContext for HealthContext {}

/// `securityProtocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the SASL login and the
/// `tls:` files, as librdkafka properties. The broker's host name is always checked against
/// its certificate (`ssl.endpoint.identification.algorithm=https`), and validation refuses a
/// `tls:` block without an SSL protocol, so certificates are never set and then unused.
fn apply_security(
    cfg: &mut ClientConfig,
    protocol: &Option<String>,
    mechanism: &Option<String>,
    username: &Option<String>,
    password: &Option<Secret>,
    tls: &Option<BrokerTls>,
) {
    if let Some(p) = protocol {
        cfg.set("security.protocol", p);
        if p.to_ascii_uppercase().ends_with("SSL") {
            cfg.set("ssl.endpoint.identification.algorithm", "https");
        }
    }
    if let Some(m) = mechanism {
        cfg.set("sasl.mechanism", m);
    }
    if let Some(u) = username {
        cfg.set("sasl.username", u);
    }
    if let Some(p) = password {
        cfg.set("sasl.password", p.expose());
    }
    if let Some(t) = tls {
        if let Some(ca) = &t.ca_file {
            cfg.set("ssl.ca.location", ca);
        }
        if let Some(cert) = &t.cert_file {
            cfg.set("ssl.certificate.location", cert);
        }
        if let Some(key) = &t.key_file {
            cfg.set("ssl.key.location", key);
        }
    }
}

/// Kafka header values as text: UTF-8, else `base64:<value>` (reference 6.4).
pub fn header_text(value: &[u8]) -> String {
    use base64::Engine;
    match std::str::from_utf8(value) {
        Ok(s) => s.to_string(),
        Err(_) => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(value)
        ),
    }
}

/// One record, owned, so the consumer can keep reading while it is stored.
#[derive(Debug, Clone)]
struct Record {
    tp: Tp,
    offset: i64,
    body: Vec<u8>,
    key: Option<String>,
    headers: Vec<(String, String)>,
    /// The record timestamp (create or log-append time), ms since 1970.
    timestamp_ms: Option<i64>,
}

/// A Kafka source: one consumer group reading `topics`.
pub struct KafkaSource {
    name: String,
    config: KafkaSourceConfig,
    sink: Arc<dyn Sink>,
    health: Health,
}

impl KafkaSource {
    pub fn new(
        name: &str,
        config: KafkaSourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Self, BrokerError> {
        if config.topics.is_empty() {
            return Err(BrokerError::config(
                format!("sources.{name}.topics"),
                "at least one topic is required",
            ));
        }
        health.register(&format!("kafka.{name}"));
        Ok(KafkaSource {
            name: name.to_string(),
            config,
            sink,
            health,
        })
    }

    pub fn component(&self) -> String {
        format!("kafka.{}", self.name)
    }

    fn consumer(&self) -> Result<StreamConsumer<HealthContext>, BrokerError> {
        let c = &self.config;
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &c.bootstrap_servers)
            .set("group.id", &c.group_id)
            .set("client.id", format!("queuebox-{}", self.name))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set(
                "auto.offset.reset",
                match c.auto_offset_reset {
                    OffsetReset::Earliest => "earliest",
                    OffsetReset::Latest => "latest",
                },
            )
            .set("session.timeout.ms", "10000")
            .set("reconnect.backoff.ms", "200")
            .set("reconnect.backoff.max.ms", "10000")
            .set("topic.metadata.refresh.interval.ms", "5000");
        apply_security(
            &mut cfg,
            &c.security_protocol,
            &c.sasl_mechanism,
            &c.sasl_username,
            &c.sasl_password,
            &c.tls,
        );
        let ctx = HealthContext::new(
            self.health.clone(),
            self.component(),
            &c.bootstrap_servers,
            &c.tls,
        );
        cfg.create_with_context(ctx)
            .map_err(|e| client_error(&format!("sources.{}", self.name), e))
    }

    /// Consumes until `stop`. Broker outages are ridden out by librdkafka's own reconnect;
    /// stopping commits nothing further.
    pub async fn run(&self, stop: CancellationToken) -> Result<(), BrokerError> {
        let consumer = self.consumer()?;
        let topics: Vec<&str> = self.config.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|e| client_error(&format!("sources.{}.topics", self.name), e))?;
        tracing::info!(source = %self.name, topics = ?self.config.topics, group = %self.config.group_id, "kafka source consuming");
        let mut tracker = OffsetTracker::new();
        let max = self.config.max_poll_records.max(1);
        loop {
            // A batch: wait for the first record, then take what is already there.
            let first = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                r = consumer.recv() => r,
                _ = tokio::time::sleep(Duration::from_secs(2)) => {
                    // Idle: ask the cluster for the topic's metadata so readiness tells an
                    // idle, connected source from a broker that is down.
                    let probe = tokio::task::block_in_place(|| consumer.client().fetch_metadata(Some(&self.config.topics[0]), Duration::from_secs(2)));
                    match probe {
                        Ok(_) => self.health.set_up(&self.component()),
                        Err(e) => self.health.set_down(&self.component(), &e.to_string()),
                    }
                    continue;
                }
            };
            let mut batch = Vec::new();
            match first {
                Ok(m) => batch.push(own(&m)),
                Err(e) => {
                    tracing::warn!(source = %self.name, error = %e, "kafka poll failed");
                    self.health.set_down(&self.component(), &e.to_string());
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
            while batch.len() < max {
                match tokio::time::timeout(Duration::from_millis(2), consumer.recv()).await {
                    Ok(Ok(m)) => batch.push(own(&m)),
                    _ => break,
                }
            }
            self.health.set_up(&self.component());
            let batch: Vec<Record> = batch
                .into_iter()
                .filter(|r| tracker.admit(&r.tp, r.offset) == Admit::Process)
                .collect();
            // Partitions in parallel, each in offset order (inbox rows keep the partition's order).
            let mut by_partition: BTreeMap<Tp, Vec<Record>> = BTreeMap::new();
            for r in batch {
                by_partition.entry(r.tp.clone()).or_default().push(r);
            }
            let results = futures::future::join_all(
                by_partition
                    .into_values()
                    .map(|records| self.store_partition(records)),
            )
            .await;
            let mut crashed = false;
            for outcomes in results {
                for (tp, offset, outcome) in outcomes {
                    match outcome {
                        Ok(()) => tracker.accept(&tp, offset),
                        Err(IngestError::CrashAfterStore) => crashed = true,
                        Err(IngestError::Store(e)) => {
                            if let Some(at) = tracker.fail(&tp, offset) {
                                tracing::warn!(source = %self.name, topic = %tp.0, partition = tp.1, offset = at, error = %e, "inbox store failed; seeking back");
                                if let Err(se) = consumer.seek(
                                    &tp.0,
                                    tp.1,
                                    Offset::Offset(at),
                                    Duration::from_secs(5),
                                ) {
                                    tracing::warn!(source = %self.name, error = %se, "seek failed");
                                }
                            }
                        }
                    }
                }
            }
            if crashed {
                // As if killed after the store: nothing of this batch is committed.
                return Err(IngestError::CrashAfterStore.into());
            }
            let commit = tracker.take_committable();
            if !commit.is_empty() {
                let mut tpl = TopicPartitionList::new();
                for ((topic, partition), offset) in &commit {
                    tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                        .map_err(|e| client_error(&format!("sources.{}", self.name), e))?;
                }
                // A failed commit only replays records, which deduplicate.
                if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
                    tracing::warn!(source = %self.name, error = %e, "offset commit failed");
                }
            }
        }
    }

    /// Stores one partition's records in order, stopping at the first failure (the rest is
    /// reread after the seek).
    async fn store_partition(
        &self,
        records: Vec<Record>,
    ) -> Vec<(Tp, i64, Result<(), IngestError>)> {
        let mut out = Vec::with_capacity(records.len());
        for r in records {
            let received = Received {
                body: &r.body,
                headers: r.headers.clone(),
                message_id: r.key.clone(),
                record_key: r.key.clone(),
                broker_time_ms: r.timestamp_ms,
            };
            let outcome = self.sink.store(&received).await;
            let stop = outcome.is_err();
            out.push((r.tp, r.offset, outcome));
            if stop {
                break;
            }
        }
        out
    }
}

fn own<M: Message>(m: &M) -> Record {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|Header { key, value }| {
                    (key.to_string(), value.map(header_text).unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    Record {
        tp: (m.topic().to_string(), m.partition()),
        offset: m.offset(),
        body: m.payload().unwrap_or_default().to_vec(),
        key: m.key().map(header_text).filter(|k| !k.trim().is_empty()),
        headers,
        timestamp_ms: m.timestamp().to_millis(),
    }
}

/// A Kafka destination: one idempotent producer, `acks=all`.
pub struct KafkaPublisher {
    name: String,
    config: KafkaDestinationConfig,
    topic: Template,
    key: Template,
    producer: FutureProducer<HealthContext>,
    health: Health,
}

impl KafkaPublisher {
    pub fn new(
        name: &str,
        config: KafkaDestinationConfig,
        health: Health,
    ) -> Result<Self, BrokerError> {
        let topic = Template::parse(&config.topic, "topic", name)?;
        let key = Template::parse(&config.key_template, "keyTemplate", name)?;
        if let Some(c) = &config.topic_from {
            template::check_from_column(c, "topicFrom", name)?;
        }
        if config.timeout_ms < 2000 {
            return Err(BrokerError::config(
                format!("destinations.{name}.timeoutMs"),
                "at least 2000 (the whole publish budget)",
            ));
        }
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &config.bootstrap_servers)
            .set("client.id", format!("queuebox-{name}"))
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .set("message.timeout.ms", config.timeout_ms.to_string())
            .set(
                "request.timeout.ms",
                config.timeout_ms.saturating_sub(1000).max(1000).to_string(),
            )
            .set("reconnect.backoff.ms", "200")
            .set("reconnect.backoff.max.ms", "10000");
        apply_security(
            &mut cfg,
            &config.security_protocol,
            &config.sasl_mechanism,
            &config.sasl_username,
            &config.sasl_password,
            &config.tls,
        );
        let component = format!("kafka.{name}");
        let producer = cfg
            .create_with_context(HealthContext::new(
                health.clone(),
                component,
                &config.bootstrap_servers,
                &config.tls,
            ))
            .map_err(|e| client_error(&format!("destinations.{name}"), e))?;
        Ok(KafkaPublisher {
            name: name.to_string(),
            config,
            topic,
            key,
            producer,
            health,
        })
    }

    pub fn component(&self) -> String {
        format!("kafka.{}", self.name)
    }

    /// The destination, for error messages: `Kafka destination `log` at host:9092`.
    fn connection(&self) -> String {
        format!(
            "Kafka destination `{}` at {}",
            self.name, self.config.bootstrap_servers
        )
    }

    pub async fn publish(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        let topic = template::address(self.config.topic_from.as_deref(), &self.topic, msg);
        if topic.trim().is_empty() {
            return Err(BrokerError::config(format!("destinations.{}.topic", self.name), format!("rendered an empty topic from template '{}'. QueueBox does not publish the message.", self.topic.source())));
        }
        let key = msg
            .routing_key
            .clone()
            .unwrap_or_else(|| self.key.render(msg));
        let mut headers = OwnedHeaders::new();
        let mut add = |k: &str, v: &str| {
            headers = std::mem::replace(&mut headers, OwnedHeaders::new()).insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        };
        for (k, v) in &self.config.headers {
            add(k, v);
        }
        for (k, v) in msg.header_pairs() {
            add(k, &v);
        }
        add("x-message-id", &msg.id.to_string());
        add("x-topic", &msg.topic);
        add("x-attempt", &msg.attempt.to_string());
        let body = serde_json::to_vec(&msg.payload).map_err(|e| BrokerError::Refused {
            connection: self.connection(),
            reason: format!("payload: {e}"),
        })?;
        let mut record = FutureRecord::to(&topic).payload(&body).headers(headers);
        if !key.trim().is_empty() {
            record = record.key(&key);
        }
        match self
            .producer
            .send(record, Duration::from_millis(self.config.timeout_ms))
            .await
        {
            Ok(_) => {
                self.health.set_up(&self.component());
                Ok(())
            }
            Err((e, _)) => Err(publish_error(
                self.connection(),
                format!(
                    "Kafka did not acknowledge message {} on topic {}: {e}",
                    msg.id, topic
                ),
                &e,
            )),
        }
    }
}

/// librdkafka refused a client setting or a call on the client: the configuration at `path`.
fn client_error(path: &str, e: KafkaError) -> BrokerError {
    BrokerError::config(path, e)
}

/// A failed produce by librdkafka's error code: the message timed out, the login or TLS
/// handshake failed, the cluster could not be reached, or the broker refused the record.
fn publish_error(connection: String, reason: String, e: &KafkaError) -> BrokerError {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        Some(C::MessageTimedOut) | Some(C::RequestTimedOut) | Some(C::OperationTimedOut) => {
            BrokerError::Timeout { connection, reason }
        }
        Some(C::Authentication) | Some(C::SaslAuthenticationFailed) => {
            BrokerError::Auth { connection, reason }
        }
        Some(C::SSL) => BrokerError::Tls { connection, reason },
        Some(C::AllBrokersDown) | Some(C::BrokerTransportFailure) | Some(C::BrokerNotAvailable) => {
            BrokerError::Connect { connection, reason }
        }
        _ => BrokerError::Refused { connection, reason },
    }
}

/// Kafka in the broker table ([`crate::registry::KINDS`]).
pub struct Kafka;

impl BrokerKind for Kafka {
    fn type_name(&self) -> &'static str {
        "kafka"
    }

    fn source(
        &self,
        source: &SourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Box<dyn SourceClient>, BrokerError> {
        let SourceKind::Kafka(c) = &source.kind else {
            return Err(not_mine("kafka", &format!("sources.{}", source.name)));
        };
        Ok(Box::new(KafkaSource::new(
            &source.name,
            c.clone(),
            sink,
            health,
        )?))
    }

    fn publisher(
        &self,
        destination: &DestinationConfig,
        health: Health,
    ) -> Result<Box<dyn PublisherClient>, BrokerError> {
        let DestinationKind::Kafka(c) = &destination.kind else {
            return Err(not_mine(
                "kafka",
                &format!("destinations.{}", destination.name),
            ));
        };
        Ok(Box::new(KafkaPublisher::new(
            &destination.name,
            c.clone(),
            health,
        )?))
    }
}

#[async_trait]
impl SourceClient for KafkaSource {
    async fn consume(self: Box<Self>, stop: CancellationToken) -> Result<(), BrokerError> {
        self.run(stop).await
    }
}

#[async_trait]
impl PublisherClient for KafkaPublisher {
    async fn send(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        self.publish(msg).await
    }
}
