//! [`BrokerError`]: what went wrong with a broker, one variant per thing a caller acts on.
//! Every message names the broker and the connection (`RabbitMQ `orders` at amqp://…`) or the
//! configuration key, with credentials redacted. [`IngestError`]: why a source's store of a
//! message did not end in an acknowledgement (the [`crate::ingest::Sink`]'s error).

/// A broker client's failure. [`BrokerError::retryable`] says whether the same call could
/// succeed later without anyone changing the configuration or the broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration cannot work: a bad template or column, a queue or stream that does
    /// not exist, a client setting the broker library refuses. Fix the configuration.
    #[error("{path}: {reason}")]
    Config { path: String, reason: String },
    /// No connection: nothing answered, the connection was refused or dropped, or a
    /// channel broke. Usually passes when the broker is back.
    #[error("{connection}: {reason}")]
    Connect { connection: String, reason: String },
    /// The broker refused the login (password, token, NKey, `.creds`, SASL).
    #[error("{connection}: login refused: {reason}")]
    Auth { connection: String, reason: String },
    /// The TLS handshake failed or a certificate file could not be read: an untrusted or
    /// expired certificate, a host name it does not name, a missing client certificate.
    #[error("{connection}: TLS failed: {reason}")]
    Tls { connection: String, reason: String },
    /// Connected, but the broker refused this message (a nack, unroutable, a stream or
    /// topic that refused it), or the message could not be encoded.
    #[error("{connection}: {reason}")]
    Refused { connection: String, reason: String },
    /// No confirmation within the publish budget: the broker may or may not have it.
    #[error("{connection}: {reason}")]
    Timeout { connection: String, reason: String },
    /// The crash failpoint of the tests fired (`QB_FAILPOINT_CRASH_AFTER_STORES`).
    #[error("{0}")]
    Crashed(#[from] IngestError),
}

impl BrokerError {
    /// True when retrying the same call may succeed with nothing changed: a lost or refused
    /// connection, a timeout, a message the broker refused this time. A configuration, login
    /// or TLS failure needs someone to change something first.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            BrokerError::Connect { .. } | BrokerError::Refused { .. } | BrokerError::Timeout { .. }
        )
    }

    /// True for what stops the connection itself (connect, login, TLS): the component is down.
    pub fn is_connection(&self) -> bool {
        matches!(
            self,
            BrokerError::Connect { .. } | BrokerError::Auth { .. } | BrokerError::Tls { .. }
        )
    }

    pub(crate) fn config(path: impl Into<String>, reason: impl ToString) -> Self {
        BrokerError::Config {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
}

/// Why a store did not end in an acknowledgement.
#[derive(Debug)]
pub enum IngestError {
    /// The store failed: do not acknowledge; the broker must deliver the message again.
    Store(queuebox_core::Error),
    /// Failpoint: the row committed and the source must now stop as if killed, without
    /// acknowledging (tests of the crash window between commit and ack).
    CrashAfterStore,
}

impl std::fmt::Display for IngestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IngestError::Store(e) => write!(f, "the inbox store failed: {e}"),
            IngestError::CrashAfterStore => {
                f.write_str("failpoint: stopped after the store, before the acknowledgement")
            }
        }
    }
}

impl std::error::Error for IngestError {}

/// Sorts a connection failure by the words of its cause, for the client libraries that only
/// say it in text (lapin; async-nats and rdkafka have kinds, used where they exist).
pub(crate) fn classify_connect(connection: String, reason: String) -> BrokerError {
    let lower = reason.to_ascii_lowercase();
    if lower.contains("access_refused")
        || lower.contains("authentication")
        || lower.contains("authorization")
        || lower.contains("login")
    {
        BrokerError::Auth { connection, reason }
    } else if lower.contains("tls")
        || lower.contains("certificate")
        || lower.contains("handshake")
        || lower.contains("ssl")
    {
        BrokerError::Tls { connection, reason }
    } else {
        BrokerError::Connect { connection, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_failures_are_sorted_into_login_tls_and_reachability() {
        let at = || "RabbitMQ `orders` at amqp://***@127.0.0.1:5672/".to_string();
        let auth = classify_connect(at(), "ACCESS_REFUSED - Login was refused".into());
        let tls = classify_connect(at(), "invalid peer certificate: UnknownIssuer".into());
        let down = classify_connect(at(), "Connection refused (os error 111)".into());
        assert!(matches!(auth, BrokerError::Auth { .. }) && !auth.retryable());
        assert!(matches!(tls, BrokerError::Tls { .. }) && !tls.retryable());
        assert!(matches!(down, BrokerError::Connect { .. }) && down.retryable());
        assert_eq!(
            auth.to_string(),
            "RabbitMQ `orders` at amqp://***@127.0.0.1:5672/: login refused: ACCESS_REFUSED - Login was refused"
        );
        let config = BrokerError::config("destinations.bus.exchangeFrom", "not a column");
        assert!(!config.retryable() && !config.is_connection());
        assert_eq!(
            config.to_string(),
            "destinations.bus.exchangeFrom: not a column"
        );
    }
}
