//! SQL Server backend (tiberius over tokio), behind the `sqlserver` cargo feature.
//!
//! It implements the same [`Store`] and [`StoreTx`] as [`crate::store::postgres`], with the
//! T-SQL of [`sql`] (proto-docs/sqlserver.md): the pull claim runs in its own transaction, serialised per
//! source by `sp_getapplock`, with `UPDLOCK, READPAST, ROWLOCK`; every time is UTC from
//! `SYSUTCDATETIME()`. There is no LISTEN/NOTIFY on SQL Server: [`Store::listen`] returns
//! `None` and workers poll. [`crate::store::relay::RelayStore`] is implemented in `relay.rs`.
//!
//! Connection strings ([`parse_connection_string`]; [`crate::backend`] decides which URLs come here):
//! - `sqlserver://user:password@host:1433/database?encrypt=true&trust_server_certificate=true`
//!   (`mssql://` is the same; user and password are percent-decoded);
//! - ADO.NET: `Server=tcp:host,1433;Database=app;User Id=sa;Password=...;TrustServerCertificate=true`;
//! - JDBC: `jdbc:sqlserver://host:1433;databaseName=app;user=sa;password=...`.

pub mod migrate;
mod pool;
mod pull;
mod relay;
pub mod sql;
mod tx;
pub mod value;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tiberius::{AuthMethod, Config, EncryptionLevel};

use crate::error::{Error, Result};
use crate::message::{ClaimRef, ClaimedRow, InsertOutcome, NewInboxMessage};
use crate::store::sqlserver_form::{sqlserver_form, SqlServerForm};
use crate::store::{Backend, Store, StoreTx, Wakeup};

pub use pool::{Pool, PooledConn};
pub use tx::SqlServerStoreTx;

/// The tiberius client type of a pooled connection.
pub type Client = tiberius::Client<tokio_util::compat::Compat<tokio::net::TcpStream>>;

/// No store operation may leave the per-source claim lock or a transaction behind for long:
/// the server must answer every round trip within this (at least 30 s, so that
/// the 10 s `sp_getapplock` timeout surfaces as Msg 51000 first).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A [`Store`] on a small pool of tiberius connections.
#[derive(Clone, Debug)]
pub struct SqlServerStore {
    pool: Arc<Pool>,
}

impl SqlServerStore {
    /// Parses `url` ([`parse_connection_string`]) and connects a pool of at most
    /// `max_connections`, failing with [`Error::Connect`] (password redacted) when the server
    /// is unreachable or refuses the login.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        Self::connect_with(url, max_connections, pool::DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// [`Self::connect`] with a bound on how long a statement waits for a pooled connection
    /// (opening one included); the backend factory passes the relay's
    /// `database.connectionTimeoutMs`.
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self> {
        let config = parse_connection_string(url)?;
        Self::open_pool(config, max_connections, &redact_url(url), acquire_timeout).await
    }

    /// Connects with a ready tiberius [`Config`]; `display` names the server in errors.
    pub async fn connect_with_config(
        config: Config,
        max_connections: u32,
        display: &str,
    ) -> Result<Self> {
        Self::connect_with_config_timeout(
            config,
            max_connections,
            display,
            pool::DEFAULT_ACQUIRE_TIMEOUT,
        )
        .await
    }

    /// [`Self::connect_with_config`] with the pool's acquire timeout (what the backend
    /// factory calls once it has set the configured login on `config`).
    pub async fn connect_with_config_timeout(
        config: Config,
        max_connections: u32,
        display: &str,
        acquire_timeout: Duration,
    ) -> Result<Self> {
        Self::open_pool(config, max_connections, display, acquire_timeout).await
    }

    async fn open_pool(
        config: Config,
        max_connections: u32,
        display: &str,
        acquire_timeout: Duration,
    ) -> Result<Self> {
        let pool = Arc::new(Pool::new(
            config,
            max_connections.max(2) as usize,
            display.to_string(),
            acquire_timeout,
        ));
        // One connection first: its error says why (refused, login failed, unknown database).
        let conn = pool.get().await?;
        conn.release();
        Ok(SqlServerStore { pool })
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Fails with [`Error::SchemaMissing`] unless both QueueBox tables exist.
    pub async fn check_schema(&self) -> Result<()> {
        let mut conn = self.pool.get().await?;
        let row = conn
            .client()
            .simple_query(sql::SCHEMA_CHECK)
            .await
            .map_err(|e| db_err("schema check", e))?
            .into_row()
            .await
            .map_err(|e| db_err("schema check", e))?;
        conn.release();
        let row = row.ok_or_else(|| Error::Database {
            operation: "schema check",
            message: "no row".into(),
            code: None,
        })?;
        for table in ["inbox", "outbox"] {
            if row.get::<i32, _>(format!("has_{table}").as_str()) != Some(1) {
                return Err(Error::SchemaMissing {
                    table: table.into(),
                });
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Store for SqlServerStore {
    fn backend(&self) -> Backend {
        Backend::SqlServer
    }

    async fn insert_inbox(&self, msg: &NewInboxMessage) -> Result<InsertOutcome> {
        msg.validate()?;
        pull::insert_inbox(&self.pool, msg).await
    }

    async fn claim_pull(
        &self,
        source: &str,
        batch: u32,
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>> {
        pull::claim(&self.pool, source, batch, lease).await
    }

    async fn renew_pull(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<uuid::Uuid>> {
        pull::renew(&self.pool, claims, lease).await
    }

    async fn complete_pull(&self, claim: &ClaimRef) -> Result<bool> {
        pull::fenced(
            &self.pool,
            "pull complete",
            sql::COMPLETE,
            claim,
            pull::Extra::None,
        )
        .await
    }

    async fn complete_pull_many(&self, claims: &[ClaimRef]) -> Result<Vec<uuid::Uuid>> {
        pull::complete_many(&self.pool, claims).await
    }

    async fn retry_pull(&self, claim: &ClaimRef, delay: Duration, error: &str) -> Result<bool> {
        pull::fenced(
            &self.pool,
            "pull retry",
            sql::RETRY,
            claim,
            pull::Extra::ErrorAndDelay(error, delay),
        )
        .await
    }

    async fn dead_pull(&self, claim: &ClaimRef, error: &str) -> Result<bool> {
        pull::fenced(
            &self.pool,
            "pull dead",
            sql::DEAD,
            claim,
            pull::Extra::Error(error),
        )
        .await
    }

    async fn release_pull(&self, claim: &ClaimRef) -> Result<bool> {
        pull::fenced(
            &self.pool,
            "pull release",
            sql::RELEASE,
            claim,
            pull::Extra::None,
        )
        .await
    }

    async fn begin(&self) -> Result<Box<dyn StoreTx>> {
        Ok(Box::new(SqlServerStoreTx::begin(&self.pool).await?))
    }

    async fn listen(&self, _source: &str) -> Result<Option<Box<dyn Wakeup>>> {
        Ok(None)
    }
}

/// Parses a SQL Server connection string (see the module docs) into a tiberius [`Config`].
pub fn parse_connection_string(url: &str) -> Result<Config> {
    let bad = |reason: String| Error::Connect {
        url: redact_url(url),
        reason,
    };
    let trimmed = url.trim();
    let mut config = match sqlserver_form(trimmed) {
        Some(SqlServerForm::Jdbc) => Config::from_jdbc_string(trimmed).map_err(|e| bad(format!("not a JDBC SQL Server URL: {e}")))?,
        Some(SqlServerForm::Url) => parse_url(trimmed).map_err(bad)?,
        Some(SqlServerForm::Ado) => Config::from_ado_string(trimmed).map_err(|e| bad(format!("not an ADO.NET connection string: {e}")))?,
        None => return Err(bad("not a SQL Server connection string (sqlserver://, mssql://, jdbc:sqlserver:// or Server=...;)".into())),
    };
    config.command_timeout(Some(COMMAND_TIMEOUT));
    if config.get_handshake_timeout().is_none() {
        config.handshake_timeout(Some(Duration::from_secs(10)));
    }
    Ok(config)
}

/// The user name and password a SQL Server connection string names, read with the parser
/// tiberius itself uses (`connection-string`), under tiberius' key names: `uid`, `username`,
/// `user`, `user id`; `password`, `pwd`.
pub(crate) fn url_login(url: &str) -> Result<(Option<String>, Option<String>)> {
    use std::collections::HashMap;
    let bad = |e: String| Error::Connect {
        url: redact_url(url),
        reason: e,
    };
    let trimmed = url.trim();
    let from = |d: &HashMap<String, String>| {
        let user = ["uid", "username", "user", "user id"]
            .iter()
            .find_map(|k| d.get(*k).cloned());
        let password = ["password", "pwd"].iter().find_map(|k| d.get(*k).cloned());
        (user, password)
    };
    match sqlserver_form(trimmed) {
        Some(SqlServerForm::Url) => {
            let rest = trimmed.split_once("://").map(|(_, r)| r).unwrap_or(trimmed);
            let authority = rest.split(['/', '?']).next().unwrap_or("");
            let Some((userinfo, _)) = authority.rsplit_once('@') else {
                return Ok((None, None));
            };
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            Ok((
                Some(percent_decode(user).map_err(bad)?),
                password.map(percent_decode).transpose().map_err(bad)?,
            ))
        }
        Some(SqlServerForm::Jdbc) => {
            let jdbc: connection_string::JdbcString = trimmed
                .parse()
                .map_err(|e| bad(format!("not a JDBC SQL Server URL: {e}")))?;
            Ok(from(jdbc.properties()))
        }
        Some(SqlServerForm::Ado) => {
            let ado: connection_string::AdoNetString = trimmed
                .parse()
                .map_err(|e| bad(format!("not an ADO.NET connection string: {e}")))?;
            Ok(from(&ado))
        }
        None => Err(bad("not a SQL Server connection string".into())),
    }
}

/// `sqlserver://user:password@host:port/database?key=value&…`.
fn parse_url(url: &str) -> std::result::Result<Config, String> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, database) = main.split_once('/').unwrap_or((main, ""));
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let mut config = Config::new();
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (
            h,
            Some(
                p.parse::<u16>()
                    .map_err(|_| format!("port `{p}` is not a number"))?,
            ),
        ),
        _ => (hostport, None),
    };
    if host.is_empty() {
        return Err("the URL names no host".into());
    }
    config.host(percent_decode(host)?);
    config.port(port.unwrap_or(1433));
    if !database.is_empty() {
        config.database(percent_decode(database)?);
    }
    if let Some(userinfo) = userinfo {
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        config.authentication(AuthMethod::sql_server(
            percent_decode(user)?,
            percent_decode(password)?,
        ));
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
        let value = percent_decode(value)?;
        let truthy = matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "yes" | "1" | "on"
        );
        match key.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "encrypt" => config.encryption(match value.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" | "required" | "mandatory" | "strict" => EncryptionLevel::Required,
                "false" | "no" | "0" | "off" | "optional" => EncryptionLevel::Off,
                "disable" | "disabled" | "notsupported" | "not_supported" | "none" => EncryptionLevel::NotSupported,
                other => return Err(format!("encrypt=`{other}` is not one of true, false, disable")),
            }),
            "trustservercertificate" => {
                if truthy {
                    config.trust_cert();
                }
            }
            "applicationname" | "appname" => config.application_name(value),
            "database" | "databasename" => config.database(value),
            other => return Err(format!("unknown connection option `{other}` (known: encrypt, trust_server_certificate, application_name, database)")),
        }
    }
    Ok(config)
}

fn percent_decode(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or_else(|| format!("bad percent escape in `{s}`"))?;
            out.push(
                u8::from_str_radix(hex, 16).map_err(|_| format!("bad percent escape in `{s}`"))?,
            );
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` does not decode to UTF-8"))
}

/// Maps a tiberius error to [`Error`]: a server error keeps its number as the code (51000 is
/// the claim's applock timeout, transient), a missing table (Msg 208) is
/// [`Error::SchemaMissing`], a broken or unreachable connection is [`Error::Unavailable`]
/// (transient).
pub fn db_err(operation: &'static str, e: tiberius::error::Error) -> Error {
    match e {
        tiberius::error::Error::Server(t) => {
            if t.code() == 208 {
                let table = t
                    .message()
                    .split('\'')
                    .nth(1)
                    .unwrap_or("inbox")
                    .to_string();
                return Error::SchemaMissing { table };
            }
            Error::Database {
                operation,
                message: t.message().to_string(),
                code: Some(t.code().to_string()),
            }
        }
        // The server cannot be reached or the connection broke: unavailable (transient; the
        // relay's ingest answers 503), as on PostgreSQL.
        tiberius::error::Error::Io { .. }
        | tiberius::error::Error::Tls(_)
        | tiberius::error::Error::Routing { .. }
        | tiberius::error::Error::Protocol(_) => Error::Unavailable {
            operation,
            reason: e.to_string(),
        },
        other => Error::Database {
            operation,
            message: other.to_string(),
            code: Some("client".into()),
        },
    }
}

/// Passwords in URLs and `Password=` pairs masked.
pub fn redact_url(url: &str) -> String {
    crate::headers::redact_error(url, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts_reach_the_tiberius_config() {
        let c = parse_connection_string(
            "sqlserver://sa:p%40ss%3Bword@db.example:14330/qb_app?trust_server_certificate=true",
        )
        .unwrap();
        assert_eq!(c.get_addr(), "db.example:14330");
        let c = parse_connection_string("mssql://sa:pw@localhost").unwrap();
        assert_eq!(c.get_addr(), "localhost:1433");
        assert_eq!(c.get_command_timeout(), Some(COMMAND_TIMEOUT));
    }

    #[test]
    fn bad_urls_fail_with_a_redacted_connect_error() {
        let e =
            parse_connection_string("sqlserver://sa:hunter22@localhost:notaport/app").unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::Connect { .. }), "{text}");
        assert!(
            text.contains("notaport") && !text.contains("hunter22"),
            "{text}"
        );
        let e = parse_connection_string("sqlserver://sa:pw@localhost/app?colour=blue").unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        assert!(parse_connection_string("postgres://localhost/app").is_err());
    }

    #[test]
    fn percent_decoding_handles_reserved_characters() {
        assert_eq!(percent_decode("p%40ss%3Bw%C3%B6rd").unwrap(), "p@ss;wörd");
        assert!(percent_decode("bad%zz").is_err());
        assert!(percent_decode("bad%4").is_err());
    }
}
