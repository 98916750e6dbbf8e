//! TLS to PostgreSQL. sqlx does the handshake (rustls with the `ring` provider, no OpenSSL)
//! from the libpq URL parameters users already write — `sslmode`, `sslrootcert`,
//! `sslcert`, `sslkey` — so the relay, `queuebox migrate` and every language's worker get
//! it from the URL alone. This module adds what sqlx leaves out:
//!
//! - [`prepare`]: a certificate file that cannot be read is named before any connection is
//!   tried (sqlx would only say "No such file or directory"), and libpq's rule that
//!   `sslmode=require` with an `sslrootcert` verifies the chain like `verify-ca`.
//! - [`connect_error`]: a handshake failure becomes [`Error::Tls`] with the cause in words
//!   (wrong CA, host-name mismatch, expired, client certificate missing or refused), where
//!   sqlx reports a bare I/O error such as `invalid peer certificate: UnknownIssuer`.
//!
//! Two differences from libpq, both in sqlx 0.8: it trusts the Mozilla root set
//! (webpki-roots) in addition to `sslrootcert`, so a certificate from a public CA for the
//! host name is accepted too; and with rustls 0.23.46 its `verify-ca` still checks the host
//! name (its verifier skips only the older `NotValidForName` error, and rustls now reports
//! `NotValidForNameContext`). The README recommends `verify-full`, which behaves as libpq's.

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::error::{Error, Result};

use super::redact_url;

/// The libpq parameter names and the aliases sqlx also accepts.
const ROOT_CERT: [&str; 3] = ["sslrootcert", "ssl-root-cert", "ssl-ca"];
const CLIENT_CERT: [&str; 2] = ["sslcert", "ssl-cert"];
const CLIENT_KEY: [&str; 2] = ["sslkey", "ssl-key"];

/// Checks the TLS parameters of `url` before connecting and applies libpq's
/// `require`-with-a-CA rule to `opts` (parsed from the same URL).
pub(super) fn prepare(url: &str, opts: PgConnectOptions) -> Result<PgConnectOptions> {
    // sqlx's `verify-ca` verifier asks rustls for the process-wide crypto provider.
    if !matches!(opts.get_ssl_mode(), PgSslMode::Disable) {
        crate::tls::install_provider();
    }
    let Ok(parsed) = url::Url::parse(url) else {
        return Ok(opts);
    };
    let param = |names: &[&str]| {
        parsed
            .query_pairs()
            .find(|(k, _)| names.contains(&k.as_ref()))
            .map(|(_, v)| v.into_owned())
    };
    let tls_error = |reason: String| Error::Tls {
        url: redact_url(url),
        reason,
    };
    let root = param(&ROOT_CERT);
    let cert = param(&CLIENT_CERT);
    let key = param(&CLIENT_KEY);
    for (name, value) in [("sslrootcert", &root), ("sslcert", &cert), ("sslkey", &key)] {
        // An inline PEM value (sqlx accepts one) is not a path.
        if let Some(path) = value
            .as_deref()
            .filter(|v| !v.trim_start().starts_with("-----BEGIN"))
        {
            std::fs::File::open(path)
                .map_err(|e| tls_error(format!("{name} file `{path}` cannot be read: {e}")))?;
        }
    }
    if cert.is_some() != key.is_some() {
        return Err(tls_error("sslcert and sslkey must be given together (the client certificate and its private key)".into()));
    }
    // libpq: "if a root CA file exists, the behavior of sslmode=require will be the same as
    // that of verify-ca"; sqlx alone would skip the chain check.
    if matches!(opts.get_ssl_mode(), PgSslMode::Require) && root.is_some() {
        return Ok(opts.ssl_mode(PgSslMode::VerifyCa));
    }
    Ok(opts)
}

/// Maps a failed connection attempt to [`Error::Tls`] when TLS is the cause, and to
/// [`Error::Connect`] otherwise.
pub(super) fn connect_error(url: &str, host: &str, e: sqlx::Error) -> Error {
    let url = redact_url(url);
    if let Some(tls) = find_rustls_error(&e) {
        return Error::Tls {
            url,
            reason: format!("{} ({tls})", explain(tls, host)),
        };
    }
    match &e {
        sqlx::Error::Tls(cause) => Error::Tls { url, reason: cause.to_string() },
        // pg_hba.conf's `cert` method or `clientcert=verify-full` with no usable certificate.
        sqlx::Error::Database(d) if d.code().as_deref() == Some("28000") && d.message().contains("certificate") => {
            Error::Tls { url, reason: format!("the server refused the connection: {} (set sslcert and sslkey to a client certificate its ssl_ca_file trusts, whose CN is the user name)", d.message()) }
        }
        _ => Error::Connect { url, reason: e.to_string() },
    }
}

/// The rustls error behind a sqlx error: sqlx reports handshake failures as I/O errors
/// wrapping it, and certificate-loading failures as `Tls` errors.
fn find_rustls_error(e: &sqlx::Error) -> Option<&rustls::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = match e {
        sqlx::Error::Io(io) => io
            .get_ref()
            .map(|inner| inner as &(dyn std::error::Error + 'static)),
        sqlx::Error::Tls(inner) => Some(inner.as_ref() as &(dyn std::error::Error + 'static)),
        _ => None,
    };
    while let Some(c) = cause {
        if let Some(found) = c.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        cause = c.source();
    }
    None
}

/// What a rustls failure means for the person reading the start-up error.
fn explain(e: &rustls::Error, host: &str) -> String {
    use rustls::{AlertDescription as A, CertificateError as C};
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer | C::BadSignature => {
                "the server's certificate is not signed by a CA QueueBox trusts: is sslrootcert the CA that signed the server's ssl_cert_file?".into()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                format!("the server's certificate does not name `{host}`: connect with a host name or address in the certificate's subjectAltName")
            }
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet (check the clocks)".into(),
            C::Revoked => "the server's certificate is revoked".into(),
            _ => "the server's certificate was rejected".into(),
        },
        rustls::Error::AlertReceived(A::CertificateRequired) => "the server requires a client certificate: set sslcert and sslkey".into(),
        rustls::Error::AlertReceived(A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::DecryptError) => {
            "the server refused the client certificate (sslcert): is it signed by the CA in the server's ssl_ca_file?".into()
        }
        rustls::Error::AlertReceived(A::CertificateExpired) => "the server says the client certificate (sslcert) has expired".into(),
        _ => "the TLS handshake failed".into(),
    }
}
