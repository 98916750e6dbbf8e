//! RabbitMQ (lapin): the source reads one queue and acknowledges a delivery only after its
//! inbox row commits (a failed store is nacked with requeue); the destination publishes to
//! one durable exchange with publisher confirms and the `mandatory` flag, so success means
//! the broker routed and took the message.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{not_mine, BrokerKind, PublisherClient, SourceClient};
use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use queuebox_config::{DestinationConfig, DestinationKind, SourceConfig, SourceKind};
use queuebox_core::headers::redact_error;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::config::{
    BrokerTls, DeliveryMode, ExchangeType, RabbitMqDestinationConfig, RabbitMqSourceConfig,
};
use crate::error::{classify_connect, BrokerError, IngestError};
use crate::health::Health;
use crate::ingest::{Received, Sink};
use crate::outbound::OutboundMessage;
use crate::reconnect::Backoff;
use crate::template::{self, Template};

/// How a source run ended.
#[derive(Debug)]
enum RunEnd {
    Stopped,
    /// Connection or channel trouble: reconnect after a backoff.
    Broken(String),
    /// Configuration the operator must fix (the queue does not exist).
    Fatal(BrokerError),
    /// The crash failpoint fired: drop everything without acknowledging.
    Crashed,
}

/// A RabbitMQ source: one queue, `prefetchCount` deliveries in flight.
pub struct RabbitMqSource {
    name: String,
    config: RabbitMqSourceConfig,
    sink: Arc<dyn Sink>,
    health: Health,
}

impl RabbitMqSource {
    pub fn new(
        name: &str,
        config: RabbitMqSourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Self {
        health.register(&Self::component_of(name));
        RabbitMqSource {
            name: name.to_string(),
            config,
            sink,
            health,
        }
    }

    fn component_of(name: &str) -> String {
        format!("rabbitmq.{name}")
    }

    pub fn component(&self) -> String {
        Self::component_of(&self.name)
    }

    /// Connects once and checks the queue, so that a missing queue fails startup loudly.
    pub async fn check(&self) -> Result<(), BrokerError> {
        let conn = connect(
            &self.config.connection_url,
            self.config.tls.as_ref(),
            &self.name,
        )
        .await?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| BrokerError::Connect {
                connection: self.connection(),
                reason: format!("channel: {e}"),
            })?;
        let r = self.declare(&channel).await;
        let _ = conn.close(200, "check done".into()).await;
        r
    }

    /// The source, for error messages: `RabbitMQ `orders` at amqp://…`.
    fn connection(&self) -> String {
        format!(
            "RabbitMQ `{}` at {}",
            self.name,
            redact_error(&self.config.connection_url, &[])
        )
    }

    async fn declare(&self, channel: &Channel) -> Result<(), BrokerError> {
        let q = &self.config.queue_name;
        let options = if self.config.declare_queue {
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            }
        } else {
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            }
        };
        match channel.queue_declare(q.as_str().into(), options, FieldTable::default()).await {
            Ok(_) => Ok(()),
            Err(e) if !self.config.declare_queue && e.to_string().contains("NOT_FOUND") => Err(BrokerError::config(
                format!("sources.{}.queueName", self.name),
                format!("RabbitMQ queue '{q}' does not exist. QueueBox does not declare source queues; create the queue, or set sources.{}.declareQueue: true to have QueueBox declare it (durable)", self.name),
            )),
            Err(e) => Err(BrokerError::Connect {
                connection: self.connection(),
                reason: format!("queue '{q}': {e}"),
            }),
        }
    }

    /// Runs until `stop`: consumes, reconnecting with backoff when the broker goes away.
    /// Returns an error only for what reconnecting cannot fix (a missing queue) and for the
    /// crash failpoint.
    pub async fn run(&self, stop: CancellationToken) -> Result<(), BrokerError> {
        let mut backoff = Backoff::default();
        loop {
            match self.run_once(&stop, &mut backoff).await {
                RunEnd::Stopped => return Ok(()),
                RunEnd::Fatal(e) => {
                    self.health.set_down(&self.component(), &e.to_string());
                    return Err(e);
                }
                RunEnd::Crashed => return Err(IngestError::CrashAfterStore.into()),
                RunEnd::Broken(why) => {
                    self.health.set_down(&self.component(), &why);
                    let d = backoff.next_delay();
                    tracing::warn!(source = %self.name, error = %why, delay_ms = d.as_millis() as u64, "rabbitmq source disconnected; reconnecting");
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(d) => {}
                    }
                }
            }
        }
    }

    async fn run_once(&self, stop: &CancellationToken, backoff: &mut Backoff) -> RunEnd {
        let conn = match connect(
            &self.config.connection_url,
            self.config.tls.as_ref(),
            &self.name,
        )
        .await
        {
            Ok(c) => c,
            Err(e) => return RunEnd::Broken(e.to_string()),
        };
        let channel = match conn.create_channel().await {
            Ok(c) => c,
            Err(e) => return RunEnd::Broken(e.to_string()),
        };
        if let Err(e) = self.declare(&channel).await {
            return match e {
                BrokerError::Config { .. } => RunEnd::Fatal(e),
                other => RunEnd::Broken(other.to_string()),
            };
        }
        let prefetch = self.config.prefetch_count.max(1);
        if let Err(e) = channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
        {
            return RunEnd::Broken(e.to_string());
        }
        let tag = format!("queuebox-{}-{}", self.name, uuid::Uuid::new_v4().simple());
        let mut consumer = match channel
            .basic_consume(
                self.config.queue_name.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
        {
            Ok(c) => c,
            Err(e) => return RunEnd::Broken(e.to_string()),
        };
        self.health.set_up(&self.component());
        backoff.reset();
        tracing::info!(source = %self.name, queue = %self.config.queue_name, "rabbitmq source consuming");

        // Each delivery is acknowledged by its own future right after its row committed.
        let mut in_flight = FuturesUnordered::new();
        let mut store_backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let end = loop {
            tokio::select! {
                _ = stop.cancelled() => break RunEnd::Stopped,
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    match done {
                        Ok(true) => store_backoff.reset(),
                        Ok(false) => {
                            // A failed store was nacked; slow the redelivery loop down while
                            // the database is away.
                            tokio::time::sleep(store_backoff.next_delay()).await;
                        }
                        Err(RunEnd::Crashed) => break RunEnd::Crashed,
                        Err(other) => break other,
                    }
                }
                // One delivery stored at a time: inbox rows keep the queue's order (the inbox
                // relay forwards in creation order). `prefetchCount` is the broker's window.
                next = consumer.next(), if in_flight.is_empty() => {
                    let delivery = match next {
                        Some(Ok(d)) => d,
                        Some(Err(e)) => break RunEnd::Broken(e.to_string()),
                        None => break RunEnd::Broken("the consumer was cancelled by the broker".into()),
                    };
                    let sink = self.sink.clone();
                    let name = self.name.clone();
                    in_flight.push(async move {
                        let headers = amqp_headers(delivery.properties.headers().as_ref());
                        let message_id = delivery.properties.message_id().as_ref().map(|m| m.as_str().to_string());
                        // AMQP `timestamp` is whole seconds since 1970.
                        let broker_time_ms = delivery.properties.timestamp().and_then(|s| i64::try_from(s).ok()?.checked_mul(1000));
                        let received = Received { body: &delivery.data, headers, message_id, record_key: None, broker_time_ms };
                        match sink.store(&received).await {
                            Ok(_) => delivery.acker.ack(BasicAckOptions::default()).await.map(|_| true).map_err(|e| RunEnd::Broken(e.to_string())),
                            Err(IngestError::CrashAfterStore) => Err(RunEnd::Crashed),
                            Err(IngestError::Store(e)) => {
                                tracing::warn!(source = %name, error = %e, "inbox store failed; requeueing the delivery");
                                delivery
                                    .acker
                                    .nack(BasicNackOptions { requeue: true, multiple: false })
                                    .await
                                    .map(|_| false)
                                    .map_err(|e| RunEnd::Broken(e.to_string()))
                            }
                        }
                    });
                }
            }
        };
        match end {
            RunEnd::Crashed => {
                // As if the process died: no further acks, the connection just goes away.
                drop(in_flight);
                drop(consumer);
                drop(channel);
                drop(conn);
                RunEnd::Crashed
            }
            RunEnd::Stopped => {
                // Stop: cancel the consumer, drain what is in flight, close.
                let _ = channel
                    .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
                    .await;
                while let Some(r) = in_flight.next().await {
                    if matches!(r, Err(RunEnd::Crashed)) {
                        break;
                    }
                }
                let _ = conn.close(200, "queuebox stopping".into()).await;
                RunEnd::Stopped
            }
            other => other,
        }
    }
}

/// Connects to `url`; an `amqps://` URL speaks TLS (rustls, system roots plus the `tls:`
/// CA, and the client certificate when given). A refused certificate or login comes back
/// as an error naming the connection and the cause; there is no plain-text fallback.
async fn connect(
    url: &str,
    tls: Option<&BrokerTls>,
    name: &str,
) -> Result<Connection, BrokerError> {
    let at = || format!("RabbitMQ `{name}` at {}", redact_error(url, &[]));
    queuebox_core::tls::install_provider();
    let props =
        ConnectionProperties::default().with_connection_name(format!("queuebox-{name}").into());
    let read = |path: &str| {
        std::fs::read(path).map_err(|e| BrokerError::Tls {
            connection: at(),
            reason: format!("cannot read {path}: {e}"),
        })
    };
    let mut config = lapin::tcp::OwnedTLSConfig::default();
    if let Some(t) = tls {
        if let Some(ca) = &t.ca_file {
            config.cert_chain = Some(String::from_utf8_lossy(&read(ca)?).into_owned());
        }
        if let (Some(cert), Some(key)) = (&t.cert_file, &t.key_file) {
            config.identity = Some(lapin::tcp::OwnedIdentity::PKCS8 {
                pem: read(cert)?,
                key: read(key)?,
            });
        }
    }
    let runtime = lapin::runtime::default_runtime().map_err(|e| BrokerError::Connect {
        connection: at(),
        reason: e.to_string(),
    })?;
    tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect_with_config(url, props, config, runtime),
    )
    .await
    .map_err(|_| BrokerError::Timeout {
        connection: at(),
        reason: "no connection within 10 s".into(),
    })?
    .map_err(|e| {
        let reason = redact_error(&e.to_string(), &[]);
        match closed_in_tls(url, tls, &reason) {
            Some(reason) => BrokerError::Tls {
                connection: at(),
                reason,
            },
            None => classify_connect(at(), reason),
        }
    })
}

/// An `amqps://` connection the server ended during or right after the TLS handshake, with
/// the likely cause added. Under TLS 1.3 the broker judges the client certificate after the
/// client has finished its side of the handshake, so a refused (or missing) certificate often
/// reaches the client only as a reset or a closed socket, words that alone point at the
/// network rather than at the `tls:` settings.
fn closed_in_tls(url: &str, tls: Option<&BrokerTls>, reason: &str) -> Option<String> {
    if !url
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("amqps://")
    {
        return None;
    }
    let lower = reason.to_ascii_lowercase();
    let closed = [
        "connection reset by peer",
        "broken pipe",
        "unexpected eof",
        "unexpectedeof",
        "connection aborted",
    ]
    .iter()
    .any(|w| lower.contains(w));
    let alert = lower.contains("received fatal alert");
    if !closed && !alert {
        return None;
    }
    let sent_certificate = tls.is_some_and(|t| t.cert_file.is_some());
    let required = lower.contains("certificaterequired");
    let what = if required {
        "the server requires a client certificate"
    } else if alert {
        "the server ended the TLS handshake with an alert"
    } else {
        "the server closed the TLS connection"
    };
    let hint = if required && !sent_certificate {
        "set tls.certFile and tls.keyFile"
    } else if sent_certificate {
        "it may have refused the client certificate in tls.certFile (not signed by a CA the \
         server trusts, expired, or not meant for client authentication)"
    } else {
        "a client certificate may be required: set tls.certFile and tls.keyFile"
    };
    Some(format!("{what} ({reason}); {hint}"))
}

/// AMQP headers as strings (reference 6.4): typed values as their text, nested tables and
/// arrays as JSON text, byte arrays as UTF-8 or `base64:`.
pub fn amqp_headers(table: Option<&FieldTable>) -> Vec<(String, String)> {
    let Some(table) = table else {
        return Vec::new();
    };
    table
        .inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), amqp_text(v)))
        .collect()
}

fn amqp_text(v: &AMQPValue) -> String {
    use base64::Engine;
    match v {
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(i) => i.to_string(),
        AMQPValue::ShortShortUInt(i) => i.to_string(),
        AMQPValue::ShortInt(i) => i.to_string(),
        AMQPValue::ShortUInt(i) => i.to_string(),
        AMQPValue::LongInt(i) => i.to_string(),
        AMQPValue::LongUInt(i) => i.to_string(),
        AMQPValue::LongLongInt(i) => i.to_string(),
        AMQPValue::Float(f) => f.to_string(),
        AMQPValue::Double(f) => f.to_string(),
        AMQPValue::ShortString(s) => s.as_str().to_string(),
        AMQPValue::LongString(s) => match std::str::from_utf8(s.as_bytes()) {
            Ok(t) => t.to_string(),
            Err(_) => format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
            ),
        },
        AMQPValue::ByteArray(b) => match std::str::from_utf8(b.as_slice()) {
            Ok(t) => t.to_string(),
            Err(_) => format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(b.as_slice())
            ),
        },
        AMQPValue::Timestamp(t) => t.to_string(),
        AMQPValue::Void => String::new(),
        AMQPValue::FieldTable(t) => {
            let m: serde_json::Map<String, serde_json::Value> = t
                .inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), amqp_json(v)))
                .collect();
            serde_json::Value::Object(m).to_string()
        }
        other => amqp_json(other).to_string(),
    }
}

fn amqp_json(v: &AMQPValue) -> serde_json::Value {
    use serde_json::Value;
    match v {
        AMQPValue::Boolean(b) => Value::Bool(*b),
        AMQPValue::ShortShortInt(i) => (*i).into(),
        AMQPValue::ShortShortUInt(i) => (*i).into(),
        AMQPValue::ShortInt(i) => (*i).into(),
        AMQPValue::ShortUInt(i) => (*i).into(),
        AMQPValue::LongInt(i) => (*i).into(),
        AMQPValue::LongUInt(i) => (*i).into(),
        AMQPValue::LongLongInt(i) => (*i).into(),
        AMQPValue::Float(f) => serde_json::Number::from_f64(f64::from(*f))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        AMQPValue::Double(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        AMQPValue::FieldTable(t) => Value::Object(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), amqp_json(v)))
                .collect(),
        ),
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(amqp_json).collect()),
        AMQPValue::Void => Value::Null,
        other => Value::String(amqp_text(other)),
    }
}

/// A RabbitMQ destination: one durable exchange, one confirm-mode channel used by one
/// publish at a time.
pub struct RabbitMqPublisher {
    name: String,
    config: RabbitMqDestinationConfig,
    exchange: Template,
    routing_key: Template,
    channel: Mutex<Option<(Connection, Channel)>>,
    health: Health,
}

impl RabbitMqPublisher {
    pub fn new(
        name: &str,
        config: RabbitMqDestinationConfig,
        health: Health,
    ) -> Result<Self, BrokerError> {
        let exchange = Template::parse(&config.exchange, "exchange", name)?;
        let routing_key =
            Template::parse(&config.routing_key_template, "routingKeyTemplate", name)?;
        if let Some(c) = &config.exchange_from {
            template::check_from_column(c, "exchangeFrom", name)?;
        }
        Ok(RabbitMqPublisher {
            name: name.to_string(),
            config,
            exchange,
            routing_key,
            channel: Mutex::new(None),
            health,
        })
    }

    pub fn component(&self) -> String {
        format!("rabbitmq.{}", self.name)
    }

    /// The destination, for error messages: `RabbitMQ destination `bus` at amqp://…`.
    fn connection(&self) -> String {
        format!(
            "RabbitMQ destination `{}` at {}",
            self.name,
            redact_error(&self.config.url, &[])
        )
    }

    async fn open(&self) -> Result<(Connection, Channel), BrokerError> {
        let conn = connect(&self.config.url, self.config.tls.as_ref(), &self.name).await?;
        let broken = |e: lapin::Error| BrokerError::Connect {
            connection: self.connection(),
            reason: format!("channel: {e}"),
        };
        let channel = conn.create_channel().await.map_err(broken)?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(broken)?;
        Ok((conn, channel))
    }

    /// Publishes `msg` and returns only after the broker confirmed it. An unroutable
    /// message, a nack or no confirm within the timeout is an error (the row retries).
    pub async fn publish(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        let exchange = template::address(self.config.exchange_from.as_deref(), &self.exchange, msg);
        if exchange.trim().is_empty() {
            return Err(BrokerError::config(format!("destinations.{}.exchange", self.name), format!("rendered an empty exchange from template '{}'. QueueBox does not publish the message.", self.exchange.source())));
        }
        let routing_key = msg
            .routing_key
            .clone()
            .unwrap_or_else(|| self.routing_key.render(msg));
        let mut guard = self.channel.lock().await;
        if guard
            .as_ref()
            .is_none_or(|(c, ch)| !c.status().connected() || !ch.status().connected())
        {
            match self.open().await {
                Ok(pair) => *guard = Some(pair),
                Err(e) => {
                    self.health.set_down(&self.component(), &e.to_string());
                    return Err(e);
                }
            }
        }
        let (_, channel) = guard.as_ref().unwrap();
        let result = self.publish_on(channel, &exchange, &routing_key, msg).await;
        match &result {
            Ok(()) => self.health.set_up(&self.component()),
            Err(e) => {
                // Whatever went wrong, the next publish starts on a fresh channel.
                if !channel.status().connected() {
                    *guard = None;
                }
                if e.is_connection() || guard.is_none() {
                    self.health.set_down(&self.component(), &e.to_string());
                }
            }
        }
        result
    }

    async fn publish_on(
        &self,
        channel: &Channel,
        exchange: &str,
        routing_key: &str,
        msg: &OutboundMessage,
    ) -> Result<(), BrokerError> {
        let refused = |reason: String| BrokerError::Refused {
            connection: self.connection(),
            reason,
        };
        let kind = match self.config.exchange_type {
            ExchangeType::Topic => ExchangeKind::Topic,
            ExchangeType::Direct => ExchangeKind::Direct,
            ExchangeType::Fanout => ExchangeKind::Fanout,
        };
        // Declaring is idempotent and cheap; an exchange that exists with another type fails
        // the row with the broker's reason (and closes the channel, reopened next time).
        channel
            .exchange_declare(
                exchange.into(),
                kind,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| declare_failed(self.connection(), exchange, &e))?;
        let mut headers = FieldTable::default();
        for (k, v) in &self.config.headers {
            headers.insert(k.as_str().into(), AMQPValue::LongString(v.as_str().into()));
        }
        for (k, v) in msg.header_pairs() {
            headers.insert(k.into(), AMQPValue::LongString(v.as_str().into()));
        }
        headers.insert(
            "x-topic".into(),
            AMQPValue::LongString(msg.topic.as_str().into()),
        );
        headers.insert("x-attempt".into(), AMQPValue::LongInt(msg.attempt));
        let mode = match self.config.delivery_mode {
            DeliveryMode::Persistent => 2,
            DeliveryMode::Transient => 1,
        };
        let props = BasicProperties::default()
            .with_message_id(msg.id.to_string().into())
            .with_content_type("application/json".into())
            .with_delivery_mode(mode)
            .with_headers(headers);
        let body =
            serde_json::to_vec(&msg.payload).map_err(|e| refused(format!("payload: {e}")))?;
        let confirm = channel
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &body,
                props,
            )
            .await
            .map_err(|e| BrokerError::Connect {
                connection: self.connection(),
                reason: format!("publish of message {}: {e}", msg.id),
            })?;
        let wait = Duration::from_millis(self.config.timeout_ms.clamp(1000, 5000));
        match tokio::time::timeout(wait, confirm).await {
            Err(_) => Err(BrokerError::Timeout {
                connection: self.connection(),
                reason: format!(
                    "Publish not confirmed: message {} on exchange {} within {} ms",
                    msg.id,
                    exchange,
                    wait.as_millis()
                ),
            }),
            Ok(Err(e)) => Err(BrokerError::Connect {
                connection: self.connection(),
                reason: format!("confirm of message {}: {e}", msg.id),
            }),
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_)))) | Ok(Ok(Confirmation::Nack(Some(_)))) => {
                Err(refused(format!(
                    "Message {} is unroutable on exchange {} with routing key {}",
                    msg.id, exchange, routing_key
                )))
            }
            Ok(Ok(Confirmation::Nack(None))) => Err(refused(format!(
                "Publish not confirmed: the broker nacked message {}",
                msg.id
            ))),
            Ok(Ok(Confirmation::NotRequested)) => Err(refused(
                "Publish not confirmed: confirms are off on the channel".into(),
            )),
        }
    }
}

/// Why an exchange declaration failed. The broker refusing it (an exchange of another type,
/// no permission: a channel-level AMQP error) fails the message; anything else is the
/// connection — reset or closed while the broker restarts, `CONNECTION_FORCED` at its
/// shutdown — and is retried until the broker is back. (The chaos ledger: a connection
/// reset here during a RabbitMQ restart was a refusal, which dead-lettered the row.)
fn declare_failed(connection: String, exchange: &str, e: &lapin::Error) -> BrokerError {
    let reason = format!("exchange {exchange}: {e}");
    if e.is_amqp_soft_error() {
        BrokerError::Refused { connection, reason }
    } else {
        BrokerError::Connect { connection, reason }
    }
}

/// RabbitMQ in the broker table ([`crate::registry::KINDS`]).
pub struct RabbitMq;

impl BrokerKind for RabbitMq {
    fn type_name(&self) -> &'static str {
        "rabbitmq"
    }

    fn source(
        &self,
        source: &SourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Box<dyn SourceClient>, BrokerError> {
        let SourceKind::RabbitMq(c) = &source.kind else {
            return Err(not_mine("rabbitmq", &format!("sources.{}", source.name)));
        };
        Ok(Box::new(RabbitMqSource::new(
            &source.name,
            c.clone(),
            sink,
            health,
        )))
    }

    fn publisher(
        &self,
        destination: &DestinationConfig,
        health: Health,
    ) -> Result<Box<dyn PublisherClient>, BrokerError> {
        let DestinationKind::RabbitMq(c) = &destination.kind else {
            return Err(not_mine(
                "rabbitmq",
                &format!("destinations.{}", destination.name),
            ));
        };
        Ok(Box::new(RabbitMqPublisher::new(
            &destination.name,
            c.clone(),
            health,
        )?))
    }
}

#[async_trait]
impl SourceClient for RabbitMqSource {
    async fn consume(self: Box<Self>, stop: CancellationToken) -> Result<(), BrokerError> {
        // A missing queue fails start-up loudly before the consumer loop begins.
        self.check().await?;
        self.run(stop).await
    }
}

#[async_trait]
impl PublisherClient for RabbitMqPublisher {
    async fn send(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        self.publish(msg).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_cut_by_a_broker_restart_is_the_connection_not_a_refusal() {
        use lapin::protocol::{AMQPError, AMQPErrorKind, AMQPHardError, AMQPSoftError};
        let at = || "RabbitMQ destination `bus`".to_string();
        let reset = lapin::Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(matches!(
            declare_failed(at(), "x", &reset),
            BrokerError::Connect { .. }
        ));
        let forced = lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPErrorKind::Hard(AMQPHardError::CONNECTIONFORCED),
            "broker forced connection closure with reason 'shutdown'".into(),
        )));
        let e = declare_failed(at(), "x", &forced);
        assert!(matches!(e, BrokerError::Connect { .. }) && e.retryable() && e.is_connection());
        let other_type = lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED),
            "inequivalent arg 'type' for exchange 'x'".into(),
        )));
        assert!(matches!(
            declare_failed(at(), "x", &other_type),
            BrokerError::Refused { .. }
        ));
    }

    #[test]
    fn a_tls_connection_the_server_closed_says_a_client_certificate_may_be_required() {
        let reset = "IO error: Connection reset by peer (os error 104)";
        let url = "amqps://guest:***@127.0.0.1:5671/%2f";
        assert_eq!(
            closed_in_tls(url, None, reset).unwrap(),
            "the server closed the TLS connection (IO error: Connection reset by peer (os error 104)); \
             a client certificate may be required: set tls.certFile and tls.keyFile"
        );
        let with_cert = BrokerTls {
            cert_file: Some("/c.crt".into()),
            key_file: Some("/c.key".into()),
            ..Default::default()
        };
        let refused = closed_in_tls(url, Some(&with_cert), reset).unwrap();
        assert!(
            refused.contains("may have refused the client certificate in tls.certFile"),
            "{refused}"
        );
        let alert = closed_in_tls(
            url,
            None,
            "IO error: received fatal alert: CertificateRequired",
        )
        .unwrap();
        assert!(
            alert.starts_with("the server requires a client certificate (IO error: received"),
            "{alert}"
        );
        let unknown_ca = closed_in_tls(
            url,
            Some(&with_cert),
            "IO error: received fatal alert: UnknownCA",
        )
        .unwrap();
        assert!(
            unknown_ca.starts_with("the server ended the TLS handshake with an alert (IO error: received fatal alert: UnknownCA); it may have refused the client certificate"),
            "{unknown_ca}"
        );
        // Plain AMQP, or a TLS failure that already says why, keeps its own words.
        assert_eq!(closed_in_tls("amqp://127.0.0.1:5672/", None, reset), None);
        assert_eq!(
            closed_in_tls(url, None, "invalid peer certificate: UnknownIssuer"),
            None
        );
        assert_eq!(
            closed_in_tls(url, None, "Connection refused (os error 111)"),
            None
        );
    }
}
