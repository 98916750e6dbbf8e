//! The process-wide TLS crypto provider.
//!
//! rustls picks its process-level provider by itself only when exactly one of its providers
//! is compiled in. A QueueBox build has both (ring, which sqlx, lapin and the relay's
//! listener use, and aws-lc-rs, which tiberius pulls in for SQL Server), so the first TLS
//! client that asks for the default — sqlx's `verify-ca`, async-nats, lapin — would panic.
//! Every TLS client of QueueBox calls [`install_provider`] before it connects.

/// Installs ring as the process-wide rustls provider, unless the application installed one
/// already (then that one stays). Cheap and idempotent.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
