//! Sources: how a received message becomes an inbox row. Every source, HTTP or broker,
//! hands its message to [`Inbox::receive`], which extracts the idempotency key, event
//! type and aggregate id by the source's `queuebox_core::keys::AttributeRule` (built by
//! [`http_rule`] for HTTP, by `queuebox_brokers::ingest::SourceRule` for brokers), stores the
//! row through [`group::InsertGroup`] (one statement for the receipts that arrive together)
//! and reports the outcome. A broker source acknowledges only after `receive` returned `Ok`
//! (a new row, a duplicate or a row stored dead) and negatively acknowledges / requeues /
//! seeks back on `Err(Rejected::Storage)`.
//!
//! A broker source kind implements [`BrokerSource`] and adds one arm to [`build_broker`].

pub mod auth;
pub mod brokers;
pub mod filter;
pub mod group;
pub mod hold;
pub mod http;
pub mod http_rule;
pub mod rate_limit;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use queuebox_config::{SourceConfig, SourceKind};
use queuebox_core::keys::{self, KeyInput};
use queuebox_core::{headers, NewInboxMessage};
use queuebox_transform::{Context, InboxContext};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::metrics::Metrics;
use queuebox_core::otlp::{KeyValue, SpanKind};

/// The deepest nesting of arrays and objects an HTTP source accepts, checked before parsing
/// so the answer can say why. serde_json's recursion limit refuses 128 levels (127 parse);
/// 126 leaves a level for every reader that embeds the payload in a JSON document of its
/// own (a transform's input, a client library's row).
pub const MAX_JSON_DEPTH: usize = 126;

/// The deepest nesting of `[` and `{` in `body`, outside strings (the text need not be JSON).
pub fn json_depth(body: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A message as a source received it.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub body: Bytes,
    /// Headers in arrival order (name, value); for HTTP minus nothing yet (the store
    /// rules drop credentials).
    pub headers: Vec<(String, String)>,
    /// The broker's own message id (AMQP `messageId`, Kafka record key), if any.
    pub message_id: Option<String>,
}

/// What happened to a received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// A new row; acknowledge.
    New { id: Uuid, correlation_id: String },
    /// `(source, idempotency_key)` existed already; acknowledge, nothing stored.
    Duplicate { id: Uuid, correlation_id: String },
    /// A broker body that is not JSON, stored as a `dead` row; acknowledge.
    Dead { id: Uuid },
    /// The source's header filter dropped it (the first failing rule); acknowledge,
    /// nothing stored.
    Filtered { rule: String },
}

impl Stored {
    /// The `outcome` attribute of the `ingest` span.
    fn outcome(&self) -> &'static str {
        match self {
            Stored::New { .. } => "new",
            Stored::Duplicate { .. } => "duplicate",
            Stored::Dead { .. } => "dead",
            Stored::Filtered { .. } => "filtered",
        }
    }
}

/// Why a message was not stored.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error("Invalid JSON")]
    NotJson,
    /// JSON nested deeper than [`MAX_JSON_DEPTH`]: HTTP 400 saying so.
    #[error("Invalid JSON: nesting deeper than {MAX_JSON_DEPTH} levels")]
    TooDeep,
    /// The source declares a key source and the message carries no key.
    #[error("{0}")]
    MissingKey(String),
    /// A value the store or a receiver could never take (a control character in a key, a
    /// NUL in the payload, an unsendable header): HTTP 400, the text names the field.
    #[error("{0}")]
    Invalid(String),
    /// The stored headers would exceed `inbox.maxHeaderBytes`: HTTP 431.
    #[error("Request headers take {size} bytes; inbox.maxHeaderBytes allows {limit}")]
    HeadersTooLarge { size: usize, limit: usize },
    /// The store failed: do NOT acknowledge (the broker redelivers, HTTP answers 500, or
    /// 503 with `Retry-After` when the database is unreachable: `Error::is_unavailable`).
    #[error("Storage failed")]
    Storage(#[source] queuebox_core::Error),
    /// The source transform failed under `Fail` or `Dead`: HTTP 422, nothing stored.
    #[error("{0}")]
    Transform(String),
}

/// The entry into the inbox shared by every source.
#[derive(Clone)]
pub struct Inbox {
    /// Where rows are inserted: grouped with the other sources' concurrent inserts.
    pub group: group::InsertGroup,
    pub metrics: Arc<Metrics>,
    /// `inbox.maxHeaderBytes`: the most header bytes stored on one row.
    pub max_header_bytes: usize,
    /// The sources' transforms and key expressions.
    pub transforms: Arc<crate::transforms::Transforms>,
    /// The sources' header filters.
    pub filters: Arc<filter::Filters>,
    /// The sources' `initialDelay` and publish-time order.
    pub holds: Arc<hold::Holds>,
}

impl Inbox {
    /// Extracts the attributes, stores the row and counts the outcome.
    pub async fn receive(&self, source: &SourceConfig, msg: Received) -> Result<Stored, Rejected> {
        let received_at = crate::telemetry::span_start();
        if !matches!(source.kind, SourceKind::Http(_)) {
            // Broker kinds: the broker attribute rule (key chain header → path → message id →
            // digest, event type, aggregate id) lives once, in queuebox-brokers.
            let rule = brokers::rule(source).map_err(|e| Rejected::MissingKey(e.to_string()))?;
            return self
                .receive_broker(&rule, &msg.body, msg.headers, msg.message_id, None)
                .await;
        }
        let SourceKind::Http(http) = &source.kind else {
            unreachable!("broker kinds returned above")
        };
        let correlation_id = headers::correlation_id(
            keys::header(&msg.headers, headers::X_CORRELATION_ID).as_deref(),
        );
        if json_depth(&msg.body) > MAX_JSON_DEPTH {
            return Err(self.reject("extraction_failed", Rejected::TooDeep));
        }
        let Ok(json) = serde_json::from_slice::<Value>(&msg.body) else {
            return Err(self.reject("extraction_failed", Rejected::NotJson));
        };
        if let Some(filtered) = self.filtered(&source.name, &msg.headers) {
            return Ok(filtered);
        }
        let auth_header = http.auth.as_ref().map(|a| a.header_name().to_string());
        let stored = headers::stored_headers(
            msg.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            auth_header.as_deref(),
        );
        let size = headers::stored_size(&stored);
        if size > self.max_header_bytes {
            return Err(self.reject(
                "extraction_failed",
                Rejected::HeadersTooLarge {
                    size,
                    limit: self.max_header_bytes,
                },
            ));
        }
        let input = KeyInput {
            body: &msg.body,
            json: Some(&json),
            headers: &msg.headers,
            message_id: msg.message_id.as_deref(),
        };
        let expressions = self.transforms.source(&source.name);
        let evaluated = expressions
            .map(|x| x.keys(&source.name, &json))
            .unwrap_or_default();
        let rule = http_rule::http_rule(source, http, &evaluated);
        let key = match rule.key(&input) {
            Ok(Some((key, _))) => key,
            Ok(None) => {
                return Err(self.reject(
                    "extraction_failed",
                    Rejected::MissingKey(rule.missing_key()),
                ))
            }
            Err(e) => {
                return Err(self.reject("extraction_failed", Rejected::MissingKey(e.to_string())))
            }
        };
        let (event_type, aggregate_id) = (rule.event_type(&input), rule.aggregate_id(&input));
        // Read before the transform: the publish time is a property of what was sent.
        let delay = self.holds.delay(
            &source.name,
            &hold::PublishClues {
                headers: &msg.headers,
                json: Some(&json),
                broker_time_ms: None,
            },
        );
        // The source transform (proto-docs/ingest.md), after the keys were read from the
        // original body: its result is what is stored; a refusal stores nothing (422).
        let json = match expressions.and_then(|x| x.transform.as_ref()) {
            None => json,
            Some(t) => {
                let vars = Context::outbox(Uuid::new_v4().to_string(), "", 0, chrono::Utc::now())
                    .with_inbox(InboxContext {
                        source: source.name.clone(),
                        headers: stored.clone(),
                        idempotency_key: key.clone(),
                        event_type: event_type.clone(),
                    });
                match crate::transforms::at_receipt(t, &self.metrics, json, vars).await {
                    Ok(p) => p,
                    Err(why) => {
                        return Err(self.reject("transform_failed", Rejected::Transform(why)))
                    }
                }
            }
        };
        let new = NewInboxMessage {
            source: source.name.clone(),
            idempotency_key: key,
            aggregate_id,
            event_type,
            payload: json,
            headers: stored,
            correlation_id: Some(correlation_id.clone()),
            trace: received_trace(&source.name, &msg.headers),
            consumption: source.common.consumption,
            dead_reason: None,
            delay,
        };
        self.insert(new, correlation_id, received_at).await
    }

    /// A broker message through the broker attribute rule of its source.
    pub async fn receive_broker(
        &self,
        rule: &queuebox_brokers::ingest::SourceRule,
        body: &[u8],
        headers: Vec<(String, String)>,
        message_id: Option<String>,
        broker_time_ms: Option<i64>,
    ) -> Result<Stored, Rejected> {
        let received_at = crate::telemetry::span_start();
        if let Some(filtered) = self.filtered(&rule.source, &headers) {
            return Ok(filtered);
        }
        let record_key = if rule.record_key_is_aggregate {
            message_id.clone()
        } else {
            None
        };
        // Key expressions over the original body take their places in the broker chains.
        let expressions = self.transforms.source(&rule.source);
        let with_expressions;
        let rule = match expressions.filter(|x| x.has_key_expressions()) {
            Some(x) => match serde_json::from_slice::<Value>(body) {
                Ok(json) => {
                    let e = x.keys(&rule.source, &json);
                    with_expressions = rule.with_expressions(
                        http_rule::expression_source(&e.idempotency_key),
                        http_rule::expression_source(&e.event_type),
                        http_rule::expression_source(&e.aggregate_id),
                    );
                    &with_expressions
                }
                Err(_) => rule,
            },
            None => rule,
        };
        let received = queuebox_brokers::ingest::Received {
            body,
            headers,
            message_id,
            record_key,
            broker_time_ms,
        };
        let mut new = rule.build(&received);
        // Before the transform, as for HTTP. A row stored dead is never held.
        if new.dead_reason.is_none() {
            new.delay = self.holds.delay(
                &rule.source,
                &hold::PublishClues {
                    headers: &received.headers,
                    json: Some(&new.payload),
                    broker_time_ms,
                },
            );
        }
        // The source transform on a broker source (proto-docs/ingest.md): a refusal stores the original payload dead
        // in the same insert (never visible as pending), then the message is acknowledged.
        if let (Some(t), None) = (
            expressions.and_then(|x| x.transform.as_ref()),
            &new.dead_reason,
        ) {
            let vars = Context::outbox(Uuid::new_v4().to_string(), "", 0, chrono::Utc::now())
                .with_inbox(InboxContext {
                    source: rule.source.clone(),
                    headers: new.headers.clone(),
                    idempotency_key: new.idempotency_key.clone(),
                    event_type: new.event_type.clone(),
                });
            match crate::transforms::at_receipt(t, &self.metrics, new.payload.clone(), vars).await {
                Ok(p) => {
                    new.payload = p;
                    if let Err(e) = new.validate() {
                        new.quarantine(body, &e.to_string());
                    }
                }
                Err(why) => {
                    self.metrics.inc(
                        "queuebox_inbox_rejections_total",
                        &[("reason", "transform_failed")],
                    );
                    new.dead_reason = Some(why);
                }
            }
        }
        let size = headers::stored_size(&new.headers);
        if size > self.max_header_bytes {
            // Stored, dead, acknowledged: a receiver would refuse the header section.
            new.quarantine(
                body,
                &format!(
                    "the message headers take {size} bytes; inbox.maxHeaderBytes allows {}",
                    self.max_header_bytes
                ),
            );
        }
        let correlation_id = new.correlation_id.clone().unwrap_or_default();
        self.insert(new, correlation_id, received_at).await
    }

    /// Stores a built row and counts the outcome, in the `ingest` span that began at
    /// `received_at` (tracing on): the row stores that span's context, so the next hop
    /// continues from it.
    pub async fn insert(
        &self,
        mut new: NewInboxMessage,
        correlation_id: String,
        received_at: Option<std::time::SystemTime>,
    ) -> Result<Stored, Rejected> {
        let span = crate::telemetry::span(
            "ingest",
            SpanKind::Consumer,
            || new.trace.clone(),
            received_at,
            || vec![KeyValue::new("source", new.source.clone())],
        );
        if let Some(own) = span.context() {
            new.trace = Some(own);
        }
        let stored = self.store_row(new, correlation_id).await;
        match &stored {
            Ok(s) => span.end(s.outcome(), None),
            Err(e) => span.end("rejected", Some(&e.to_string())),
        }
        stored
    }

    async fn store_row(
        &self,
        new: NewInboxMessage,
        correlation_id: String,
    ) -> Result<Stored, Rejected> {
        let dead = new.dead_reason.is_some();
        let source = new.source.clone();
        match self.group.insert(new).await {
            Ok(queuebox_core::InsertOutcome::Inserted(id)) if dead => Ok(Stored::Dead { id }),
            Ok(queuebox_core::InsertOutcome::Inserted(id)) => {
                tracing::debug!(messageId = %id, %source, "inbox message stored");
                self.metrics
                    .inc("queuebox_inbox_messages_total", &[("status", "new")]);
                Ok(Stored::New { id, correlation_id })
            }
            Ok(queuebox_core::InsertOutcome::Duplicate(id)) => {
                tracing::debug!(messageId = %id, %source, "duplicate inbox message; nothing stored");
                self.metrics
                    .inc("queuebox_inbox_messages_total", &[("status", "duplicate")]);
                Ok(Stored::Duplicate { id, correlation_id })
            }
            Err(queuebox_core::Error::InvalidInput(why)) => {
                Err(self.reject("extraction_failed", Rejected::Invalid(why)))
            }
            // An unreachable database is an outage, not a failed write: its own reason, so
            // `storage_failed` alarms only on statements the database refused.
            Err(e) if e.is_unavailable() => {
                Err(self.reject("storage_unavailable", Rejected::Storage(e)))
            }
            Err(e) => Err(self.reject("storage_failed", Rejected::Storage(e))),
        }
    }

    /// [`Stored::Filtered`] when `source`'s header filter drops the message: counted and
    /// logged at debug with the rule, never the header's value.
    fn filtered(&self, source: &str, headers: &[(String, String)]) -> Option<Stored> {
        let rule = self.filters.first_failing(source, headers)?;
        tracing::debug!(%source, %rule, "inbox message filtered; nothing stored");
        self.metrics
            .inc("queuebox_inbox_filtered_total", &[("source", source)]);
        Some(Stored::Filtered { rule })
    }

    fn reject(&self, reason: &'static str, r: Rejected) -> Rejected {
        self.metrics
            .inc("queuebox_inbox_rejections_total", &[("reason", reason)]);
        r
    }
}

/// The request's W3C trace context; a malformed one is not stored (the message is), and is
/// logged at debug. Broker sources read theirs in `queuebox_brokers::ingest`.
fn received_trace(
    source: &str,
    headers: &[(String, String)],
) -> Option<queuebox_core::trace::TraceContext> {
    let (trace, ignored) = queuebox_core::trace::TraceContext::from_headers(
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    for why in ignored {
        tracing::debug!(%source, reason = %why, "received trace context ignored");
    }
    trace
}

/// A source that consumes a broker (RabbitMQ queue, Kafka group, NATS durable).
#[async_trait]
pub trait BrokerSource: Send + Sync {
    /// Consumes until `stop` is cancelled: each message goes through `inbox.receive` and
    /// is acknowledged only after it returned `Ok`.
    async fn run(
        self: Box<Self>,
        inbox: Inbox,
        source: SourceConfig,
        stop: CancellationToken,
    ) -> anyhow::Result<()>;

    /// True while the consumer is connected (readiness component `<type>.<source>`).
    #[allow(dead_code)] // read by readiness once a broker kind exists
    fn ready(&self) -> bool {
        true
    }
}

/// The broker consumer of a source; `None` for HTTP sources (served by the HTTP server).
pub fn build_broker(source: &SourceConfig) -> Option<anyhow::Result<Box<dyn BrokerSource>>> {
    source.kind.broker().map(|_| brokers::build(source))
}
