//! The kind-specific keys of the broker sources and destinations (RabbitMQ, Kafka, NATS),
//! listed in docs/configuration.md. The keys every source shares (`consumption`, `topic`, the `*Path` keys)
//! stay in [`crate::SourceCommon`]. The clients live in the `queuebox-brokers` crate.
//!
//! A broker kind lists its structs in `key_lists` (the "did you mean" hints and environment
//! mapping), is typed by its entry in the parser's broker kind table (`crate::parse`), and
//! implements [`BrokerSourceKeys`] and [`BrokerDestinationKeys`]: secrets, validation (with
//! the checks of this module), the attribute headers and the publish budget are asked of
//! those traits (through `SourceKind::broker` and `DestinationKind::broker`), never matched
//! kind by kind. This module imports no other of the configuration's types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checks::{positive, readable};
use crate::secret::Secret;
use crate::strict::{fields_of, ConfigErrors};

/// What the relay asks of a broker source's keys, whatever its kind.
pub trait BrokerSourceKeys {
    /// The header names the attributes are read from.
    fn attribute_headers(&self) -> &AttributeHeaders;
    /// `eventTypeFromHeader`: the event type may come from a header.
    fn event_type_from_header(&self) -> bool;
    /// True when the broker's record key is the aggregate id (Kafka).
    fn record_key_is_aggregate(&self) -> bool {
        false
    }
    /// The credentials to mask in log lines.
    fn secrets(&self) -> Vec<&Secret> {
        Vec::new()
    }
    /// The kind's own checks, each naming its key under `path` (`sources.<name>`).
    fn validate(&self, path: &str, errs: &mut ConfigErrors);
}

/// What the relay asks of a broker destination's keys, whatever its kind.
pub trait BrokerDestinationKeys {
    /// `timeoutMs`: the whole budget of one publish.
    fn timeout_ms(&self) -> u64;
    /// `headers:`, the static headers of every publish: masked in log lines and `last_error`
    /// and printed `***` by `check-config`, like the credentials.
    fn static_headers(&self) -> &BTreeMap<String, String>;
    /// The credentials to mask in log lines.
    fn secrets(&self) -> Vec<&Secret> {
        Vec::new()
    }
    /// The kind's own checks, each naming its key under `path` (`destinations.<name>`).
    fn validate(&self, path: &str, errs: &mut ConfigErrors);
}

fn prefetch() -> u16 {
    10
}
fn yes() -> bool {
    true
}
fn thirty_seconds() -> u64 {
    30_000
}
fn hundred() -> usize {
    100
}
fn topic_placeholder() -> String {
    "{{ topic }}".into()
}
fn key_placeholder() -> String {
    "{{ key }}".into()
}

/// `tls:` of a broker connection: the CA that signs the broker's certificate (else the
/// system's roots) and, when the broker asks for one, the client certificate and key (PEM
/// files). A `tls:` block makes TLS required: there is no fallback to plain text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct BrokerTls {
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub cert_file: Option<String>,
    #[serde(default)]
    pub key_file: Option<String>,
}

/// How a NATS source or destination logs in and encrypts (`username`/`password`, `token`,
/// `nkeySeed`, `credsFile`, `tls`), shared by both. Its keys sit beside the other keys of
/// the source or destination; parse.rs takes them out and types them here (see the `nats`
/// entry of its broker kind table) rather than `#[serde(flatten)]`, which would hide the keys from the
/// strict unknown-key check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NatsLogin {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<Secret>,
    #[serde(default)]
    pub token: Option<Secret>,
    /// An NKey seed (`SU…`, best as `file:/path`): the server checks a signature of its nonce.
    #[serde(default)]
    pub nkey_seed: Option<Secret>,
    /// A `.creds` file (a user JWT and its NKey seed, as `nsc` writes it).
    #[serde(default)]
    pub creds_file: Option<String>,
    #[serde(default)]
    pub tls: Option<BrokerTls>,
}

/// Header names a broker source reads the attributes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AttributeHeaders {
    pub idempotency_key: String,
    pub aggregate_id: String,
    pub event_type: String,
}

impl Default for AttributeHeaders {
    fn default() -> Self {
        AttributeHeaders {
            idempotency_key: "x-idempotency-key".into(),
            aggregate_id: "x-aggregate-id".into(),
            event_type: "x-event-type".into(),
        }
    }
}

/// `sources.<name>` with `type: rabbitmq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMqSourceConfig {
    pub queue_name: String,
    pub connection_url: String,
    /// CA and client certificate for an `amqps://` URL (validation refuses it on `amqp://`).
    #[serde(default)]
    pub tls: Option<BrokerTls>,
    #[serde(default = "prefetch")]
    pub prefetch_count: u16,
    #[serde(default)]
    pub declare_queue: bool,
    #[serde(default)]
    pub event_type_from_header: bool,
    #[serde(default)]
    pub attribute_headers: AttributeHeaders,
}

/// `sources.<name>` with `type: nats` (JetStream only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsSourceConfig {
    pub servers: String,
    pub stream: String,
    pub durable: String,
    #[serde(default)]
    pub filter_subject: Option<String>,
    #[serde(default = "thirty_seconds")]
    pub ack_wait_ms: u64,
    #[serde(default = "hundred")]
    pub batch_size: usize,
    /// `false` is refused: core NATS cannot acknowledge, so an inbox on it loses messages.
    #[serde(default = "yes")]
    pub jet_stream: bool,
    /// Typed by parse.rs from this entry's login keys; `flatten` here only writes them back
    /// beside the others in `check-config`'s output (deserialising skips the field).
    #[serde(flatten, skip_deserializing)]
    pub login: NatsLogin,
    #[serde(default)]
    pub event_type_from_header: bool,
    #[serde(default)]
    pub attribute_headers: AttributeHeaders,
}

/// `autoOffsetReset` of a Kafka source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OffsetReset {
    #[default]
    Earliest,
    Latest,
}

/// `sources.<name>` with `type: kafka`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSourceConfig {
    pub bootstrap_servers: String,
    pub topics: Vec<String>,
    pub group_id: String,
    #[serde(default)]
    pub auto_offset_reset: OffsetReset,
    #[serde(default = "hundred")]
    pub max_poll_records: usize,
    #[serde(default)]
    pub security_protocol: Option<String>,
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    #[serde(default)]
    pub sasl_username: Option<String>,
    #[serde(default)]
    pub sasl_password: Option<Secret>,
    /// CA, client certificate and key for `securityProtocol: SSL` or `SASL_SSL`.
    #[serde(default)]
    pub tls: Option<BrokerTls>,
    #[serde(default)]
    pub event_type_from_header: bool,
    #[serde(default)]
    pub attribute_headers: AttributeHeaders,
}

/// `exchangeType` of a RabbitMQ destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeType {
    #[default]
    Topic,
    Direct,
    Fanout,
}

/// `deliveryMode` of a RabbitMQ destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    #[default]
    Persistent,
    Transient,
}

/// `destinations.<name>` with `type: rabbitmq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMqDestinationConfig {
    pub url: String,
    /// CA and client certificate for an `amqps://` URL (validation refuses it on `amqp://`).
    #[serde(default)]
    pub tls: Option<BrokerTls>,
    pub exchange: String,
    #[serde(default)]
    pub exchange_from: Option<String>,
    #[serde(default)]
    pub exchange_type: ExchangeType,
    #[serde(default = "topic_placeholder")]
    pub routing_key_template: String,
    #[serde(default)]
    pub delivery_mode: DeliveryMode,
    #[serde(default, serialize_with = "crate::secret::masked_values")]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "thirty_seconds")]
    pub timeout_ms: u64,
}

/// `destinations.<name>` with `type: nats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsDestinationConfig {
    pub servers: String,
    pub subject: String,
    #[serde(default)]
    pub subject_from: Option<String>,
    #[serde(default = "yes")]
    pub jet_stream: bool,
    #[serde(default = "thirty_seconds")]
    pub timeout_ms: u64,
    /// Typed by parse.rs from this entry's login keys; `flatten` here only writes them back
    /// beside the others in `check-config`'s output (deserialising skips the field).
    #[serde(flatten, skip_deserializing)]
    pub login: NatsLogin,
    #[serde(default, serialize_with = "crate::secret::masked_values")]
    pub headers: BTreeMap<String, String>,
}

/// `destinations.<name>` with `type: kafka`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaDestinationConfig {
    pub bootstrap_servers: String,
    pub topic: String,
    #[serde(default)]
    pub topic_from: Option<String>,
    #[serde(default = "key_placeholder")]
    pub key_template: String,
    #[serde(default = "thirty_seconds")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub security_protocol: Option<String>,
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    #[serde(default)]
    pub sasl_username: Option<String>,
    #[serde(default)]
    pub sasl_password: Option<Secret>,
    /// CA, client certificate and key for `securityProtocol: SSL` or `SASL_SSL`.
    #[serde(default)]
    pub tls: Option<BrokerTls>,
    #[serde(default, serialize_with = "crate::secret::masked_values")]
    pub headers: BTreeMap<String, String>,
}

impl BrokerSourceKeys for RabbitMqSourceConfig {
    fn attribute_headers(&self) -> &AttributeHeaders {
        &self.attribute_headers
    }
    fn event_type_from_header(&self) -> bool {
        self.event_type_from_header
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        amqp_tls(&self.connection_url, &self.tls, path, errs);
    }
}

impl BrokerDestinationKeys for RabbitMqDestinationConfig {
    fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
    fn static_headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        // A zero publish budget times every publish out: each row would go dead.
        positive(errs, &format!("{path}.timeoutMs"), self.timeout_ms);
        amqp_tls(&self.url, &self.tls, path, errs);
    }
}

impl BrokerSourceKeys for KafkaSourceConfig {
    fn attribute_headers(&self) -> &AttributeHeaders {
        &self.attribute_headers
    }
    fn event_type_from_header(&self) -> bool {
        self.event_type_from_header
    }
    fn record_key_is_aggregate(&self) -> bool {
        true
    }
    fn secrets(&self) -> Vec<&Secret> {
        self.sasl_password.iter().collect()
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if self.topics.is_empty() {
            errs.push(format!("{path}.topics"), "at least one topic is required");
        }
        positive(
            errs,
            &format!("{path}.maxPollRecords"),
            self.max_poll_records as u64,
        );
        kafka_security(
            &self.security_protocol,
            &self.sasl_mechanism,
            &self.tls,
            path,
            errs,
        );
    }
}

impl BrokerDestinationKeys for KafkaDestinationConfig {
    fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
    fn static_headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }
    fn secrets(&self) -> Vec<&Secret> {
        self.sasl_password.iter().collect()
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if self.timeout_ms < 2000 {
            errs.push(
                format!("{path}.timeoutMs"),
                "must be at least 2000 (the whole publish budget)",
            );
        }
        kafka_security(
            &self.security_protocol,
            &self.sasl_mechanism,
            &self.tls,
            path,
            errs,
        );
    }
}

impl BrokerSourceKeys for NatsSourceConfig {
    fn attribute_headers(&self) -> &AttributeHeaders {
        &self.attribute_headers
    }
    fn event_type_from_header(&self) -> bool {
        self.event_type_from_header
    }
    fn secrets(&self) -> Vec<&Secret> {
        self.login.secrets()
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if !self.jet_stream {
            errs.push(
                format!("{path}.jetStream"),
                "a NATS source reads JetStream only: core NATS cannot acknowledge, so an inbox on it would lose every message that arrives while QueueBox restarts",
            );
        } else {
            positive(errs, &format!("{path}.ackWaitMs"), self.ack_wait_ms);
            positive(errs, &format!("{path}.batchSize"), self.batch_size as u64);
        }
        nats_login(&self.login, path, errs);
    }
}

impl BrokerDestinationKeys for NatsDestinationConfig {
    fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
    fn static_headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }
    fn secrets(&self) -> Vec<&Secret> {
        self.login.secrets()
    }
    fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        positive(errs, &format!("{path}.timeoutMs"), self.timeout_ms);
        nats_login(&self.login, path, errs);
    }
}

impl NatsLogin {
    /// The password, token and NKey seed, to mask in log lines.
    pub fn secrets(&self) -> Vec<&Secret> {
        [&self.password, &self.token, &self.nkey_seed]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// The key lists of this module's structs (env mapping, "did you mean" hints).
pub(crate) fn key_lists() -> Vec<&'static [&'static str]> {
    vec![
        fields_of::<BrokerTls>(),
        fields_of::<AttributeHeaders>(),
        fields_of::<RabbitMqSourceConfig>(),
        fields_of::<RabbitMqDestinationConfig>(),
        fields_of::<KafkaSourceConfig>(),
        fields_of::<KafkaDestinationConfig>(),
        fields_of::<NatsSourceConfig>(),
        fields_of::<NatsDestinationConfig>(),
        fields_of::<NatsLogin>(),
    ]
}

/// One way to log in to NATS, and readable certificate files.
fn nats_login(l: &NatsLogin, path: &str, errs: &mut ConfigErrors) {
    let ways = [
        l.token.is_some(),
        l.username.is_some() || l.password.is_some(),
        l.nkey_seed.is_some(),
        l.creds_file.is_some(),
    ];
    if ways.iter().filter(|w| **w).count() > 1 {
        errs.push(
            path,
            "set only one of token, username/password, nkeySeed, credsFile",
        );
    }
    if l.username.is_some() != l.password.is_some() {
        errs.push(path, "username and password go together");
    }
    if let Some(f) = &l.creds_file {
        readable(errs, &format!("{path}.credsFile"), f);
    }
    if let Some(t) = &l.tls {
        broker_tls(t, &format!("{path}.tls"), errs);
    }
}

/// Kafka's `securityProtocol` and `saslMechanism` are librdkafka's names; a `tls:` block
/// needs an SSL protocol (else its certificates would be set and never used).
fn kafka_security(
    protocol: &Option<String>,
    mechanism: &Option<String>,
    tls: &Option<BrokerTls>,
    path: &str,
    errs: &mut ConfigErrors,
) {
    let p = protocol
        .as_deref()
        .unwrap_or("PLAINTEXT")
        .to_ascii_uppercase();
    if !["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"].contains(&p.as_str()) {
        errs.push(
            format!("{path}.securityProtocol"),
            format!("`{p}` is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        );
    }
    if let Some(m) = mechanism {
        if !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&m.to_ascii_uppercase().as_str()) {
            errs.push(
                format!("{path}.saslMechanism"),
                format!("`{m}` is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
            );
        }
    }
    if let Some(t) = tls {
        if !p.ends_with("SSL") {
            errs.push(format!("{path}.tls"), format!("needs securityProtocol SSL or SASL_SSL (it is {p}): nothing would be encrypted"));
        }
        broker_tls(t, &format!("{path}.tls"), errs);
    }
}

/// A RabbitMQ `tls:` block needs an `amqps://` URL (lapin speaks TLS by the scheme alone).
fn amqp_tls(url: &str, tls: &Option<BrokerTls>, path: &str, errs: &mut ConfigErrors) {
    if let Some(t) = tls {
        if !url
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("amqps://")
        {
            errs.push(
                format!("{path}.tls"),
                "needs an amqps:// URL: nothing would be encrypted",
            );
        }
        broker_tls(t, &format!("{path}.tls"), errs);
    }
}

/// A broker's `tls:` block: readable files, and a client certificate with its key.
fn broker_tls(t: &BrokerTls, path: &str, errs: &mut ConfigErrors) {
    for (key, file) in [
        ("caFile", &t.ca_file),
        ("certFile", &t.cert_file),
        ("keyFile", &t.key_file),
    ] {
        if let Some(f) = file {
            readable(errs, &format!("{path}.{key}"), f);
        }
    }
    if t.cert_file.is_some() != t.key_file.is_some() {
        errs.push(
            path,
            "certFile and keyFile go together (the client certificate and its key)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_yaml_with_env, DestinationKind, SourceKind};

    const YAML: &str = "
database:
  url: postgres://app@127.0.0.1:5432/app
destinations:
  bus:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/%2f
    exchange: events
    exchangeType: fanout
  log:
    type: kafka
    bootstrapServers: 127.0.0.1:9092
    topic: '{{ topic }}'
    saslPassword: kafka-secret
  js:
    type: nats
    servers: nats://127.0.0.1:4222
    subject: 'out.{{ topic }}'
    jetStream: false
routes:
  - topicPattern: '**'
    destination: bus
sources:
  orders:
    type: rabbitmq
    queueName: orders
    connectionUrl: amqp://127.0.0.1
    consumption: pull
    attributeHeaders:
      idempotencyKey: x-key
  clicks:
    type: kafka
    bootstrapServers: 127.0.0.1:9092
    topics: [clicks]
    groupId: qb
    autoOffsetReset: latest
  events:
    type: nats
    servers: nats://127.0.0.1:4222
    stream: EVENTS
    durable: qb
";

    #[test]
    fn broker_kinds_parse_with_their_defaults() {
        let c = from_yaml_with_env(YAML, &[]).unwrap();
        let SourceKind::RabbitMq(r) = &c.sources["orders"].kind else {
            panic!("rabbitmq")
        };
        assert_eq!(
            (
                r.prefetch_count,
                r.declare_queue,
                r.attribute_headers.idempotency_key.as_str()
            ),
            (10, false, "x-key")
        );
        assert_eq!(r.attribute_headers.event_type, "x-event-type");
        assert_eq!(c.sources["orders"].topic_template(), "{{ source }}");
        let SourceKind::Kafka(k) = &c.sources["clicks"].kind else {
            panic!("kafka")
        };
        assert_eq!(
            (k.auto_offset_reset, k.max_poll_records),
            (OffsetReset::Latest, 100)
        );
        let SourceKind::Nats(n) = &c.sources["events"].kind else {
            panic!("nats")
        };
        assert!(n.jet_stream && n.ack_wait_ms == 30_000);
        let DestinationKind::RabbitMq(b) = &c.destinations["bus"].kind else {
            panic!("rabbitmq")
        };
        assert_eq!(
            (
                b.exchange_type,
                b.delivery_mode,
                b.routing_key_template.as_str()
            ),
            (
                ExchangeType::Fanout,
                DeliveryMode::Persistent,
                "{{ topic }}"
            )
        );
        let DestinationKind::Nats(j) = &c.destinations["js"].kind else {
            panic!("nats")
        };
        assert!(!j.jet_stream, "core NATS is allowed for destinations");
        assert!(c.secrets().contains(&"kafka-secret".to_string()));
    }

    #[test]
    fn nats_login_keys_are_typed_into_the_shared_block_and_its_secrets_are_masked() {
        let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml").to_string();
        let yaml = YAML
            .replace(
                "    durable: qb\n",
                "    durable: qb\n    nkeySeed: SUAseed-source\n    tls:\n      caFile: CA\n",
            )
            .replace(
                "    jetStream: false\n",
                "    jetStream: false\n    username: relay\n    password: nats-pass\n",
            )
            // A readable file stands for the CA (validation reads it).
            .replace("caFile: CA", &format!("caFile: {ca}"));
        let c = from_yaml_with_env(&yaml, &[]).unwrap();
        let SourceKind::Nats(n) = &c.sources["events"].kind else {
            panic!("nats")
        };
        assert_eq!(
            n.login.nkey_seed.as_ref().unwrap().expose(),
            "SUAseed-source"
        );
        assert_eq!(
            n.login.tls.as_ref().unwrap().ca_file.as_deref(),
            Some(ca.as_str())
        );
        let DestinationKind::Nats(j) = &c.destinations["js"].kind else {
            panic!("nats")
        };
        assert_eq!(j.login.username.as_deref(), Some("relay"));
        let secrets = c.secrets();
        for s in ["SUAseed-source", "nats-pass"] {
            assert!(
                secrets.contains(&s.to_string()),
                "{s} not masked: {secrets:?}"
            );
        }
        // check-config shows the login keys beside the others, secrets as ***.
        let shown = c.to_redacted_yaml();
        assert!(
            shown.contains("nkeySeed: '***'") && shown.contains(&format!("caFile: {ca}")),
            "{shown}"
        );
        assert!(
            shown.contains("username: relay") && !shown.contains("nats-pass"),
            "{shown}"
        );
        assert!(!shown.contains("login"), "{shown}");
    }

    #[test]
    fn unknown_and_mistyped_nats_keys_name_their_full_path_once() {
        let bad = YAML
            .replace(
                "    durable: qb\n",
                "    durable: qb\n    nkeySed: x\n    tls:\n      caFle: /ca.pem\n",
            )
            .replace(
                "    jetStream: false\n",
                "    jetStream: false\n    usernme: relay\n    token: [a]\n",
            );
        let e = from_yaml_with_env(&bad, &[]).unwrap_err();
        let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "destinations.js.token",
                "destinations.js.usernme",
                "sources.events.tls.caFle",
                "sources.events.nkeySed",
            ],
            "{e}"
        );
        // The login keys are not the entry struct's own fields, yet a near miss is hinted.
        assert!(
            e.to_string()
                .contains("nkeySed: unknown key; did you mean nkeySeed?"),
            "{e}"
        );
    }

    #[test]
    fn core_nats_source_unknown_keys_and_a_short_kafka_budget_are_refused_by_name() {
        let bad = YAML
            .replace(
                "    durable: qb\n",
                "    durable: qb\n    jetStream: false\n",
            )
            .replace("    groupId: qb\n", "    groupId: qb\n    queueNmae: x\n")
            .replace(
                "    saslPassword: kafka-secret\n",
                "    saslPassword: kafka-secret\n    timeoutMs: 500\n",
            );
        let e = from_yaml_with_env(&bad, &[]).unwrap_err().to_string();
        assert!(
            e.contains("sources.events.jetStream") && e.contains("JetStream only"),
            "{e}"
        );
        assert!(e.contains("queueNmae"), "{e}");
        assert!(e.contains("destinations.log.timeoutMs"), "{e}");
    }
}
