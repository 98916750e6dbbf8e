//! The error type of the core: one variant per thing a caller can act on.

use uuid::Uuid;

/// Result alias used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by the store, the worker and the helpers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A fenced write (renew, complete, retry, dead, release) matched no row: the lease
    /// expired or another worker holds the row now. Never retry it with another token.
    #[error("claim lost on inbox row {id} during {operation}: the lease expired or another worker owns the row")]
    ClaimLost { id: Uuid, operation: &'static str },

    /// The database could not be reached with the given URL (password redacted).
    #[error("cannot connect to the database at {url}: {reason}")]
    Connect { url: String, reason: String },

    /// The database answered, but the encrypted connection the URL asks for could not be
    /// set up: the server's certificate is not signed by `sslrootcert`, does not name the
    /// host, has expired, the client certificate is missing or refused, or a certificate
    /// file cannot be read. Never transient: retrying with the same settings fails the same
    /// way, and QueueBox never falls back to plain text (only `sslmode=prefer` does, by
    /// definition). Its kind is [`ErrorKind::Connect`].
    #[error("cannot set up TLS to the database at {url}: {reason}")]
    Tls { url: String, reason: String },

    /// A QueueBox table is missing: the schema was never migrated.
    #[error("table `{table}` does not exist: run `queuebox migrate --database-url <url>` first")]
    SchemaMissing { table: String },

    /// The migration history disagrees with the migrations shipped in this build.
    #[error("migration error: {0}")]
    Migration(String),

    /// The database could not be reached for a statement: no pooled connection within the
    /// acquire timeout (`database.connectionTimeoutMs`), connection refused or reset, an I/O
    /// error, or the server shutting down. Nothing was written; the same call may succeed
    /// once the database is back. Its kind is [`ErrorKind::Connect`].
    #[error("database unavailable during {operation}: {reason}")]
    Unavailable {
        operation: &'static str,
        reason: String,
    },

    /// A database statement failed.
    #[error("database error during {operation}: {message}")]
    Database {
        operation: &'static str,
        message: String,
        /// The SQLSTATE / server error code, when the driver gave one.
        code: Option<String>,
    },

    /// A setting is invalid; `path` names the offending key (e.g. `worker.batchSize`).
    #[error("invalid configuration at `{path}`: {reason}")]
    Config { path: String, reason: String },

    /// A value given by the caller is invalid (a bad parameter, an over-long key, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The task was already completed, retried, dead-lettered or released.
    #[error("inbox row {id} was already finished by this worker")]
    AlreadyFinished { id: Uuid },

    /// The operation was cancelled (worker shutdown or caller cancellation).
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// A stable, machine-readable name of the variant (used by the C ABI and the wrappers).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::ClaimLost { .. } => ErrorKind::ClaimLost,
            Error::Connect { .. } | Error::Tls { .. } | Error::Unavailable { .. } => {
                ErrorKind::Connect
            }
            Error::SchemaMissing { .. } => ErrorKind::SchemaMissing,
            Error::Migration(_) => ErrorKind::Migration,
            Error::Database { .. } => ErrorKind::Database,
            Error::Config { .. } => ErrorKind::Config,
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::AlreadyFinished { .. } => ErrorKind::AlreadyFinished,
            Error::Cancelled => ErrorKind::Cancelled,
        }
    }

    /// An [`Error::Config`] naming the offending field (`path`) and what is wrong with it.
    pub fn config(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// True when the database could not be reached (as opposed to a statement the database
    /// refused): the relay answers 503 with `Retry-After` instead of a storage failure.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Connect { .. } | Error::Unavailable { .. })
    }

    /// True when retrying the same call later may succeed (a dropped connection, a
    /// serialisation failure, a lock timeout). The worker backs off and retries these.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Connect { .. } | Error::Unavailable { .. } => true,
            Error::Database { code, .. } => match code.as_deref() {
                // connection exceptions, serialization failure, deadlock, lock timeout,
                // admin shutdown, SQL Server applock timeout (51000), or no code at all (I/O).
                // SQL Server error numbers: 1205 deadlock victim, 1222 lock request timeout.
                None => true,
                Some(c) => {
                    c.starts_with("08")
                        || matches!(
                            c,
                            "40001"
                                | "40P01"
                                | "55P03"
                                | "57P01"
                                | "57P02"
                                | "57P03"
                                | "51000"
                                | "1205"
                                | "1222"
                        )
                }
            },
            _ => false,
        }
    }
}

/// What a caller can act on, with a stable numeric code and a stable name. This is the one
/// error-kind table of QueueBox: the C ABI's `QB_ERR_*` statuses carry [`ErrorKind::code`],
/// the Node and Python bindings set [`ErrorKind::as_str`] on the errors they raise, and
/// `proto-docs/error-kinds.json` (written from [`ErrorKind::ALL`] and checked by a test of
/// this crate) is what the Go, C#, TypeScript and Python tests compare their own mappings
/// with, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorKind {
    ClaimLost = 2,
    Connect = 3,
    SchemaMissing = 4,
    Migration = 5,
    Database = 6,
    Config = 7,
    InvalidInput = 8,
    AlreadyFinished = 9,
    Cancelled = 10,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::ClaimLost,
        ErrorKind::Connect,
        ErrorKind::SchemaMissing,
        ErrorKind::Migration,
        ErrorKind::Database,
        ErrorKind::Config,
        ErrorKind::InvalidInput,
        ErrorKind::AlreadyFinished,
        ErrorKind::Cancelled,
    ];

    /// The stable numeric code (the C ABI status value).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind with this code, if any.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The stable name (`"claim_lost"`, ...), as a NUL-terminated C string for the C ABI.
    pub fn name_cstr(self) -> &'static std::ffi::CStr {
        match self {
            ErrorKind::ClaimLost => c"claim_lost",
            ErrorKind::Connect => c"connect",
            ErrorKind::SchemaMissing => c"schema_missing",
            ErrorKind::Migration => c"migration",
            ErrorKind::Database => c"database",
            ErrorKind::Config => c"config",
            ErrorKind::InvalidInput => c"invalid_input",
            ErrorKind::AlreadyFinished => c"already_finished",
            ErrorKind::Cancelled => c"cancelled",
        }
    }

    /// The stable name (`"claim_lost"`, `"connect"`, ...).
    pub fn as_str(self) -> &'static str {
        self.name_cstr().to_str().expect("kind names are ASCII")
    }

    /// The table as JSON: `{"kinds": [{"code": 2, "name": "claim_lost"}, ...]}`, the content
    /// of `proto-docs/error-kinds.json`.
    pub fn table_json() -> serde_json::Value {
        let kinds: Vec<_> = ErrorKind::ALL
            .iter()
            .map(|k| serde_json::json!({"code": k.code(), "name": k.as_str()}))
            .collect();
        serde_json::json!({ "kinds": kinds })
    }
}

#[cfg(test)]
mod tests {
    use super::{Error, ErrorKind};

    fn db(code: Option<&str>) -> Error {
        Error::Database {
            operation: "claim",
            message: "x".into(),
            code: code.map(String::from),
        }
    }

    /// Contract item 19: SQL Server's claim-lock failure (Msg 51000) is transient, as are
    /// deadlocks, lock and serialisation failures and a lost connection on either database;
    /// a statement the database refused for good (a constraint, a syntax error, a missing
    /// column) and the errors a caller must act on are not.
    #[test]
    fn transient_errors_are_the_ones_a_retry_may_cure() {
        for code in [
            "51000", "1205", "1222", "40001", "40P01", "55P03", "57P01", "08006",
        ] {
            assert!(db(Some(code)).is_transient(), "{code}");
        }
        assert!(db(None).is_transient(), "no code at all: an I/O error");
        for code in ["23505", "42601", "42703", "P0001", "client", "208"] {
            assert!(!db(Some(code)).is_transient(), "{code}");
        }
        let unavailable = Error::Unavailable {
            operation: "claim",
            reason: "connection refused".into(),
        };
        assert!(unavailable.is_transient());
        let lost = Error::ClaimLost {
            id: uuid::Uuid::nil(),
            operation: "complete",
        };
        assert!(!lost.is_transient());
        assert!(!Error::Cancelled.is_transient());
        assert!(!Error::config("worker.batchSize", "0").is_transient());
    }

    /// Unreachable is the database not answering (the relay's 503 with `Retry-After`), not a
    /// statement it refused, however transient: a lock timeout is retried but is no outage.
    #[test]
    fn unavailable_means_the_database_did_not_answer() {
        let connect = Error::Connect {
            url: "postgres://db/x".into(),
            reason: "connection refused".into(),
        };
        assert!(connect.is_unavailable());
        let unavailable = Error::Unavailable {
            operation: "claim",
            reason: "pool timed out".into(),
        };
        assert!(unavailable.is_unavailable());
        let lock_timeout = db(Some("55P03"));
        assert!(lock_timeout.is_transient() && !lock_timeout.is_unavailable());
        let tls = Error::Tls {
            url: "postgres://db/x".into(),
            reason: "unknown issuer".into(),
        };
        assert!(!tls.is_unavailable());
        assert!(!Error::Cancelled.is_unavailable());
    }

    /// proto-docs/error-kinds.json is the table every wrapper's tests compare with; it must be
    /// exactly what [`ErrorKind`] says. `QB_BLESS=1` rewrites it after a deliberate change.
    #[test]
    fn error_kinds_json_matches_the_core_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../proto-docs/error-kinds.json");
        let fresh = serde_json::to_string_pretty(&ErrorKind::table_json()).unwrap() + "\n";
        if std::env::var_os("QB_BLESS").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            on_disk,
            fresh,
            "{} is stale: rerun with QB_BLESS=1 to rewrite it",
            path.display()
        );
    }

    #[test]
    fn every_code_maps_back_to_its_kind() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(k.code()), Some(k));
        }
        assert_eq!(ErrorKind::from_code(0), None);
        let names: std::collections::HashSet<_> =
            ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len(), "names are unique");
    }
}
