//! The typed configuration. Structs with fixed keys derive `Deserialize`; the maps whose
//! entries pick a kind with `type` (sources, destinations, auth blocks) are dispatched by
//! hand in [`crate::parse`], so a new kind is one struct plus one match arm. The model also
//! knows every key name of the configuration ([`all_known_keys`]: hints, environment mapping).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::AuthConfig;
use crate::secret::Secret;
use crate::strict::fields_of;
use queuebox_core::Consumption;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub outbox: OutboxConfig,
    pub inbox: InboxConfig,
    pub http: HttpConfig,
    pub admin: AdminConfig,
    pub retention: RetentionConfig,
    pub logging: LoggingConfig,
    pub tracing: TracingConfig,
    pub destinations: BTreeMap<String, DestinationConfig>,
    pub routes: Vec<RouteConfig>,
    pub sources: BTreeMap<String, SourceConfig>,
    /// Periodic schedules the relay runs (`core::schedule`).
    pub schedules: Vec<ScheduleConfig>,
}

/// The top-level keys as read. Every section stays YAML until [`crate::parse`] types it on
/// its own, so a type error in one section does not hide the mistakes of the others.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct RawConfig {
    pub server: Option<serde_yaml::Value>,
    pub database: Option<serde_yaml::Value>,
    pub outbox: Option<serde_yaml::Value>,
    pub inbox: Option<serde_yaml::Value>,
    pub http: Option<serde_yaml::Value>,
    pub admin: Option<serde_yaml::Value>,
    pub retention: Option<serde_yaml::Value>,
    pub logging: Option<serde_yaml::Value>,
    pub tracing: Option<serde_yaml::Value>,
    pub destinations: BTreeMap<String, serde_yaml::Value>,
    pub routes: Option<serde_yaml::Value>,
    pub sources: BTreeMap<String, serde_yaml::Value>,
    pub schedules: Option<serde_yaml::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerConfig {
    /// The address both ports bind (default all interfaces).
    pub bind_address: String,
    pub http_port: u16,
    /// When set, `/metrics`, `/health/*` and `/admin/*` move to this port.
    pub management_port: Option<u16>,
    /// How long shutdown waits for in-flight HTTP requests.
    pub drain_timeout_ms: u64,
    /// A connection whose request headers (or, between requests, whose next request) do not
    /// arrive within this many ms is closed, so stalled clients cannot pile up.
    pub request_header_timeout_ms: u64,
    /// The whole request body must arrive within this many ms, else 408.
    pub request_body_timeout_ms: u64,
    /// Open connections per port; beyond it new connections wait in the listen backlog
    /// until one closes.
    pub max_connections: u32,
    /// When set, both ports speak HTTPS only (for deployments without a terminating proxy).
    pub tls: Option<ServerTls>,
}

/// `server.tls`: the listener's certificate chain and private key, PEM files, and optionally
/// the CAs its clients' certificates must chain to. The relay re-reads them on SIGHUP, so a
/// renewed certificate needs no restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTls {
    /// The server certificate first, then any intermediates.
    pub cert_file: String,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
    /// Mutual TLS: when set, a client must present a certificate that chains to one of the
    /// CA certificates in this PEM file, on both ports (re-read on SIGHUP with the rest).
    #[serde(default)]
    pub client_ca_file: Option<String>,
}
impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind_address: "0.0.0.0".into(),
            http_port: 8080,
            management_port: None,
            drain_timeout_ms: 10_000,
            request_header_timeout_ms: 10_000,
            request_body_timeout_ms: 30_000,
            max_connections: 10_000,
            tls: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DatabaseConfig {
    /// `postgresql` or `sqlserver`; must match the form of `url` (`queuebox_core::backend`).
    #[serde(rename = "type")]
    pub kind: String,
    /// `postgres://user@host:port/db`; the password may sit here or in `password`.
    #[serde(serialize_with = "redacted_url")]
    pub url: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub pool_size: u32,
    /// How long a statement waits for a pooled connection before the database counts as
    /// unavailable (ingest answers 503). Default 5000, well below a common 30 s: an HTTP
    /// sender should hear "retry later" well before its own timeout.
    pub connection_timeout_ms: u64,
    pub migrate: bool,
    pub startup_timeout_ms: u64,
    /// The outbox table, `table` or `schema.table` (proto-docs/own-schema.md); default `outbox`.
    pub outbox_table_name: Option<String>,
    /// The inbox table, `table` or `schema.table`; default `inbox`.
    pub inbox_table_name: Option<String>,
    /// Column renames per table: mapping key (`aggregateType`) → column name.
    pub column_mapping: ColumnMapping,
}

/// `database.columnMapping`: the keys are those of `queuebox_core::store::names`
/// (`OUTBOX_COLUMNS`, `INBOX_COLUMNS`); an unknown one is refused naming it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ColumnMapping {
    pub outbox: BTreeMap<String, String>,
    pub inbox: BTreeMap<String, String>,
}

impl DatabaseConfig {
    /// The table and column names; an [`queuebox_core::Error::Config`] names a bad key.
    pub fn names(&self) -> queuebox_core::Result<queuebox_core::store::names::Names> {
        queuebox_core::store::names::Names::new(
            self.outbox_table_name.as_deref(),
            self.inbox_table_name.as_deref(),
            &self.column_mapping.outbox,
            &self.column_mapping.inbox,
        )
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            kind: "postgresql".into(),
            url: String::new(),
            username: None,
            password: None,
            pool_size: 10,
            connection_timeout_ms: 5_000,
            migrate: true,
            startup_timeout_ms: 60_000,
            outbox_table_name: None,
            inbox_table_name: None,
            column_mapping: ColumnMapping::default(),
        }
    }
}

fn redacted_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&queuebox_core::headers::redact_error(url, &[]))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboxConfig {
    /// Run the outbox poller in this process.
    pub enabled: bool,
    pub poll_interval_ms: u64,
    /// The rows one claim asks for. Set, every claim asks for exactly that many (the
    /// reference's `batchSize`). Unset (the default), claims start at
    /// [`DEFAULT_OUTBOX_BATCH_SIZE`] and double while batches come back full and are
    /// quick and light, up to [`MAX_ADAPTIVE_OUTBOX_BATCH_SIZE`]; a short batch brings the
    /// size down to what it returned, or to half the keys seen when keys bound it (the
    /// relay's `batch_size` module has the rules). Read
    /// the range in force with [`OutboxConfig::batch_sizes`].
    pub batch_size: Option<u32>,
    pub retry_base_delay_ms: u64,
    /// Stamped on rows QueueBox itself writes (relayed rows).
    pub max_attempts: u32,
    /// How many rows of a batch are published at once. Set, it is exact for every
    /// destination (reference contract 17: `concurrency: 4`, never more than 4 requests at
    /// once). Unset (the default), HTTP destinations get at most
    /// [`DEFAULT_OUTBOX_CONCURRENCY`] requests at once, and up to
    /// [`DEFAULT_OUTBOX_PUBLISHES_IN_FLIGHT`] rows are published at once in all: a broker's
    /// client sends publishes on one connection and waits for each acknowledgement, so the
    /// receivers' bound would only keep a broker destination waiting for round trips
    /// (benchmarks/outbox.md). Read the values in force with [`OutboxConfig::in_flight`]
    /// and [`OutboxConfig::http_requests`].
    pub concurrency: Option<u32>,
    /// The lease of one claim (visibility timeout); keep it above the slowest publish.
    pub claim_timeout_ms: u64,
    pub pending_gauge_interval_ms: u64,
    pub shutdown_timeout_ms: u64,
    /// A destination the relay could not reach (connection refused or lost, a broker
    /// timeout) fails an attempt like any failure, so a row whose attempts are spent goes
    /// dead (proto-docs/states.md#outbox). `true` keeps such rows retrying on the capped backoff (60 s)
    /// until the destination is back; rejections still make them dead.
    pub retry_unreachable_forever: bool,
}
impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            enabled: true,
            poll_interval_ms: 100,
            batch_size: None,
            retry_base_delay_ms: 1000,
            max_attempts: 5,
            concurrency: None,
            claim_timeout_ms: 300_000,
            pending_gauge_interval_ms: 5000,
            shutdown_timeout_ms: 30_000,
            retry_unreachable_forever: false,
        }
    }
}

/// The reference's `outbox.batchSize`: with it unset, the first claim's size and the least
/// an adapting claim asks for.
pub const DEFAULT_OUTBOX_BATCH_SIZE: u32 = 100;

/// With `outbox.batchSize` unset, the most rows one claim asks for.
pub const MAX_ADAPTIVE_OUTBOX_BATCH_SIZE: u32 = 1000;

/// The reference's `outbox.concurrency`: with it unset, the most requests at once to HTTP
/// destinations.
pub const DEFAULT_OUTBOX_CONCURRENCY: u32 = 8;

/// With `outbox.concurrency` unset, the most rows of a batch published at once in all.
pub const DEFAULT_OUTBOX_PUBLISHES_IN_FLIGHT: u32 = 64;

impl OutboxConfig {
    /// The least and the most rows one claim asks for: `batchSize` twice when it is set,
    /// else [`DEFAULT_OUTBOX_BATCH_SIZE`] and [`MAX_ADAPTIVE_OUTBOX_BATCH_SIZE`].
    pub fn batch_sizes(&self) -> (u32, u32) {
        match self.batch_size {
            Some(n) => (n, n),
            None => (DEFAULT_OUTBOX_BATCH_SIZE, MAX_ADAPTIVE_OUTBOX_BATCH_SIZE),
        }
    }

    /// How many rows of a batch are published at once: `concurrency`, else
    /// [`DEFAULT_OUTBOX_PUBLISHES_IN_FLIGHT`].
    pub fn in_flight(&self) -> u32 {
        self.concurrency
            .unwrap_or(DEFAULT_OUTBOX_PUBLISHES_IN_FLIGHT)
    }

    /// How many requests go to HTTP destinations at once: `concurrency`, else
    /// [`DEFAULT_OUTBOX_CONCURRENCY`].
    pub fn http_requests(&self) -> u32 {
        self.concurrency.unwrap_or(DEFAULT_OUTBOX_CONCURRENCY)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InboxConfig {
    pub base_path: String,
    pub max_body_bytes: u64,
    /// The most bytes of headers (names plus values) stored on one inbox row. Larger → HTTP
    /// 431, a broker message stored `dead`: every stored header is forwarded, and receivers
    /// refuse large header sections (Node.js at 16 KiB, nginx at 8 KiB per line).
    pub max_header_bytes: usize,
    pub relay: RelayConfig,
}
impl Default for InboxConfig {
    fn default() -> Self {
        InboxConfig {
            base_path: "/inbox".into(),
            max_body_bytes: 1_048_576,
            max_header_bytes: 8192,
            relay: RelayConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RelayConfig {
    pub enabled: bool,
    pub poll_interval_ms: u64,
    pub batch_size: u32,
    pub claim_timeout_ms: u64,
    pub pending_gauge_interval_ms: u64,
    /// Overrides `outbox.maxAttempts` for relayed rows.
    pub max_attempts: Option<u32>,
}
impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            enabled: true,
            poll_interval_ms: 100,
            batch_size: 100,
            claim_timeout_ms: 300_000,
            pending_gauge_interval_ms: 5000,
            max_attempts: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpConfig {
    pub max_error_body_bytes: usize,
    /// HTTP destinations (and OAuth2 token endpoints) may only reach public addresses:
    /// checked at start-up and again by the destination client's DNS resolver at connect
    /// time (the relay's `destinations::address_guard`; proto-docs/http-destination.md).
    pub block_private_addresses: bool,
}
impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_error_body_bytes: 2048,
            block_private_addresses: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdminFlags {
    pub enabled: bool,
    pub insecure: bool,
    pub auth: Option<serde_yaml::Value>,
    pub max_transform_timeout_ms: u64,
    pub max_payload_bytes: u64,
}
impl Default for AdminFlags {
    fn default() -> Self {
        AdminFlags {
            enabled: false,
            insecure: false,
            auth: None,
            max_transform_timeout_ms: 1000,
            max_payload_bytes: 65_536,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminConfig {
    pub enabled: bool,
    pub insecure: bool,
    pub auth: Option<AuthConfig>,
    /// `POST /admin/transform/test` clamps a request's `timeoutMs` to this.
    pub max_transform_timeout_ms: u64,
    /// Admin request bodies above this many bytes are answered 413 (before the auth check).
    pub max_payload_bytes: u64,
}
impl Default for AdminConfig {
    fn default() -> Self {
        let f = AdminFlags::default();
        AdminConfig {
            enabled: f.enabled,
            insecure: f.insecure,
            auth: None,
            max_transform_timeout_ms: f.max_transform_timeout_ms,
            max_payload_bytes: f.max_payload_bytes,
        }
    }
}

/// `logging`: how the relay writes its log records to stderr (the level filter stays
/// `RUST_LOG`, so an operator can raise one module without touching the file).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct LoggingConfig {
    /// `text` (default, for people) or `json` (one object per line, for log collectors).
    pub format: LogFormat,
}

/// `tracing`: spans exported over OTLP. Off (no exporter, no span made) unless
/// `tracing.otlp.endpoint` or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TracingConfig {
    pub otlp: OtlpConfig,
}

/// `tracing.otlp`: where the spans go (OTLP over HTTP, protobuf).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OtlpConfig {
    /// The collector's base URL, like `OTEL_EXPORTER_OTLP_ENDPOINT` (`http://collector:4318`);
    /// spans are POSTed to `<endpoint>/v1/traces`. Unset: tracing is off.
    pub endpoint: Option<String>,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            endpoint: None,
            service_name: "queuebox".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct RetentionConfig {
    pub enabled: bool,
    pub outbox: TableRetention,
    pub inbox: TableRetention,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TableRetention {
    /// `AGE`, `COUNT` (outbox only) or `DISABLED`.
    pub policy: String,
    pub max_age: Option<String>,
    pub max_count: Option<u64>,
    pub cleanup_interval: String,
    pub batch_size: u32,
}
impl Default for TableRetention {
    fn default() -> Self {
        TableRetention {
            policy: "DISABLED".into(),
            max_age: None,
            max_count: None,
            cleanup_interval: "1h".into(),
            batch_size: 1000,
        }
    }
}

/// `schedules[<n>]`: a cron expression in a time zone, or a fixed interval, that enqueues one
/// pull row of `source` per tick, exactly once however many relays and workers run it (the
/// tick's time is in the row's idempotency key). docs/operations.md, "Schedules".
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleConfig {
    /// Unique among the schedules: it is in every row's key, `schedule:<name>:<tick>`.
    pub name: String,
    /// The pull source whose workers claim the rows.
    pub source: String,
    /// Five fields (minute hour day month weekday), or six with seconds first. Exactly one of
    /// `cron` and `everyMs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A fixed interval in ms (at least 100); ticks are its multiples since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The IANA zone `cron` is read in (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The row's payload (any YAML value but null), the same on every tick.
    pub payload: serde_yaml::Value,
    /// Within the source a higher priority is claimed first (-32767 to 32767).
    #[serde(default)]
    pub priority: i16,
    /// Stored with every row and handed to the handler.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Ticks missed while no relay or worker ran the schedule: `latest` enqueues the most
    /// recent one once, `skip` none.
    #[serde(default)]
    pub missed: MissedTicks,
    /// `false` leaves this schedule to other relays or workers (e.g.
    /// `QUEUEBOX_SCHEDULES_0_ENABLED=false` on some replicas).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// `schedules[<n>].missed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MissedTicks {
    #[default]
    Latest,
    Skip,
}

impl ScheduleConfig {
    /// The core's schedule; errors name the field under `at` (`schedules[2].cron`).
    pub fn to_schedule(
        &self,
        at: &str,
    ) -> queuebox_core::Result<queuebox_core::schedule::Schedule> {
        use queuebox_core::schedule::{Missed, Schedule, Timing};
        let timing = match (&self.cron, self.every_ms) {
            (Some(c), None) => Timing::cron(c, self.time_zone.as_deref(), at)?,
            (None, Some(ms)) if self.time_zone.is_none() => {
                // This file's key is `everyMs`, so that is the name an error must give.
                Timing::every_at_field(
                    std::time::Duration::from_millis(ms),
                    &format!("{at}.everyMs"),
                )?
            }
            (None, Some(_)) => {
                return Err(queuebox_core::Error::Config {
                    path: format!("{at}.timeZone"),
                    reason: "applies to `cron` only (an interval is the same in every zone)".into(),
                })
            }
            _ => {
                return Err(queuebox_core::Error::Config {
                    path: at.to_string(),
                    reason: "set exactly one of `cron` and `everyMs`".into(),
                })
            }
        };
        let payload =
            serde_json::to_value(&self.payload).map_err(|e| queuebox_core::Error::Config {
                path: format!("{at}.payload"),
                reason: format!("is not JSON: {e}"),
            })?;
        let mut s = Schedule::new(self.name.clone(), timing, self.source.clone(), payload);
        s.priority = self.priority;
        s.headers = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        s.missed = match self.missed {
            MissedTicks::Latest => Missed::Latest,
            MissedTicks::Skip => Missed::Skip,
        };
        s.validate(at)?;
        Ok(s)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteConfig {
    /// Anchored glob: `*` one dot-free segment, `**` anything.
    pub topic_pattern: String,
    pub destination: String,
    /// Replaces the destination's routing key (RabbitMQ `routingKeyTemplate`, Kafka
    /// `keyTemplate`) for the rows of this route; same placeholders as the address templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key_template: Option<String>,
    /// What a placeholder of `routingKeyTemplate` without a value renders as (default empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key_missing_field_default: Option<String>,
    /// Applied at delivery before the destination's transform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformConfig>,
}

/// `transform: { expression, onError, timeoutMs, maxDepth }`, as configured; `crate::transform`
/// compiles it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformConfig {
    /// The JSONata expression; its result is the new payload.
    pub expression: String,
    /// `Fail` (default), `Skip` or `Dead`, exact case.
    #[serde(default = "fail")]
    pub on_error: String,
    /// The longest one evaluation may run (default 100 ms).
    #[serde(default = "hundred_u64")]
    pub timeout_ms: u64,
    /// The deepest evaluation stack (default 100).
    #[serde(default = "hundred_usize")]
    pub max_depth: usize,
}

fn fail() -> String {
    "Fail".into()
}
fn hundred_u64() -> u64 {
    100
}
fn hundred_usize() -> usize {
    100
}

/// One destination: its name and its kind-specific settings.
#[derive(Debug, Clone, Serialize)]
pub struct DestinationConfig {
    #[serde(skip)]
    pub name: String,
    #[serde(flatten)]
    pub kind: DestinationKind,
    /// Applied at delivery after the route's transform (every kind; parsed apart from the
    /// kind's own keys in `crate::parse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformConfig>,
    /// Outbound limits of this destination, per relay replica (every kind; parsed apart from
    /// the kind's own keys in `crate::parse`, like `transform`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<DestinationLimits>,
}

/// `destinations.<name>.rateLimit`: how hard one relay replica may call this destination.
/// A row waiting on either limit is not an attempt: it waits inside its batch, its claim
/// renewed, its attempt count untouched (docs/operations.md, "Outbound limits"). Each
/// replica applies the numbers on its own; with N replicas the destination sees up to N
/// times them, so divide the partner's limit by the replicas you run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationLimits {
    /// Requests started per second, evenly spaced (no burst beyond one request). Nonzero:
    /// 0 would stop the destination for good; leave the key out for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<std::num::NonZeroU32>,
    /// Requests in flight at once (waiting for their answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<std::num::NonZeroU32>,
}

/// The kinds of destination. A broker kind is one more variant (and its arms in
/// `type_name` and `broker`), registered in the broker kind table of `crate::parse`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum DestinationKind {
    #[serde(rename = "http")]
    Http(HttpDestination),
    #[serde(rename = "rabbitmq")]
    RabbitMq(crate::brokers::RabbitMqDestinationConfig),
    #[serde(rename = "kafka")]
    Kafka(crate::brokers::KafkaDestinationConfig),
    #[serde(rename = "nats")]
    Nats(crate::brokers::NatsDestinationConfig),
}

impl DestinationKind {
    /// The `type` value, also the `destination_type` metric label.
    pub fn type_name(&self) -> &'static str {
        match self {
            DestinationKind::Http(_) => "http",
            DestinationKind::RabbitMq(_) => "rabbitmq",
            DestinationKind::Kafka(_) => "kafka",
            DestinationKind::Nats(_) => "nats",
        }
    }

    /// A broker destination's keys, asked through one trait whatever the kind; `None` for
    /// HTTP.
    pub fn broker(&self) -> Option<&dyn crate::brokers::BrokerDestinationKeys> {
        match self {
            DestinationKind::Http(_) => None,
            DestinationKind::RabbitMq(c) => Some(c),
            DestinationKind::Kafka(c) => Some(c),
            DestinationKind::Nats(c) => Some(c),
        }
    }

    /// `timeoutMs`: the whole budget of one publish.
    pub fn timeout_ms(&self) -> u64 {
        match (self, self.broker()) {
            (_, Some(b)) => b.timeout_ms(),
            (DestinationKind::Http(h), None) => h.timeout_ms,
            (_, None) => 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpDestination {
    pub base_url: String,
    #[serde(default = "slash")]
    pub path: String,
    #[serde(default = "thirty_seconds")]
    pub timeout_ms: u64,
    /// Static request headers. Every value is a [`Secret`] (users put `Authorization` and API
    /// keys here): `***` in `check-config`, masked in logs and `last_error`, and a value may be
    /// `file:/path` (read once at start-up) or `${VAR}` like any other secret.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// Outbound authentication, typed in `crate::parse` (kinds: [`crate::DestinationAuth`]).
    #[serde(skip_deserializing)]
    pub auth: Option<crate::destination_auth::DestinationAuth>,
}
fn slash() -> String {
    "/".into()
}
fn thirty_seconds() -> u64 {
    30_000
}

/// One source: its name, the settings every kind shares, and the kind's own.
#[derive(Debug, Clone, Serialize)]
pub struct SourceConfig {
    #[serde(skip)]
    pub name: String,
    #[serde(flatten)]
    pub common: SourceCommon,
    #[serde(flatten)]
    pub kind: SourceKind,
}

impl SourceConfig {
    /// The relay topic template: the configured one, else `{{ eventType }}` for HTTP and
    /// `{{ source }}` for broker sources.
    pub fn topic_template(&self) -> &str {
        match &self.common.topic {
            Some(t) => t,
            None if self.kind.broker().is_some() => "{{ source }}",
            None => "{{ eventType }}",
        }
    }
}

/// The kinds of source. A broker kind is one more variant (and its arms in `type_name` and
/// `broker`), registered in the broker kind table of `crate::parse`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum SourceKind {
    #[serde(rename = "http")]
    Http(HttpSource),
    #[serde(rename = "rabbitmq")]
    RabbitMq(crate::brokers::RabbitMqSourceConfig),
    #[serde(rename = "kafka")]
    Kafka(crate::brokers::KafkaSourceConfig),
    #[serde(rename = "nats")]
    Nats(crate::brokers::NatsSourceConfig),
}

impl SourceKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            SourceKind::Http(_) => "http",
            SourceKind::RabbitMq(_) => "rabbitmq",
            SourceKind::Kafka(_) => "kafka",
            SourceKind::Nats(_) => "nats",
        }
    }

    /// A broker source's keys, asked through one trait whatever the kind; `None` for HTTP.
    pub fn broker(&self) -> Option<&dyn crate::brokers::BrokerSourceKeys> {
        match self {
            SourceKind::Http(_) => None,
            SourceKind::RabbitMq(c) => Some(c),
            SourceKind::Kafka(c) => Some(c),
            SourceKind::Nats(c) => Some(c),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SourceCommon {
    pub consumption: Consumption,
    pub topic: Option<String>,
    pub idempotency_key_path: Option<PathList>,
    pub event_type_path: Option<PathList>,
    pub aggregate_id_path: Option<PathList>,
    /// Hold each row this long after receipt (`30s`, `5m`).
    pub initial_delay: Option<String>,
    /// Publish-time order (docs/relay.md, "Holding new rows"): with `initialDelay`, hold each row until its
    /// publish time plus the delay (never later than receipt plus the delay). The publish
    /// time comes from this header (case-insensitive), then `scheduledAtPath`, then the
    /// broker's own time, else receipt.
    pub scheduled_at_header: Option<String>,
    /// A JSONPath into the body naming the publish time (`$.time`).
    pub scheduled_at_path: Option<String>,
    /// Applied at receipt; the stored payload is its result.
    pub transform: Option<TransformConfig>,
    /// JSONata over the original body (before `transform`): after the key header, before
    /// the key paths.
    pub idempotency_key_expression: Option<String>,
    pub event_type_expression: Option<String>,
    pub aggregate_id_expression: Option<String>,
    /// Header rules a message must pass to be stored; one that does not is answered
    /// `202 {"status":"filtered"}` (HTTP) or acknowledged (brokers) and not stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<HeaderFilter>,
}

/// `sources.<name>.filter`: every `require` rule must match and no `exclude` rule may.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderFilter {
    pub require: Vec<HeaderRule>,
    pub exclude: Vec<HeaderRule>,
}

/// One header rule: `header` (case-insensitive) and exactly one test of `equals`, `in`,
/// `matches` (a topic glob) or `exists: true`.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderRule {
    pub header: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    #[serde(rename = "in", skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
}

impl HeaderRule {
    /// The rule's test, by its key name (`equals`, `in`, `matches`, `exists`).
    pub fn test_name(&self) -> &'static str {
        match (&self.equals, &self.one_of, &self.matches) {
            (Some(_), _, _) => "equals",
            (_, Some(_), _) => "in",
            (_, _, Some(_)) => "matches",
            _ => "exists",
        }
    }

    /// True when the header `value` (`None`: absent) passes the test.
    pub fn holds(&self, value: Option<&str>) -> bool {
        match (value, &self.equals, &self.one_of, &self.matches) {
            (None, ..) => false,
            (Some(v), Some(e), _, _) => v == e,
            (Some(v), _, Some(list), _) => list.iter().any(|e| e == v),
            (Some(v), _, _, Some(glob)) => crate::glob::glob_match(glob, v),
            (Some(_), ..) => true,
        }
    }
}

/// A definite JSONPath or a non-empty list of them; the first that yields a value wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PathList {
    One(String),
    Many(Vec<String>),
}

impl PathList {
    pub fn paths(&self) -> Vec<&str> {
        match self {
            PathList::One(p) => vec![p.as_str()],
            PathList::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpSource {
    pub path: String,
    #[serde(default)]
    pub idempotency_key_header: Option<String>,
    #[serde(default)]
    pub event_type_header: Option<String>,
    #[serde(default)]
    pub aggregate_id_header: Option<String>,
    #[serde(skip_deserializing)]
    pub auth: Option<AuthConfig>,
    /// At most this many requests a minute on this source, whoever sends them; HTTP sources
    /// only (a broker source paces itself with its prefetch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// `sources.<name>.rateLimit`: a bucket of `requestsPerMinute` requests per source, filled up
/// again every 60 s; a request that finds it empty gets 429 with `Retry-After`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    pub requests_per_minute: u32,
}

/// The `database.columnMapping.*` keys, so `QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_IDEMPOTENCYKEY`
/// finds `idempotencyKey`. Built once: the known keys are cached ([`all_known_keys`]).
fn mapping_keys() -> &'static [&'static str] {
    use queuebox_core::store::names::{INBOX_COLUMNS, OUTBOX_COLUMNS};
    let keys: Vec<&'static str> = OUTBOX_COLUMNS
        .iter()
        .chain(INBOX_COLUMNS)
        .map(|(k, _)| *k)
        .collect();
    Box::leak(keys.into_boxed_slice())
}

/// Every struct's key list, for env-var mapping and "did you mean" hints. A new struct
/// adds its `fields_of` here (a struct of another module, to that module's `key_lists`).
fn known_key_lists() -> Vec<&'static [&'static str]> {
    vec![
        fields_of::<RawConfig>(),
        fields_of::<ServerConfig>(),
        fields_of::<ServerTls>(),
        fields_of::<DatabaseConfig>(),
        fields_of::<ColumnMapping>(),
        mapping_keys(),
        fields_of::<OutboxConfig>(),
        fields_of::<InboxConfig>(),
        fields_of::<RelayConfig>(),
        fields_of::<HttpConfig>(),
        fields_of::<AdminFlags>(),
        fields_of::<RetentionConfig>(),
        fields_of::<LoggingConfig>(),
        fields_of::<TracingConfig>(),
        fields_of::<OtlpConfig>(),
        fields_of::<TableRetention>(),
        fields_of::<RouteConfig>(),
        fields_of::<ScheduleConfig>(),
        fields_of::<TransformConfig>(),
        fields_of::<HttpDestination>(),
        fields_of::<DestinationLimits>(),
        &["rateLimit"],
        fields_of::<SourceCommon>(),
        fields_of::<HttpSource>(),
        &["auth"],
    ]
    .into_iter()
    .chain(crate::brokers::key_lists())
    .chain(crate::auth::key_lists())
    .chain(crate::destination_auth::key_lists())
    .collect()
}

/// Every key name of every configuration struct, for env-var mapping and hints.
pub(crate) fn all_known_keys() -> &'static BTreeSet<&'static str> {
    static KEYS: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut s: BTreeSet<&'static str> =
            known_key_lists().into_iter().flatten().copied().collect();
        s.insert("type");
        s
    })
}

/// Parses `30s`, `5m`, `2h`, `7d` (a bare number or a negative value is refused).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.len().checked_sub(1)?);
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}
