//! The attribute rule of an HTTP source: which header, key expression, JSONPath or digest
//! gives a request its idempotency key, event type and aggregate id. Plain functions of the
//! configuration and the key expressions' results, apart from the store and the async
//! handler, so the fuzz target `http_ingest` (fuzz/README.md) compiles this very file.

use queuebox_config::{HttpSource, PathList, SourceConfig};
use queuebox_core::headers;
use queuebox_core::keys::{AttributeRule, KeySource};

/// The key expressions' results for one message, each `None` when the expression is not
/// configured, gave no value or failed; with the key path each came from.
#[derive(Debug, Default)]
pub struct EvaluatedKeys {
    pub idempotency_key: Option<(String, Option<String>)>,
    pub event_type: Option<(String, Option<String>)>,
    pub aggregate_id: Option<(String, Option<String>)>,
}

/// The attribute rule of an HTTP source (the type broker sources use too, built there by
/// `queuebox_brokers::ingest::SourceRule`). Key: `idempotencyKeyHeader`, then
/// `idempotencyKeyPath`, then the `x-idempotency-key` header; the SHA-256 digest of the body
/// only when the source declares neither a key header nor a key path, so a source that names
/// its key answers 400 naming what it tried when a message lacks it. Event type and
/// aggregate id: the declared header first, then the path(s).
pub fn http_rule(
    source: &SourceConfig,
    http: &HttpSource,
    evaluated: &EvaluatedKeys,
) -> AttributeRule {
    let header = |name: &str| KeySource::Header {
        name: name.to_string(),
    };
    let paths = |p: &Option<PathList>| -> Vec<KeySource> {
        p.as_ref()
            .map(|p| p.paths())
            .unwrap_or_default()
            .into_iter()
            .map(|p| KeySource::Path {
                path: p.to_string(),
            })
            .collect()
    };
    // A key expression's result sits between the header and the paths (docs/relay.md, "Transforms and key expressions").
    let expression = expression_source;
    let chain = |h: &Option<String>, e: &Option<(String, Option<String>)>, p: &Option<PathList>| {
        h.as_deref()
            .map(header)
            .into_iter()
            .chain(expression(e))
            .chain(paths(p))
            .collect()
    };
    let common = &source.common;
    let mut key: Vec<KeySource> = chain(
        &http.idempotency_key_header,
        &evaluated.idempotency_key,
        &common.idempotency_key_path,
    );
    let declared = !key.is_empty();
    key.push(header(headers::X_IDEMPOTENCY_KEY));
    if !declared {
        key.push(KeySource::Digest);
    }
    AttributeRule {
        key,
        event_type: chain(
            &http.event_type_header,
            &evaluated.event_type,
            &common.event_type_path,
        ),
        aggregate_id: chain(
            &http.aggregate_id_header,
            &evaluated.aggregate_id,
            &common.aggregate_id_path,
        ),
    }
}

/// A key expression's result for one message as a link of a key chain.
pub fn expression_source(e: &Option<(String, Option<String>)>) -> Option<KeySource> {
    e.as_ref().map(|(name, value)| KeySource::Expression {
        name: name.clone(),
        value: value.clone(),
    })
}
