//! NATS (async-nats). The source reads JetStream only, through a durable pull consumer on an
//! existing stream: each message is acknowledged after its inbox row commits, and a failed
//! store is negatively acknowledged so JetStream redelivers it at once. Core NATS cannot
//! acknowledge, so it is refused as a source. The destination publishes to JetStream and
//! waits for the stream's ack (`jetStream: false` publishes on core NATS and only flushes).

use std::sync::Arc;
use std::time::Duration;

use crate::client::{not_mine, BrokerKind, PublisherClient, SourceClient};
use async_nats::jetstream::{self, consumer::pull, AckKind};
use async_nats::{HeaderMap, ServerAddr};
use async_trait::async_trait;
use futures::StreamExt;
use queuebox_config::{DestinationConfig, DestinationKind, SourceConfig, SourceKind};
use queuebox_core::headers::redact_error;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::config::{NatsDestinationConfig, NatsSourceConfig};
use crate::error::{classify_connect, BrokerError, IngestError};
use crate::health::Health;
use crate::ingest::{Received, Sink};
use crate::outbound::OutboundMessage;
use crate::reconnect::Backoff;
use crate::template::{self, Template};
use queuebox_config::brokers::NatsLogin;

/// Connects to `servers` (comma separated) with `login` (token, user/password, NKey seed or
/// `.creds` file; TLS with a CA and client certificate).
///
/// The first attempt runs without retries, so a wrong certificate, an expired one, a host
/// name the certificate does not name, a missing client certificate or refused credentials
/// come back at once as an error naming the connection and the cause (async-nats would
/// otherwise retry in the background and report only "tls error"). Only a server that is
/// not reachable yet is retried in the background, as before.
pub async fn connect(
    servers: &str,
    login: &NatsLogin,
    name: &str,
) -> Result<async_nats::Client, BrokerError> {
    let at = || format!("NATS `{name}` at {}", redact_error(servers, &[]));
    let addrs: Vec<ServerAddr> = servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<ServerAddr>().map_err(|e| {
                BrokerError::config(at(), format!("server `{}`: {e}", redact_error(s, &[])))
            })
        })
        .collect::<Result<_, _>>()?;
    let options = || async {
        let mut opts = async_nats::ConnectOptions::new()
            .name(format!("queuebox-{name}"))
            .connection_timeout(Duration::from_secs(5));
        if let Some(path) = &login.creds_file {
            opts = opts
                .credentials_file(path)
                .await
                .map_err(|e| BrokerError::Auth {
                    connection: at(),
                    reason: format!("cannot read the credentials file {path}: {e}"),
                })?;
        } else if let Some(seed) = &login.nkey_seed {
            opts = opts.nkey(seed.expose().to_string());
        } else if let Some(t) = &login.token {
            opts = opts.token(t.expose().to_string());
        } else if let (Some(u), Some(p)) = (&login.username, &login.password) {
            opts = opts.user_and_password(u.to_string(), p.expose().to_string());
        }
        if let Some(tls) = &login.tls {
            queuebox_core::tls::install_provider();
            opts = opts.require_tls(true);
            if let Some(ca) = &tls.ca_file {
                opts = opts.add_root_certificates(ca.into());
            }
            if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
                opts = opts.add_client_certificate(cert.into(), key.into());
            }
        }
        Ok::<_, BrokerError>(opts)
    };
    match options().await?.connect(addrs.clone()).await {
        Ok(client) => Ok(client),
        Err(e) if unreachable(&e) => {
            tracing::warn!(connection = %at(), error = %chain(&e), "NATS is not reachable yet; retrying in the background");
            // async-nats reconnects by itself (with its own backoff); keep it trying for ever.
            // retry_on_initial_connect returns at once; the first operation waits for the link.
            options()
                .await?
                .retry_on_initial_connect()
                .connect(addrs)
                .await
                .map_err(|e| connect_error(at(), &e))
        }
        Err(e) => Err(connect_error(at(), &e)),
    }
}

/// A refused login or TLS handshake by async-nats' kind, the rest by its cause's words.
fn connect_error(connection: String, e: &async_nats::ConnectError) -> BrokerError {
    use async_nats::ConnectErrorKind as K;
    let reason = chain(e);
    match e.kind() {
        K::Authentication | K::AuthorizationViolation => BrokerError::Auth { connection, reason },
        K::Tls => BrokerError::Tls { connection, reason },
        _ => classify_connect(connection, reason),
    }
}

/// True when no server answered at all (refused, timed out, no route, no DNS answer): the
/// one case worth retrying in the background. A TLS failure surfaces as an I/O error too,
/// so the kind alone does not tell; the underlying `io::ErrorKind` does.
fn unreachable(e: &async_nats::ConnectError) -> bool {
    use async_nats::ConnectErrorKind as K;
    use std::io::ErrorKind as Io;
    match e.kind() {
        K::TimedOut | K::Dns => true,
        K::Io => {
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                if let Some(io) = c.downcast_ref::<std::io::Error>() {
                    return matches!(
                        io.kind(),
                        Io::ConnectionRefused
                            | Io::TimedOut
                            | Io::HostUnreachable
                            | Io::NetworkUnreachable
                            | Io::AddrNotAvailable
                    );
                }
                cause = c.source();
            }
            false
        }
        _ => false,
    }
}

/// An error and its causes on one line (`tls error: invalid peer certificate: UnknownIssuer`).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

fn header_pairs(h: Option<&HeaderMap>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = h {
        for (name, values) in h.iter() {
            for v in values {
                out.push((name.to_string(), v.as_str().to_string()));
            }
        }
    }
    out
}

/// Refuses what a NATS source cannot be: core NATS (no acknowledgement).
pub fn validate_source(name: &str, config: &NatsSourceConfig) -> Result<(), BrokerError> {
    if !config.jet_stream {
        return Err(BrokerError::config(format!("sources.{name}.jetStream"), format!(
            "a NATS source reads JetStream only. Core NATS cannot acknowledge a message, so an inbox on it would lose every message that arrives while QueueBox restarts; publish to a JetStream stream and name it in sources.{name}.stream"
        )));
    }
    if config.stream.trim().is_empty() || config.durable.trim().is_empty() {
        return Err(BrokerError::config(
            format!("sources.{name}"),
            "stream and durable are required for a NATS source",
        ));
    }
    Ok(())
}

enum RunEnd {
    Stopped,
    Broken(String),
    Fatal(BrokerError),
    Crashed,
}

/// A NATS JetStream source: one durable pull consumer.
pub struct NatsSource {
    name: String,
    config: NatsSourceConfig,
    sink: Arc<dyn Sink>,
    health: Health,
}

impl NatsSource {
    pub fn new(
        name: &str,
        config: NatsSourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Self, BrokerError> {
        validate_source(name, &config)?;
        health.register(&format!("nats.{name}"));
        Ok(NatsSource {
            name: name.to_string(),
            config,
            sink,
            health,
        })
    }

    pub fn component(&self) -> String {
        format!("nats.{}", self.name)
    }

    pub async fn run(&self, stop: CancellationToken) -> Result<(), BrokerError> {
        let mut backoff = Backoff::default();
        loop {
            match self.run_once(&stop, &mut backoff).await {
                RunEnd::Stopped => return Ok(()),
                RunEnd::Crashed => return Err(IngestError::CrashAfterStore.into()),
                RunEnd::Fatal(e) => {
                    self.health.set_down(&self.component(), &e.to_string());
                    return Err(e);
                }
                RunEnd::Broken(why) => {
                    self.health.set_down(&self.component(), &why);
                    let d = backoff.next_delay();
                    tracing::warn!(source = %self.name, error = %why, delay_ms = d.as_millis() as u64, "nats source disconnected; reconnecting");
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(d) => {}
                    }
                }
            }
        }
    }

    async fn run_once(&self, stop: &CancellationToken, backoff: &mut Backoff) -> RunEnd {
        let c = &self.config;
        let client = match connect(&c.servers, &c.login, &self.name).await {
            Ok(cl) => cl,
            Err(e) => return RunEnd::Broken(e.to_string()),
        };
        let js = jetstream::new(client.clone());
        let stream = match tokio::time::timeout(Duration::from_secs(10), js.get_stream(&c.stream))
            .await
        {
            Err(_) => return RunEnd::Broken("JetStream did not answer within 10 s".into()),
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let text = e.to_string();
                if text.contains("not found") || text.contains("10059") {
                    return RunEnd::Fatal(BrokerError::config(
                        format!("sources.{}.stream", self.name),
                        format!("JetStream stream '{}' does not exist. QueueBox never creates streams; create it (e.g. `nats stream add {}`)", c.stream, c.stream),
                    ));
                }
                return RunEnd::Broken(text);
            }
        };
        let cfg = pull::Config {
            durable_name: Some(c.durable.clone()),
            filter_subject: c.filter_subject.clone().unwrap_or_default(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_millis(c.ack_wait_ms.max(1000)),
            ..Default::default()
        };
        let consumer = match stream.get_or_create_consumer(&c.durable, cfg).await {
            Ok(cons) => cons,
            Err(e) => return RunEnd::Broken(format!("durable consumer '{}': {e}", c.durable)),
        };
        let mut messages = match consumer
            .stream()
            .max_messages_per_batch(c.batch_size.max(1))
            .heartbeat(Duration::from_secs(5))
            .messages()
            .await
        {
            Ok(m) => m,
            Err(e) => return RunEnd::Broken(e.to_string()),
        };
        self.health.set_up(&self.component());
        backoff.reset();
        tracing::info!(source = %self.name, stream = %c.stream, durable = %c.durable, "nats source consuming");
        let mut store_backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return RunEnd::Stopped,
                n = messages.next() => n,
            };
            let msg = match next {
                Some(Ok(m)) => m,
                Some(Err(e)) => return RunEnd::Broken(e.to_string()),
                None => return RunEnd::Broken("the consumer stream ended".into()),
            };
            let received = Received {
                body: &msg.payload,
                headers: header_pairs(msg.headers.as_ref()),
                message_id: None,
                record_key: None,
                broker_time_ms: msg
                    .info()
                    .ok()
                    .map(|i| (i.published.unix_timestamp_nanos() / 1_000_000) as i64),
            };
            match self.sink.store(&received).await {
                Ok(()) => {
                    store_backoff.reset();
                    if let Err(e) = msg.double_ack().await {
                        // The row is stored; JetStream redelivers after ackWait and the
                        // repeat deduplicates.
                        return RunEnd::Broken(format!("ack failed: {e}"));
                    }
                }
                Err(IngestError::CrashAfterStore) => return RunEnd::Crashed,
                Err(IngestError::Store(e)) => {
                    tracing::warn!(source = %self.name, error = %e, "inbox store failed; nak, JetStream redelivers");
                    let _ = msg.ack_with(AckKind::Nak(None)).await;
                    tokio::time::sleep(store_backoff.next_delay()).await;
                }
            }
        }
    }
}

/// A NATS destination: JetStream publish acknowledged by the stream (default), or core NATS.
pub struct NatsPublisher {
    name: String,
    config: NatsDestinationConfig,
    subject: Template,
    client: OnceCell<async_nats::Client>,
    /// The JetStream context, made once from the client: making one spawns its ack task and
    /// dropping it tears the task down, which per message cost ~10 % of the relay's CPU in an
    /// outbox drain to JetStream (benchmarks/outbox.md).
    jetstream: OnceCell<jetstream::Context>,
    health: Health,
}

impl NatsPublisher {
    pub fn new(
        name: &str,
        config: NatsDestinationConfig,
        health: Health,
    ) -> Result<Self, BrokerError> {
        let subject = Template::parse(&config.subject, "subject", name)?;
        if let Some(c) = &config.subject_from {
            template::check_from_column(c, "subjectFrom", name)?;
        }
        Ok(NatsPublisher {
            name: name.to_string(),
            config,
            subject,
            client: OnceCell::new(),
            jetstream: OnceCell::new(),
            health,
        })
    }

    pub fn component(&self) -> String {
        format!("nats.{}", self.name)
    }

    async fn client(&self) -> Result<&async_nats::Client, BrokerError> {
        let c = &self.config;
        self.client
            .get_or_try_init(|| connect(&c.servers, &c.login, &self.name))
            .await
    }

    /// True while the client holds a connection.
    pub fn connected(&self) -> bool {
        self.client
            .get()
            .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected)
    }

    pub async fn publish(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        let result = self.publish_inner(msg).await;
        match &result {
            Ok(()) => self.health.set_up(&self.component()),
            Err(e) if !self.connected() => self.health.set_down(&self.component(), &e.to_string()),
            Err(_) => {}
        }
        result
    }

    /// The destination, for error messages: `NATS destination `events` at nats://…`.
    fn connection(&self) -> String {
        format!(
            "NATS destination `{}` at {}",
            self.name,
            redact_error(&self.config.servers, &[])
        )
    }

    async fn publish_inner(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        let subject = template::address(self.config.subject_from.as_deref(), &self.subject, msg);
        if subject.trim().is_empty() {
            return Err(BrokerError::config(format!("destinations.{}.subject", self.name), format!("rendered an empty subject from template '{}'. QueueBox does not publish the message.", self.subject.source())));
        }
        let refused = |reason: String| BrokerError::Refused {
            connection: self.connection(),
            reason,
        };
        let mut headers = HeaderMap::new();
        for (k, v) in &self.config.headers {
            headers.insert(k.as_str(), v.as_str());
        }
        for (k, v) in msg.header_pairs() {
            headers.insert(k, v.as_str());
        }
        let id = msg.id.to_string();
        headers.insert("x-message-id", id.as_str());
        // JetStream's deduplication id: a re-publish of the same row within the stream's
        // duplicate window (a crash between the publish and the sent mark, an ack that timed
        // out) is stored once. Set after the row headers, so a row cannot override it.
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
        headers.insert("x-topic", msg.topic.as_str());
        headers.insert("x-attempt", msg.attempt.to_string().as_str());
        if let Some(k) = &msg.key {
            headers.insert("x-message-key", k.as_str());
        }
        let body = bytes::Bytes::from(
            serde_json::to_vec(&msg.payload).map_err(|e| refused(format!("payload: {e}")))?,
        );
        let client = self.client().await?;
        let budget = Duration::from_millis(self.config.timeout_ms.max(1000));
        if self.config.jet_stream {
            let js = self
                .jetstream
                .get_or_init(|| async { jetstream::new(client.clone()) })
                .await;
            let fut = async {
                let ack = js
                    .publish_with_headers(subject.clone(), headers, body)
                    .await
                    .map_err(|e| e.to_string())?;
                ack.await.map_err(|e| e.to_string())
            };
            match tokio::time::timeout(budget, fut).await {
                Err(_) => Err(BrokerError::Timeout {
                    connection: self.connection(),
                    reason: format!(
                        "JetStream did not acknowledge message {} on subject {} within {} ms",
                        msg.id,
                        subject,
                        budget.as_millis()
                    ),
                }),
                Ok(Err(e)) => Err(refused(format!(
                    "JetStream refused message {} on subject {}: {e}",
                    msg.id, subject
                ))),
                Ok(Ok(ack)) => {
                    if ack.duplicate {
                        // Already in the stream: the consumers have it once. Said aloud,
                        // because an admin replay within the window is dropped the same way.
                        tracing::info!(messageId = %msg.id, subject = %subject, stream = %ack.stream,
                            "JetStream already holds this message id (duplicate window): stored once, not again");
                    }
                    Ok(())
                }
            }
        } else {
            // Core NATS: no delivery guarantee; the flush only says the server got the bytes.
            let fut = async {
                client
                    .publish_with_headers(subject.clone(), headers, body)
                    .await
                    .map_err(|e| e.to_string())?;
                client.flush().await.map_err(|e| e.to_string())
            };
            match tokio::time::timeout(budget, fut).await {
                Err(_) => Err(BrokerError::Timeout {
                    connection: self.connection(),
                    reason: format!(
                        "NATS flush of message {} did not finish within {} ms",
                        msg.id,
                        budget.as_millis()
                    ),
                }),
                Ok(Err(e)) => Err(BrokerError::Connect {
                    connection: self.connection(),
                    reason: format!("publish of message {}: {e}", msg.id),
                }),
                Ok(Ok(())) => Ok(()),
            }
        }
    }
}

/// NATS in the broker table ([`crate::registry::KINDS`]).
pub struct Nats;

impl BrokerKind for Nats {
    fn type_name(&self) -> &'static str {
        "nats"
    }

    fn check_source(&self, source: &SourceConfig) -> Result<(), BrokerError> {
        match &source.kind {
            SourceKind::Nats(c) => validate_source(&source.name, c),
            _ => Err(not_mine("nats", &format!("sources.{}", source.name))),
        }
    }

    fn source(
        &self,
        source: &SourceConfig,
        sink: Arc<dyn Sink>,
        health: Health,
    ) -> Result<Box<dyn SourceClient>, BrokerError> {
        let SourceKind::Nats(c) = &source.kind else {
            return Err(not_mine("nats", &format!("sources.{}", source.name)));
        };
        Ok(Box::new(NatsSource::new(
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
        let DestinationKind::Nats(c) = &destination.kind else {
            return Err(not_mine(
                "nats",
                &format!("destinations.{}", destination.name),
            ));
        };
        Ok(Box::new(NatsPublisher::new(
            &destination.name,
            c.clone(),
            health,
        )?))
    }
}

#[async_trait]
impl SourceClient for NatsSource {
    async fn consume(self: Box<Self>, stop: CancellationToken) -> Result<(), BrokerError> {
        self.run(stop).await
    }
}

#[async_trait]
impl PublisherClient for NatsPublisher {
    async fn send(&self, msg: &OutboundMessage) -> Result<(), BrokerError> {
        self.publish(msg).await
    }
}
