//! The configuration keys of the broker kinds (reference §4.3), as serde structs in the
//! config file's camelCase. (serde cannot refuse unknown keys next to `flatten`; the relay's
//! strict-config check covers those structs.)

use queuebox_core::Consumption;
use serde::Deserialize;

fn default_key_path() -> Option<String> {
    Some("$.id".into())
}
fn default_prefetch() -> u16 {
    10
}
fn default_true() -> bool {
    true
}
fn default_timeout_ms() -> u64 {
    30_000
}
fn default_ack_wait_ms() -> u64 {
    30_000
}
fn default_batch() -> usize {
    100
}
fn default_topic_template() -> String {
    "{{ topic }}".into()
}
fn default_key_template() -> String {
    "{{ key }}".into()
}

/// Header names a broker source reads the attributes from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
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

/// The keys every broker source shares.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerSourceCommon {
    #[serde(default)]
    pub consumption: Consumption,
    /// Relay topic template of a push source; default `{{ source }}`.
    #[serde(default)]
    pub topic: Option<String>,
    #[serde(default = "default_key_path")]
    pub idempotency_key_path: Option<String>,
    #[serde(default)]
    pub event_type_path: Option<String>,
    #[serde(default)]
    pub aggregate_id_path: Option<String>,
    #[serde(default)]
    pub event_type_from_header: bool,
    #[serde(default)]
    pub attribute_headers: AttributeHeaders,
}

impl Default for BrokerSourceCommon {
    fn default() -> Self {
        BrokerSourceCommon {
            consumption: Consumption::Push,
            topic: None,
            idempotency_key_path: default_key_path(),
            event_type_path: None,
            aggregate_id_path: None,
            event_type_from_header: false,
            attribute_headers: AttributeHeaders::default(),
        }
    }
}

/// `sources.<name>` with `type: rabbitmq`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMqSourceConfig {
    pub queue_name: String,
    pub connection_url: String,
    #[serde(default = "default_prefetch")]
    pub prefetch_count: u16,
    #[serde(default)]
    pub declare_queue: bool,
    #[serde(flatten)]
    pub common: BrokerSourceCommon,
}

/// `sources.<name>` with `type: nats` (JetStream only).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsSourceConfig {
    pub servers: String,
    pub stream: String,
    pub durable: String,
    #[serde(default)]
    pub filter_subject: Option<String>,
    #[serde(default = "default_ack_wait_ms")]
    pub ack_wait_ms: u64,
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Refused when `false`: core NATS cannot acknowledge, so an inbox on it loses messages.
    #[serde(default = "default_true")]
    pub jet_stream: bool,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(flatten)]
    pub common: BrokerSourceCommon,
}

/// `autoOffsetReset` of a Kafka source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OffsetReset {
    #[default]
    Earliest,
    Latest,
}

/// The Kafka security keys shared by sources and destinations.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSecurity {
    #[serde(default)]
    pub security_protocol: Option<String>,
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    #[serde(default)]
    pub sasl_username: Option<String>,
    #[serde(default)]
    pub sasl_password: Option<String>,
}

/// `sources.<name>` with `type: kafka`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSourceConfig {
    pub bootstrap_servers: String,
    pub topics: Vec<String>,
    pub group_id: String,
    #[serde(default)]
    pub auto_offset_reset: OffsetReset,
    #[serde(default = "default_batch")]
    pub max_poll_records: usize,
    #[serde(flatten)]
    pub security: KafkaSecurity,
    #[serde(flatten)]
    pub common: BrokerSourceCommon,
}

/// `exchangeType` of a RabbitMQ destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeType {
    #[default]
    Topic,
    Direct,
    Fanout,
}

/// `deliveryMode` of a RabbitMQ destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    #[default]
    Persistent,
    Transient,
}

/// `destinations.<name>` with `type: rabbitmq`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RabbitMqDestinationConfig {
    pub url: String,
    pub exchange: String,
    #[serde(default)]
    pub exchange_from: Option<String>,
    #[serde(default)]
    pub exchange_type: ExchangeType,
    #[serde(default = "default_topic_template")]
    pub routing_key_template: String,
    #[serde(default)]
    pub delivery_mode: DeliveryMode,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

/// `destinations.<name>` with `type: nats`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NatsDestinationConfig {
    pub servers: String,
    pub subject: String,
    #[serde(default)]
    pub subject_from: Option<String>,
    #[serde(default = "default_true")]
    pub jet_stream: bool,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// `destinations.<name>` with `type: kafka`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaDestinationConfig {
    pub bootstrap_servers: String,
    pub topic: String,
    #[serde(default)]
    pub topic_from: Option<String>,
    #[serde(default = "default_key_template")]
    pub key_template: String,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(flatten)]
    pub security: KafkaSecurity,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}
