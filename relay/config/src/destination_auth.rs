//! How an HTTP destination authenticates its outbound requests (`destinations.<name>.auth`).
//!
//! A destination has its own kinds, apart from the source/admin [`crate::AuthConfig`]: a
//! source *checks* credentials, a destination *sends* them, and the two lists differ
//! (`basic`, `header` and `oauth2` only make sense outbound; an outbound `hmac` signs instead
//! of verifying, so it has no `timestampTolerance`). Every kind listed here is applied by the
//! relay's HTTP publisher; anything else is refused at load, naming its key path.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::auth::{hmac_sha256, sha256_prefix, x_signature, ApiKeyAuth, BearerAuth};
use crate::secret::Secret;
use crate::strict::ConfigErrors;

/// The `type` values of a destination's `auth`.
pub const DESTINATION_AUTH_TYPES: &[&str] =
    &["bearer", "api-key", "basic", "header", "oauth2", "hmac"];

/// Request headers the HTTP publisher sets itself; an auth header may not take one over.
const PUBLISHER_HEADERS: [&str; 5] = [
    "x-message-id",
    "x-topic",
    "x-attempt",
    "x-message-key",
    "content-type",
];

/// Outbound authentication of an HTTP destination.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum DestinationAuth {
    /// `Authorization: Bearer <token>`.
    #[serde(rename = "bearer")]
    Bearer(BearerAuth),
    /// `<headerName>: <key>` (default header `X-API-Key`).
    #[serde(rename = "api-key")]
    ApiKey(ApiKeyAuth),
    /// `Authorization: Basic base64(username:password)`.
    #[serde(rename = "basic")]
    Basic(BasicAuth),
    /// One custom header, `<headerName>: <headerValue>`.
    #[serde(rename = "header")]
    Header(HeaderAuth),
    /// OAuth2 client credentials: a token from `tokenUrl`, sent as `Authorization: Bearer`.
    #[serde(rename = "oauth2")]
    OAuth2(OAuth2Auth),
    /// Request signing: HMAC-SHA256 of the exact body bytes sent (the format an HTTP
    /// source with `auth.type: hmac` verifies).
    #[serde(rename = "hmac")]
    Hmac(HmacSigning),
}

impl DestinationAuth {
    /// The headers this auth sets, lower-case (a row header of the same name is dropped).
    pub fn header_names(&self) -> Vec<String> {
        match self {
            DestinationAuth::Bearer(_) | DestinationAuth::Basic(_) | DestinationAuth::OAuth2(_) => {
                vec!["authorization".into()]
            }
            DestinationAuth::ApiKey(k) => vec![k.header_name.to_ascii_lowercase()],
            DestinationAuth::Header(h) => vec![h.header_name.to_ascii_lowercase()],
            DestinationAuth::Hmac(h) => std::iter::once(&h.header_name)
                .chain(&h.timestamp_header)
                .map(|s| s.to_ascii_lowercase())
                .collect(),
        }
    }

    /// Every secret value, for masking in logs and `last_error`: the configured values and
    /// the Basic-encoded `user:password` pair as it goes on the wire (a receiver or token
    /// endpoint that echoes its `Authorization` header would otherwise leak it).
    pub fn secrets(&self) -> Vec<String> {
        let basic = |user: &str, pw: &Secret| {
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", pw.expose()))
        };
        match self {
            DestinationAuth::Bearer(b) => vec![b.token.expose().to_string()],
            DestinationAuth::ApiKey(k) => vec![k.key.expose().to_string()],
            DestinationAuth::Basic(b) => vec![
                b.password.expose().to_string(),
                basic(&b.username, &b.password),
            ],
            DestinationAuth::Header(h) => vec![h.header_value.expose().to_string()],
            DestinationAuth::OAuth2(o) => [
                o.client_secret.expose().to_string(),
                basic(&o.client_id, &o.client_secret),
            ]
            .into_iter()
            .chain(o.extra_params.values().map(|v| v.expose().to_string()))
            .collect(),
            DestinationAuth::Hmac(h) => vec![h.secret.expose().to_string()],
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    pub username: String,
    pub password: Secret,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderAuth {
    pub header_name: String,
    pub header_value: Secret,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Auth {
    pub client_id: String,
    pub client_secret: Secret,
    /// The token endpoint (absolute http/https URL).
    pub token_url: String,
    #[serde(default)]
    pub scope: Option<String>,
    /// More form fields of the token request (`audience`, `resource`, ...). Secret-valued:
    /// some providers take credentials here, so they are masked like the client secret.
    #[serde(default)]
    pub extra_params: BTreeMap<String, Secret>,
}

/// Outbound HMAC signing. The signature header is `signaturePrefix` + lower-case hex of
/// HMAC-SHA256(`secret`, signed bytes); with `timestampHeader`, the relay sends the current
/// Unix time in seconds there and (by default) signs `timestamp + "." + body`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HmacSigning {
    pub secret: Secret,
    #[serde(default = "x_signature")]
    pub header_name: String,
    #[serde(default = "hmac_sha256")]
    pub algorithm: String,
    #[serde(default = "sha256_prefix")]
    pub signature_prefix: String,
    #[serde(default)]
    pub timestamp_header: Option<String>,
    /// `body` or `timestamp-dot-body` (default: the latter when `timestampHeader` is set).
    #[serde(default)]
    pub signature_payload_format: Option<String>,
}
impl HmacSigning {
    /// True when the signed bytes are `timestamp + "." + body` (the source's rule).
    pub fn signs_timestamp(&self) -> bool {
        crate::auth::signs_timestamp(
            self.signature_payload_format.as_deref(),
            self.timestamp_header.is_some(),
        )
    }
}

/// The key lists of this module's structs (env mapping, "did you mean" hints).
pub(crate) fn key_lists() -> Vec<&'static [&'static str]> {
    use crate::strict::fields_of;
    vec![
        fields_of::<BasicAuth>(),
        fields_of::<HeaderAuth>(),
        fields_of::<OAuth2Auth>(),
        fields_of::<HmacSigning>(),
    ]
}

/// Semantic checks of a destination's auth at `path` (`destinations.<name>.auth`).
pub(crate) fn validate(a: &DestinationAuth, path: &str, errs: &mut ConfigErrors) {
    let at = |k: &str| format!("{path}.{k}");
    match a {
        DestinationAuth::Bearer(b) => non_empty(b.token.expose(), &at("token"), errs),
        DestinationAuth::ApiKey(k) => {
            header_name(&k.header_name, &at("headerName"), errs);
            header_value(k.key.expose(), &at("key"), errs);
        }
        DestinationAuth::Basic(b) => {
            non_empty(&b.username, &at("username"), errs);
            if b.username.contains(':') {
                errs.push(
                    at("username"),
                    "must not contain `:` (it separates username and password in Basic auth)",
                );
            }
        }
        DestinationAuth::Header(h) => {
            header_name(&h.header_name, &at("headerName"), errs);
            header_value(h.header_value.expose(), &at("headerValue"), errs);
        }
        DestinationAuth::OAuth2(o) => {
            non_empty(&o.client_id, &at("clientId"), errs);
            non_empty(o.client_secret.expose(), &at("clientSecret"), errs);
            match url::Url::parse(&o.token_url) {
                Ok(u) if !matches!(u.scheme(), "http" | "https") => errs.push(
                    at("tokenUrl"),
                    format!("scheme `{}` is not http or https", u.scheme()),
                ),
                Ok(u) if u.host_str().is_none_or(str::is_empty) => {
                    errs.push(at("tokenUrl"), "has no host")
                }
                Ok(u) if !u.username().is_empty() || u.password().is_some() => errs.push(
                    at("tokenUrl"),
                    "must not carry credentials (use clientId and clientSecret)",
                ),
                Ok(_) => {}
                Err(e) => errs.push(at("tokenUrl"), format!("not an absolute URL: {e}")),
            }
            if o.scope.as_deref().is_some_and(|s| s.trim().is_empty()) {
                errs.push(at("scope"), "must not be blank (leave it out instead)");
            }
            for k in o.extra_params.keys() {
                if k.trim().is_empty() {
                    errs.push(at("extraParams"), "a parameter name is empty");
                } else if matches!(
                    k.as_str(),
                    "grant_type" | "scope" | "client_id" | "client_secret"
                ) {
                    errs.push(
                        format!("{path}.extraParams.{k}"),
                        "is set by QueueBox itself (use scope, clientId, clientSecret)",
                    );
                }
            }
        }
        DestinationAuth::Hmac(h) => {
            non_empty(h.secret.expose(), &at("secret"), errs);
            header_name(&h.header_name, &at("headerName"), errs);
            if h.algorithm != "HmacSHA256" {
                errs.push(
                    at("algorithm"),
                    format!("`{}` is not supported (HmacSHA256)", h.algorithm),
                );
            }
            if let Some(t) = &h.timestamp_header {
                header_name(t, &at("timestampHeader"), errs);
                if t.eq_ignore_ascii_case(&h.header_name) {
                    errs.push(at("timestampHeader"), "must differ from headerName");
                }
            }
            if let Some(f) = &h.signature_payload_format {
                if !matches!(
                    f.to_ascii_lowercase().replace('_', "-").as_str(),
                    "body" | "timestamp-dot-body"
                ) {
                    errs.push(
                        at("signaturePayloadFormat"),
                        "must be body or timestamp-dot-body",
                    );
                } else if h.signs_timestamp() && h.timestamp_header.is_none() {
                    errs.push(
                        at("timestampHeader"),
                        "required by signaturePayloadFormat: timestamp-dot-body",
                    );
                }
            }
        }
    }
}

fn non_empty(v: &str, path: &str, errs: &mut ConfigErrors) {
    if v.trim().is_empty() {
        errs.push(path, "must not be empty");
    }
}

/// An HTTP token (RFC 9110 §5.6.2) that the publisher does not set itself.
fn header_name(name: &str, path: &str, errs: &mut ConfigErrors) {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        errs.push(path, format!("`{name}` is not a valid header name"));
    } else if PUBLISHER_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        errs.push(
            path,
            format!("`{name}` is set by QueueBox on every request"),
        );
    }
}

fn header_value(v: &str, path: &str, errs: &mut ConfigErrors) {
    if v.is_empty() {
        errs.push(path, "must not be empty");
    } else if v.chars().any(|c| c.is_control() && c != '\t') {
        errs.push(
            path,
            "holds a control character and cannot be sent in a header",
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::{from_yaml_with_env, DestinationAuth, DestinationKind};

    fn with_auth(auth: &str) -> String {
        format!("database:\n  url: postgres://app@127.0.0.1:5432/app\ndestinations:\n  rx:\n    type: http\n    baseUrl: http://example.com\n    auth:\n{auth}")
    }

    fn auth_of(auth: &str) -> DestinationAuth {
        let c = from_yaml_with_env(&with_auth(auth), &[]).unwrap_or_else(|e| panic!("{e}"));
        match &c.destinations["rx"].kind {
            DestinationKind::Http(h) => h.auth.clone().unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_outbound_kind_loads_and_its_secrets_print_masked() {
        let basic =
            auth_of("      type: basic\n      username: relay\n      password: pw-basic-1\n");
        assert!(
            matches!(&basic, DestinationAuth::Basic(b) if b.username == "relay" && b.password.expose() == "pw-basic-1")
        );
        let o = auth_of("      type: oauth2\n      clientId: cid\n      clientSecret: cs-secret-1\n      tokenUrl: https://idp.example/token\n      scope: send\n      extraParams:\n        audience: aud-secret-1\n");
        let DestinationAuth::OAuth2(o2) = &o else {
            panic!("{o:?}")
        };
        assert_eq!(o2.extra_params["audience"].expose(), "aud-secret-1");
        let h = auth_of(
            "      type: hmac\n      secret: hm-secret-1\n      timestampHeader: X-Timestamp\n",
        );
        assert!(
            matches!(&h, DestinationAuth::Hmac(s) if s.signs_timestamp() && s.header_name == "X-Signature")
        );
        auth_of("      type: header\n      headerName: X-Token\n      headerValue: hv-secret-1\n");
        let c = from_yaml_with_env(&with_auth("      type: oauth2\n      clientId: cid\n      clientSecret: cs-secret-1\n      tokenUrl: https://idp.example/token\n      extraParams:\n        audience: aud-secret-1\n"), &[]).unwrap();
        let printed = c.to_redacted_yaml();
        assert!(
            !printed.contains("cs-secret-1") && !printed.contains("aud-secret-1"),
            "{printed}"
        );
        assert!(
            c.secrets().iter().any(|s| s == "aud-secret-1")
                && c.secrets().iter().any(|s| s == "cs-secret-1")
        );
    }

    #[test]
    fn a_bad_destination_auth_is_refused_naming_its_key() {
        for (auth, path) in [
            ("      type: oauth2\n      clientId: cid\n      clientSecret: s\n      tokenUrl: ftp://idp\n", "destinations.rx.auth.tokenUrl"),
            ("      type: oauth2\n      clientId: cid\n      clientSecret: s\n", "destinations.rx.auth"),
            ("      type: oauth2\n      clientId: cid\n      clientSecret: s\n      tokenUrl: https://idp/t\n      extraParams:\n        grant_type: password\n", "destinations.rx.auth.extraParams.grant_type"),
            ("      type: basic\n      username: ''\n      password: p\n", "destinations.rx.auth.username"),
            ("      type: header\n      headerName: 'X Bad'\n      headerValue: v\n", "destinations.rx.auth.headerName"),
            ("      type: header\n      headerName: X-Topic\n      headerValue: v\n", "destinations.rx.auth.headerName"),
            ("      type: hmac\n      secret: s\n      timestampTolerance: 5\n", "destinations.rx.auth.timestampTolerance"),
            ("      type: hmac\n      secret: s\n      signaturePayloadFormat: timestamp-dot-body\n", "destinations.rx.auth.timestampHeader"),
            ("      type: digest\n", "destinations.rx.auth.type"),
        ] {
            let e = from_yaml_with_env(&with_auth(auth), &[]).unwrap_err();
            assert!(e.problems.iter().any(|p| p.path == path), "{path} not named for {auth:?}: {e}");
        }
    }

    #[test]
    fn oauth2_token_url_is_settable_from_the_environment() {
        let y = with_auth("      type: oauth2\n      clientId: cid\n      clientSecret: s\n      tokenUrl: https://idp/t\n");
        let env = vec![(
            "QUEUEBOX_DESTINATIONS_RX_AUTH_TOKENURL".to_string(),
            "https://other/token".to_string(),
        )];
        let c = from_yaml_with_env(&y, &env).unwrap_or_else(|e| panic!("{e}"));
        let DestinationKind::Http(h) = &c.destinations["rx"].kind else {
            unreachable!()
        };
        assert!(
            matches!(h.auth.as_ref().unwrap(), DestinationAuth::OAuth2(o) if o.token_url == "https://other/token")
        );
    }
}
