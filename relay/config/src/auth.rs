//! Request authentication of an HTTP source or the admin API ([`AuthConfig`]), and what an
//! HTTP destination's outbound auth shares with it: the bearer and api-key shapes, the HMAC
//! defaults and the `signaturePayloadFormat` rule.

use serde::{Deserialize, Serialize};

use crate::secret::Secret;
use crate::strict::fields_of;

/// Request authentication of an HTTP source or the admin API.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum AuthConfig {
    #[serde(rename = "bearer")]
    Bearer(BearerAuth),
    #[serde(rename = "api-key")]
    ApiKey(ApiKeyAuth),
    #[serde(rename = "hmac")]
    Hmac(HmacAuth),
}

impl AuthConfig {
    /// The request header that carries the credential (never stored on a row).
    pub fn header_name(&self) -> &str {
        match self {
            AuthConfig::Bearer(_) => "Authorization",
            AuthConfig::ApiKey(a) => &a.header_name,
            AuthConfig::Hmac(h) => &h.header_name,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BearerAuth {
    pub token: Secret,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyAuth {
    #[serde(default = "x_api_key")]
    pub header_name: String,
    pub key: Secret,
}
fn x_api_key() -> String {
    "X-API-Key".into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HmacAuth {
    pub secret: Secret,
    #[serde(default = "x_signature")]
    pub header_name: String,
    #[serde(default = "hmac_sha256")]
    pub algorithm: String,
    #[serde(default = "sha256_prefix")]
    pub signature_prefix: String,
    #[serde(default)]
    pub timestamp_header: Option<String>,
    /// Milliseconds either side of now a timestamp may be (the header is Unix seconds).
    #[serde(default = "five_minutes")]
    pub timestamp_tolerance: u64,
    /// `body` or `timestamp-dot-body` (default: the latter when `timestampHeader` is set).
    #[serde(default)]
    pub signature_payload_format: Option<String>,
}
pub(crate) fn x_signature() -> String {
    "X-Signature".into()
}
pub(crate) fn hmac_sha256() -> String {
    "HmacSHA256".into()
}
pub(crate) fn sha256_prefix() -> String {
    "sha256=".into()
}
fn five_minutes() -> u64 {
    300_000
}

impl HmacAuth {
    /// True when the signed bytes are `timestamp + "." + body`.
    pub fn signs_timestamp(&self) -> bool {
        signs_timestamp(
            self.signature_payload_format.as_deref(),
            self.timestamp_header.is_some(),
        )
    }
}

/// The HMAC `signaturePayloadFormat` rule, the same for a source that verifies and a
/// destination that signs: `timestamp-dot-body` (also `TIMESTAMP_DOT_BODY`) signs
/// `timestamp + "." + body`; unset, that is the default when a timestamp header is set.
pub(crate) fn signs_timestamp(format: Option<&str>, has_timestamp_header: bool) -> bool {
    match format.map(|s| s.to_ascii_lowercase().replace('_', "-")) {
        Some(f) => f == "timestamp-dot-body",
        None => has_timestamp_header,
    }
}

/// The key lists of this module's structs (env mapping, "did you mean" hints).
pub(crate) fn key_lists() -> Vec<&'static [&'static str]> {
    vec![
        fields_of::<BearerAuth>(),
        fields_of::<ApiKeyAuth>(),
        fields_of::<HmacAuth>(),
    ]
}
