//! From a broker message to an inbox row, the same for every broker source: the key chain
//! (header → `idempotencyKeyPath` → broker message id / Kafka record key → SHA-256 digest),
//! event type (path, then header), aggregate id (path, header, then the Kafka record key),
//! stored headers, the correlation id and the source's consumption. A body that is not JSON,
//! or a message the store or a receiver could never take (a control character in a key, a
//! NUL in the payload, an unsendable header; `NewInboxMessage::quarantine`), becomes a
//! `dead` row that says why (acknowledged by the caller): nothing downstream could read it,
//! and a refusal to acknowledge it would block the queue or partition for ever.

use crate::error::{BrokerError, IngestError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use queuebox_core::headers::{correlation_id, stored_headers, X_CORRELATION_ID};
use queuebox_core::keys::{self, AttributeRule, JsonPath, KeyInput, KeySource};
use queuebox_core::trace::TraceContext;
use queuebox_core::{Consumption, InsertOutcome, NewInboxMessage, Store};
use serde_json::{json, Value};

use crate::config::BrokerSourceCommon;

/// What one source does with a message: parsed once at startup. The attributes come from
/// the shared [`AttributeRule`] of `queuebox_core::keys` (the HTTP sources use the same
/// type); this crate only builds a broker source's chains from its config.
#[derive(Debug, Clone)]
pub struct SourceRule {
    pub source: String,
    pub consumption: Consumption,
    /// Kafka: the record key is the last aggregate-id fallback.
    pub record_key_is_aggregate: bool,
    attributes: AttributeRule,
}

/// One message as a broker delivered it.
#[derive(Debug, Clone, Default)]
pub struct Received<'a> {
    pub body: &'a [u8],
    /// Headers as (name, value) strings, in arrival order.
    pub headers: Vec<(String, String)>,
    /// AMQP `messageId`, Kafka record key (as text); the key chain's broker step.
    pub message_id: Option<String>,
    /// Kafka only: the record key, the last aggregate-id fallback.
    pub record_key: Option<String>,
    /// The broker's own time of the message in milliseconds since 1970 (AMQP `timestamp`,
    /// Kafka record timestamp, JetStream message time): the last publish-time clue.
    pub broker_time_ms: Option<i64>,
}

impl SourceRule {
    /// Builds the rule of source `name`, failing (naming the key) on a JSONPath it cannot
    /// parse. The chains: key = `attributeHeaders.idempotencyKey` → `idempotencyKeyPath` →
    /// broker message id → digest; event type = `eventTypePath` → header; aggregate id =
    /// `aggregateIdPath` → header → the Kafka record key (offered as the message id of the
    /// aggregate chain, see [`SourceRule::build`]).
    pub fn new(name: &str, common: &BrokerSourceCommon) -> Result<Self, BrokerError> {
        let paths = |key: &str, paths: &[String]| -> Result<Vec<KeySource>, BrokerError> {
            paths
                .iter()
                .map(|p| match JsonPath::parse(p) {
                    Ok(_) => Ok(KeySource::Path { path: p.clone() }),
                    Err(e) => Err(BrokerError::config(format!("sources.{name}.{key}"), e)),
                })
                .collect()
        };
        let header = |name: &String| KeySource::Header { name: name.clone() };
        let headers = &common.attribute_headers;
        let mut key = vec![header(&headers.idempotency_key)];
        key.extend(paths("idempotencyKeyPath", &common.key_paths)?);
        key.extend([KeySource::MessageId, KeySource::Digest]);
        let mut event_type = paths("eventTypePath", &common.event_type_paths)?;
        event_type.push(header(&headers.event_type));
        let mut aggregate_id = paths("aggregateIdPath", &common.aggregate_id_paths)?;
        aggregate_id.extend([header(&headers.aggregate_id), KeySource::MessageId]);
        Ok(SourceRule {
            source: name.to_string(),
            consumption: common.consumption,
            record_key_is_aggregate: false,
            attributes: AttributeRule {
                key,
                event_type,
                aggregate_id,
            },
        })
    }

    /// The key chain of this source, in order.
    pub fn key_sources(&self) -> &[KeySource] {
        &self.attributes.key
    }

    /// This rule with the results of the source's key expressions for one message
    /// (`KeySource::Expression`, evaluated by the relay, which links the JSONata engine) in
    /// their places: the key after the key header, before the paths; the
    /// event type and the aggregate id first.
    pub fn with_expressions(
        &self,
        key: Option<KeySource>,
        event_type: Option<KeySource>,
        aggregate_id: Option<KeySource>,
    ) -> SourceRule {
        let mut rule = self.clone();
        let a = &mut rule.attributes;
        if let Some(k) = key {
            a.key.insert(1.min(a.key.len()), k);
        }
        if let Some(e) = event_type {
            a.event_type.insert(0, e);
        }
        if let Some(g) = aggregate_id {
            a.aggregate_id.insert(0, g);
        }
        rule
    }

    /// The inbox row for `msg`. Never fails: what cannot be stored as a pending row (a body
    /// that is not JSON, an attribute longer than its column) becomes a dead row saying why.
    pub fn build(&self, msg: &Received<'_>) -> NewInboxMessage {
        let parsed: Result<Value, _> = serde_json::from_slice(msg.body);
        let (payload, json, mut dead_reason) = match parsed {
            Ok(v) => (v.clone(), Some(v), None),
            Err(e) => (
                json!({ "raw": String::from_utf8_lossy(msg.body) }),
                None,
                Some(format!(
                    "the message body is not JSON ({e}); stored dead, acknowledged"
                )),
            ),
        };
        let input = KeyInput {
            body: msg.body,
            json: json.as_ref(),
            headers: &msg.headers,
            message_id: msg.message_id.as_deref(),
        };
        let key = match self.attributes.key(&input) {
            Ok(Some((k, _))) => k,
            Ok(None) => keys::digest(msg.body),
            Err(e) => {
                dead_reason
                    .get_or_insert_with(|| format!("{e}; stored dead under the body digest"));
                keys::digest(msg.body)
            }
        };
        let event_type = self.attributes.event_type(&input);
        // The aggregate chain's broker step is the Kafka record key, never an AMQP messageId.
        let aggregate_id = self.attributes.aggregate_id(&KeyInput {
            message_id: msg.record_key.as_deref(),
            ..input
        });
        let received_correlation = keys::header(&msg.headers, X_CORRELATION_ID);
        let mut row = NewInboxMessage {
            source: self.source.clone(),
            idempotency_key: key,
            aggregate_id,
            event_type,
            payload,
            headers: stored_headers(
                msg.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                None,
            ),
            correlation_id: Some(correlation_id(received_correlation.as_deref())),
            trace: self.trace(&msg.headers),
            consumption: self.consumption,
            dead_reason,
            delay: None,
        };
        if let Err(e) = row.validate() {
            // An attribute too long for its column or with a control character, a NUL in the
            // payload, an unsendable header: keep the message, dead, with why.
            row.quarantine(msg.body, &e.to_string());
        }
        row
    }
}

impl SourceRule {
    /// The message's W3C trace context; a malformed one is not stored (the message is), and
    /// is logged at debug.
    fn trace(&self, headers: &[(String, String)]) -> Option<TraceContext> {
        let (trace, ignored) =
            TraceContext::from_headers(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        for why in ignored {
            tracing::debug!(source = %self.source, reason = %why, "received trace context ignored");
        }
        trace
    }
}

/// Where a broker source hands each message. `Ok` means the row committed (new, duplicate
/// or dead): acknowledge. The relay's sink goes through its shared inbox entry; [`Ingest`]
/// stores directly (tests, benchmarks).
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    async fn store(&self, msg: &Received<'_>) -> Result<(), IngestError>;
}

#[async_trait::async_trait]
impl Sink for Ingest {
    async fn store(&self, msg: &Received<'_>) -> Result<(), IngestError> {
        Ingest::store(self, msg).await.map(|_| ())
    }
}

/// Stores the rows of one source.
#[derive(Clone)]
pub struct Ingest {
    pub rule: Arc<SourceRule>,
    pub store: Arc<dyn Store>,
    /// Failpoint: after this many successful stores, report [`IngestError::CrashAfterStore`]
    /// (0 = off). Set from `QB_FAILPOINT_CRASH_AFTER_STORES` or by tests.
    crash_after: Arc<AtomicU64>,
}

impl Ingest {
    pub fn new(rule: SourceRule, store: Arc<dyn Store>) -> Self {
        let crash = std::env::var("QB_FAILPOINT_CRASH_AFTER_STORES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ingest {
            rule: Arc::new(rule),
            store,
            crash_after: Arc::new(AtomicU64::new(crash)),
        }
    }

    /// Test hook: the `n`-th successful store from now on reports a crash instead of success.
    pub fn crash_after_stores(&self, n: u64) {
        self.crash_after.store(n, Ordering::SeqCst);
    }

    /// Builds and stores the row of `msg`. `Ok` (inserted or a duplicate) means: acknowledge.
    pub async fn store(&self, msg: &Received<'_>) -> Result<InsertOutcome, IngestError> {
        let row = self.rule.build(msg);
        let outcome = self
            .store
            .insert_inbox(&row)
            .await
            .map_err(IngestError::Store)?;
        if self.crash_after.load(Ordering::SeqCst) > 0
            && self.crash_after.fetch_sub(1, Ordering::SeqCst) == 1
        {
            return Err(IngestError::CrashAfterStore);
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> SourceRule {
        SourceRule::new(
            "orders",
            &BrokerSourceCommon {
                event_type_paths: vec!["$.type".into()],
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn header_key_wins_over_path_and_message_id() {
        let r = rule();
        let m = Received {
            body: br#"{"id":"p1","type":"created"}"#,
            headers: vec![("X-Idempotency-Key".into(), "h1".into())],
            message_id: Some("m1".into()),
            record_key: None,
            broker_time_ms: None,
        };
        let row = r.build(&m);
        assert_eq!(row.idempotency_key, "h1");
        assert_eq!(row.event_type.as_deref(), Some("created"));
        assert!(row.dead_reason.is_none());
        let m = Received {
            headers: vec![],
            ..m
        };
        assert_eq!(r.build(&m).idempotency_key, "p1");
        let m = Received {
            body: br#"{"n":1}"#,
            ..m
        };
        assert_eq!(r.build(&m).idempotency_key, "m1");
        let m = Received {
            message_id: None,
            ..m
        };
        assert_eq!(r.build(&m).idempotency_key, keys::digest(br#"{"n":1}"#));
    }

    /// A broker header carries any UTF-8 (HTTP drops non-ASCII header values before this):
    /// a multi-byte character in a traceparent panicked the parser, which would have stopped
    /// the source on a message it could never store. Now the message is stored, untraced.
    #[test]
    fn a_traceparent_with_a_multibyte_character_is_ignored_and_the_message_stored() {
        let row = rule().build(&Received {
            body: br#"{"id":"t1"}"#,
            headers: vec![(
                "traceparent".into(),
                "0\u{6db}4bf;2f3577b34da6a3ce929d0e0e4736-05f067aa0ba902b7-01".into(),
            )],
            ..Default::default()
        });
        assert_eq!(row.idempotency_key, "t1");
        assert!(row.trace.is_none());
        assert!(row.dead_reason.is_none());
    }

    #[test]
    fn non_json_body_is_a_dead_row_under_its_digest() {
        let row = rule().build(&Received {
            body: b"not json",
            ..Default::default()
        });
        assert_eq!(row.idempotency_key, keys::digest(b"not json"));
        assert_eq!(row.payload, json!({"raw": "not json"}));
        assert!(row.dead_reason.unwrap().contains("not JSON"));
    }

    #[test]
    fn a_message_that_could_never_be_sent_is_a_dead_row_that_says_why() {
        let m = Received {
            body: br#"{"id":"a\u0001b"}"#,
            headers: vec![("X-Evil".into(), "a\r\nb".into())],
            ..Default::default()
        };
        let row = rule().build(&m);
        assert_eq!(
            row.idempotency_key,
            keys::digest(m.body),
            "the unusable key is replaced by the digest"
        );
        assert!(row.dead_reason.as_deref().unwrap().contains("U+0001"));
        assert!(row.headers.is_empty(), "the unsendable header is dropped");
        assert!(row.validate().is_ok(), "the dead row is storable");
        let row = rule().build(&Received {
            body: br#"{"id":"n1","v":"\u0000"}"#,
            ..Default::default()
        });
        assert!(row.dead_reason.as_deref().unwrap().contains("U+0000"));
        assert!(row.payload["rawBase64"].is_string());
    }

    #[test]
    fn aggregate_falls_back_to_header_then_record_key_and_correlation_is_kept() {
        let m = Received {
            body: b"{}",
            headers: vec![("X-Correlation-Id".into(), "c-1".into())],
            message_id: None,
            record_key: Some("acct-9".into()),
            broker_time_ms: None,
        };
        let row = rule().build(&m);
        assert_eq!(row.aggregate_id.as_deref(), Some("acct-9"));
        assert_eq!(row.correlation_id.as_deref(), Some("c-1"));
        assert_eq!(
            row.headers.get("X-Correlation-Id"),
            Some(&Value::from("c-1"))
        );
    }
}
