//! Source authentication: bearer token, API key, HMAC signature. Every comparison is
//! constant-time over SHA-256 digests, so neither length nor content leaks through timing.
//!
//! The fuzz target `http_ingest` (fuzz/README.md) compiles this file too: it uses only
//! `queuebox-config`, `queuebox-core` and crates.io, never `crate::`.

use hmac::{Hmac, Mac};
use queuebox_config::AuthConfig;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Equal in constant time (compares the digests, so lengths do not leak either).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    Sha256::digest(a).ct_eq(&Sha256::digest(b)).into()
}

/// Checks a request; `Err(reason)` becomes `401 {"error": reason}`.
pub fn check(
    auth: &AuthConfig,
    headers: &[(String, String)],
    body: &[u8],
    now_unix_ms: i64,
) -> Result<(), &'static str> {
    let get = |name: &str| queuebox_core::keys::header(headers, name);
    match auth {
        AuthConfig::Bearer(b) => {
            let h = get("Authorization").ok_or("Missing Authorization header")?;
            let (scheme, cred) = h.split_once(' ').ok_or("Invalid bearer token")?;
            if !scheme.eq_ignore_ascii_case("bearer")
                || !ct_eq(cred.trim().as_bytes(), b.token.expose().as_bytes())
            {
                return Err("Invalid bearer token");
            }
            Ok(())
        }
        AuthConfig::ApiKey(k) => {
            let v = get(&k.header_name).ok_or("Missing API key header")?;
            if !ct_eq(v.as_bytes(), k.key.expose().as_bytes()) {
                return Err("Invalid API key");
            }
            Ok(())
        }
        AuthConfig::Hmac(h) => {
            let sig = get(&h.header_name).ok_or("Missing signature header")?;
            let mut signed_ts = None;
            if let Some(ts_header) = &h.timestamp_header {
                let ts = get(ts_header).ok_or("Missing timestamp header")?;
                let secs: i64 = ts.parse().map_err(|_| "Invalid timestamp format")?;
                // Stripe/GitHub-style timestamps are Unix seconds; the tolerance is in ms. In
                // i128 so that no sender's number (i64::MIN, i64::MAX) can overflow the check.
                let skew_ms = (i128::from(now_unix_ms) - i128::from(secs) * 1000).unsigned_abs();
                if skew_ms > u128::from(h.timestamp_tolerance) {
                    return Err("Request timestamp expired");
                }
                if h.signs_timestamp() {
                    signed_ts = Some(ts);
                }
            }
            let expected = hmac_signature(
                h.secret.expose().as_bytes(),
                &h.signature_prefix,
                signed_ts.as_deref(),
                body,
            );
            if !ct_eq(sig.as_bytes(), expected.as_bytes()) {
                return Err("Invalid signature");
            }
            Ok(())
        }
    }
}

/// `prefix` + lower-case hex of HMAC-SHA256(`secret`, `timestamp + "." + body` or `body`):
/// the one signature format, verified here and produced by the HTTP destination's `hmac`.
pub fn hmac_signature(secret: &[u8], prefix: &str, timestamp: Option<&str>, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    if let Some(ts) = timestamp {
        mac.update(ts.as_bytes());
        mac.update(b".");
    }
    mac.update(body);
    format!("{prefix}{}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_config::{HmacAuth, Secret};

    #[test]
    fn hmac_accepts_the_right_signature_and_refuses_a_stale_timestamp() {
        let a = AuthConfig::Hmac(HmacAuth {
            secret: Secret::new("k"),
            header_name: "X-Signature".into(),
            algorithm: "HmacSHA256".into(),
            signature_prefix: "sha256=".into(),
            timestamp_header: Some("X-Ts".into()),
            timestamp_tolerance: 300_000,
            signature_payload_format: None,
        });
        let mut mac = Hmac::<Sha256>::new_from_slice(b"k").unwrap();
        mac.update(b"1000.{}");
        let sig = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        let h = vec![
            ("x-signature".to_string(), sig),
            ("X-Ts".to_string(), "1000".to_string()),
        ];
        assert_eq!(check(&a, &h, b"{}", 1_000_000), Ok(()));
        assert_eq!(check(&a, &h, b"{ }", 1_000_000), Err("Invalid signature"));
        assert_eq!(
            check(&a, &h, b"{}", 9_000_000),
            Err("Request timestamp expired")
        );
        for extreme in [i64::MIN, i64::MAX, -1] {
            let h = vec![
                ("x-signature".to_string(), "sha256=00".to_string()),
                ("X-Ts".to_string(), extreme.to_string()),
            ];
            assert_eq!(
                check(&a, &h, b"{}", 1_000_000),
                Err("Request timestamp expired"),
                "X-Ts: {extreme}"
            );
        }
    }
}
