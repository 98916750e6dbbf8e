//! HTTPS on the relay's own ports (`server.tls`), for deployments without a terminating
//! proxy. rustls (ring provider) does the handshake; the certificate lives behind a lock so
//! SIGHUP, or a change to the files (polled every [`POLL`], as cert-manager or certbot
//! replace them without signalling anyone), can swap in a renewed one without a restart:
//! connections accepted after the reload see the new certificate, open ones keep theirs. A
//! reload that fails (a missing file, a key that does not match) keeps the old certificate
//! and logs why. With
//! `clientCaFile` the handshake also requires a client certificate that chains to one of
//! those CAs (mutual TLS).

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Why a certificate or key could not be loaded; each names the `server.tls` key.
#[derive(Debug, thiserror::Error)]
pub enum TlsLoadError {
    #[error("server.tls.certFile: cannot read certificates from {path}: {reason}")]
    Cert { path: String, reason: String },
    #[error("server.tls.certFile: {path} holds no certificate")]
    NoCert { path: String },
    #[error("server.tls.keyFile: cannot read a private key from {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("server.tls.clientCaFile: cannot use CA certificates from {path}: {reason}")]
    ClientCa { path: String, reason: String },
    #[error("server.tls: the key in {key} does not belong to the certificate in {cert}: {reason}")]
    Mismatch {
        cert: String,
        key: String,
        reason: String,
    },
}

/// The listener's current TLS configuration, shared by both ports.
pub struct ListenerTls {
    settings: queuebox_config::ServerTls,
    current: RwLock<Arc<ServerConfig>>,
}

impl ListenerTls {
    /// Loads the certificate and key once; start-up fails on an error.
    pub fn load(settings: &queuebox_config::ServerTls) -> Result<Arc<Self>, TlsLoadError> {
        let config = server_config(settings)?;
        Ok(Arc::new(ListenerTls {
            settings: settings.clone(),
            current: RwLock::new(config),
        }))
    }

    /// The acceptor for the next connection (the certificate as of now).
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .expect("the TLS lock is never poisoned")
                .clone(),
        )
    }

    /// Re-reads the files; on an error the old certificate stays in use.
    pub fn reload(&self) -> Result<(), TlsLoadError> {
        let config = server_config(&self.settings)?;
        *self
            .current
            .write()
            .expect("the TLS lock is never poisoned") = config;
        Ok(())
    }

    /// Reloads on every SIGHUP until the process ends.
    #[cfg(unix)]
    pub fn reload_on_sighup(self: Arc<Self>) -> std::io::Result<()> {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                self.reload_logged("SIGHUP");
            }
        });
        Ok(())
    }

    /// Windows has no SIGHUP: the file watch ([`Self::reload_on_change`]) reloads there.
    #[cfg(windows)]
    pub fn reload_on_sighup(self: Arc<Self>) -> std::io::Result<()> {
        Ok(())
    }

    /// Reloads whenever the certificate, key or client CA file changes (modification time
    /// or size, checked every [`POLL`]) until the process ends. A failed reload is not
    /// retried until the files change again: a certificate written before its key fails
    /// once, and the key's write brings the next, good, reload.
    pub fn reload_on_change(self: Arc<Self>) {
        tokio::spawn(async move {
            let mut seen = self.stamps();
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = self.stamps();
                if now != seen {
                    seen = now;
                    self.reload_logged("the files changed");
                }
            }
        });
    }

    fn reload_logged(&self, why: &str) {
        match self.reload() {
            Ok(()) => {
                tracing::info!(cert = %self.settings.cert_file, trigger = why, "reloaded the listener certificate")
            }
            Err(e) => {
                tracing::error!(error = %e, trigger = why, "could not reload the listener certificate; keeping the old one")
            }
        }
    }

    /// Modification time and size of each file (None for one that cannot be read).
    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        let s = &self.settings;
        [
            Some(&s.cert_file),
            Some(&s.key_file),
            s.client_ca_file.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|f| {
            let m = std::fs::metadata(f).ok()?;
            Some((m.modified().ok()?, m.len()))
        })
        .collect()
    }
}

/// How often [`ListenerTls::reload_on_change`] looks at the files.
pub const POLL: Duration = Duration::from_secs(2);

fn server_config(s: &queuebox_config::ServerTls) -> Result<Arc<ServerConfig>, TlsLoadError> {
    let certs = CertificateDer::pem_file_iter(&s.cert_file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsLoadError::Cert {
            path: s.cert_file.clone(),
            reason: pem_reason(&s.cert_file, e),
        })?;
    if certs.is_empty() {
        return Err(TlsLoadError::NoCert {
            path: s.cert_file.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(&s.key_file).map_err(|e| TlsLoadError::Key {
        path: s.key_file.clone(),
        reason: pem_reason(&s.key_file, e),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let builder = match &s.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsLoadError::Mismatch {
            cert: s.cert_file.clone(),
            key: s.key_file.clone(),
            reason: e.to_string(),
        })?;
    // The connection loop speaks HTTP/1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Mutual TLS: a client certificate is required and must chain to a CA in `path`.
fn client_verifier(
    path: &str,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsLoadError> {
    let err = |reason: String| TlsLoadError::ClientCa {
        path: path.to_string(),
        reason,
    };
    let cas = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| err(pem_reason(path, e)))?;
    let mut roots = RootCertStore::empty();
    for ca in cas {
        roots.add(ca).map_err(|e| err(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(err("the file holds no certificate".into()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| err(e.to_string()))
}

fn pem_reason(path: &str, e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) if !Path::new(path).exists() => {
            format!("the file does not exist ({io})")
        }
        rustls::pki_types::pem::Error::NoItemsFound => {
            "no PEM item of that kind in the file".into()
        }
        other => other.to_string(),
    }
}
