//! Configuration: the broker kinds' keys live in the relay's config model
//! ([`queuebox_config::brokers`], re-exported here); [`BrokerSourceCommon`] gathers
//! what the attribute rule of a broker source needs from the common and the kind's keys.

pub use queuebox_config::brokers::*;
use queuebox_config::SourceCommon;
use queuebox_core::Consumption;

/// The attribute settings of one broker source.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerSourceCommon {
    pub consumption: Consumption,
    /// `idempotencyKeyPath` (one or a list); `$.id` when the source sets none.
    pub key_paths: Vec<String>,
    pub event_type_paths: Vec<String>,
    pub aggregate_id_paths: Vec<String>,
    pub attribute_headers: AttributeHeaders,
}

impl Default for BrokerSourceCommon {
    fn default() -> Self {
        BrokerSourceCommon {
            consumption: Consumption::Push,
            key_paths: vec!["$.id".into()],
            event_type_paths: Vec::new(),
            aggregate_id_paths: Vec::new(),
            attribute_headers: AttributeHeaders::default(),
        }
    }
}

impl BrokerSourceCommon {
    /// From a configured source's common keys and its kind's `attributeHeaders`.
    pub fn from_config(common: &SourceCommon, attribute_headers: &AttributeHeaders) -> Self {
        let list = |p: &Option<queuebox_config::PathList>| {
            p.as_ref()
                .map(|p| p.paths().into_iter().map(str::to_string).collect())
                .unwrap_or_default()
        };
        let key_paths: Vec<String> = list(&common.idempotency_key_path);
        BrokerSourceCommon {
            consumption: common.consumption,
            key_paths: if key_paths.is_empty() {
                vec!["$.id".into()]
            } else {
                key_paths
            },
            event_type_paths: list(&common.event_type_path),
            aggregate_id_paths: list(&common.aggregate_id_path),
            attribute_headers: attribute_headers.clone(),
        }
    }
}
