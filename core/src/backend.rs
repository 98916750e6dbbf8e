//! The backend factory: the one place a database URL becomes a backend.
//!
//! [`connect`] reads the URL's form ([`DatabaseUrl::parse`]), opens the matching store and
//! hands back a [`Database`]: the pull store ([`Store`]) for workers, the relay store
//! ([`RelayStore`]) for the relay, the migration runner, the schema check and the pool gauges.
//! The relay, [`crate::Worker::connect`], `queuebox migrate` and every language binding go
//! through here; nothing else looks at a URL scheme.
//!
//! Adding a database is one module under [`crate::store`] implementing [`Store`] and
//! [`RelayStore`], one [`Database`] implementation below, one arm in [`DatabaseUrl::parse`] and
//! [`connect`], and passing `core/tests/store_contract.rs` (see `proto-docs/backends.md`).
//!
//! Accepted URL forms ([`ACCEPTED_FORMS`]):
//! - PostgreSQL: `postgres://user:pass@host:5432/db`, `postgresql://…`, and the JDBC form
//!   `jdbc:postgresql://host:5432/db?user=…&password=…` (rewritten to `postgres://`);
//! - SQL Server (cargo feature `sqlserver`): `sqlserver://user:pass@host:1433/db`, `mssql://…`,
//!   `jdbc:sqlserver://host:1433;databaseName=…`, or ADO.NET `Server=tcp:host,1433;Database=…;…`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::migrate::MigrationReport;
use crate::store::relay::RelayStore;
use crate::store::{Backend, Store};

/// What an error about an unknown URL lists as accepted.
pub const ACCEPTED_FORMS: &str = "postgres://user:pass@host:5432/db, postgresql://…, jdbc:postgresql://host:5432/db?user=…&password=…, \
     sqlserver://user:pass@host:1433/db, mssql://…, jdbc:sqlserver://host:1433;databaseName=…, or ADO.NET Server=tcp:host,1433;Database=…;User Id=…;Password=…";

/// Where the database is and how big its pool may grow: the plain values of the relay's
/// `database` block (`url`, `poolSize`, `connectionTimeoutMs`), or a worker's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseSettings {
    pub url: String,
    /// At most this many pooled connections (at least 2).
    pub pool_size: u32,
    /// How long a statement waits for a pooled connection (opening one included) before it
    /// fails as unavailable (the relay's ingest answers 503), on either backend.
    pub connection_timeout: Duration,
}

impl DatabaseSettings {
    /// `url` with a pool of 10 and a 10 s connection timeout.
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseSettings {
            url: url.into(),
            pool_size: 10,
            connection_timeout: Duration::from_secs(10),
        }
    }

    pub fn pool_size(mut self, n: u32) -> Self {
        self.pool_size = n;
        self
    }
}

/// A database URL, classified: which backend it names, in the form that backend's driver
/// reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A `postgres://` URL (a JDBC URL already rewritten).
    Postgres(String),
    /// Any SQL Server form, unchanged (`store::sqlserver::parse_connection_string` reads it).
    SqlServer(String),
}

impl DatabaseUrl {
    /// Classifies `url`; a form no backend reads fails with [`Error::Connect`] listing
    /// [`ACCEPTED_FORMS`] (password masked), as a PostgreSQL URL that does not parse always
    /// has. (The relay's configuration check refuses such a URL before it ever connects.)
    pub fn parse(url: &str) -> Result<DatabaseUrl> {
        let trimmed = url.trim();
        let lower = trimmed.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(trimmed.to_string()));
        }
        if lower.starts_with("jdbc:postgresql:") {
            return jdbc_postgres(trimmed).map(DatabaseUrl::Postgres);
        }
        if sqlserver_form(trimmed).is_some() {
            return Ok(DatabaseUrl::SqlServer(trimmed.to_string()));
        }
        Err(Error::Connect {
            url: redact(url),
            reason: format!("not a database URL QueueBox reads; use one of: {ACCEPTED_FORMS}"),
        })
    }

    pub fn backend(&self) -> Backend {
        match self {
            DatabaseUrl::Postgres(_) => Backend::Postgres,
            DatabaseUrl::SqlServer(_) => Backend::SqlServer,
        }
    }
}

/// The three spellings of a SQL Server connection string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlServerForm {
    /// `sqlserver://` or `mssql://`.
    Url,
    /// `jdbc:sqlserver://host:port;key=value;…`.
    Jdbc,
    /// ADO.NET `Server=…;Database=…;…`.
    Ado,
}

/// Which SQL Server form `url` is written in, if any. The one recogniser of SQL Server URLs:
/// the factory and the SQL Server parser both ask it.
pub(crate) fn sqlserver_form(url: &str) -> Option<SqlServerForm> {
    let lower = url.trim().to_ascii_lowercase();
    if lower.starts_with("sqlserver://") || lower.starts_with("mssql://") {
        return Some(SqlServerForm::Url);
    }
    if lower.starts_with("jdbc:sqlserver://") {
        return Some(SqlServerForm::Jdbc);
    }
    let ado = !lower.contains("://")
        && lower.split(';').any(|pair| {
            let key = pair.split('=').next().unwrap_or("").trim();
            matches!(
                key,
                "server" | "data source" | "address" | "addr" | "network address"
            )
        });
    ado.then_some(SqlServerForm::Ado)
}

/// `jdbc:postgresql://host:5432/db?user=u&password=p&sslmode=…` →
/// `postgres://u:p@host:5432/db?sslmode=…`. A JDBC URL without a host
/// (`jdbc:postgresql:db`) is refused with the equivalent `postgres://` spelled out.
fn jdbc_postgres(jdbc: &str) -> Result<String> {
    let rest = &jdbc["jdbc:postgresql:".len()..];
    let refuse = |why: &str| Error::Connect {
        url: redact(jdbc),
        reason: format!("{why}; write it as postgres://user:password@host:5432/database"),
    };
    let Some(after) = rest.strip_prefix("//") else {
        return Err(refuse("a JDBC URL without //host is not supported"));
    };
    let mut u = url::Url::parse(&format!("postgres://{after}"))
        .map_err(|e| refuse(&format!("not a JDBC PostgreSQL URL ({e})")))?;
    if !matches!(u.host_str(), Some(h) if !h.is_empty()) {
        return Err(refuse("the JDBC URL names no host"));
    }
    let mut kept = Vec::new();
    let (mut user, mut password) = (None, None);
    for (k, v) in u.query_pairs() {
        match k.as_ref() {
            "user" => user = Some(v.into_owned()),
            "password" => password = Some(v.into_owned()),
            _ => kept.push((k.into_owned(), v.into_owned())),
        }
    }
    if let Some(user) = user {
        u.set_username(&user)
            .map_err(|_| refuse("the user cannot be written into the URL"))?;
    }
    if let Some(pw) = password {
        u.set_password(Some(&pw))
            .map_err(|_| refuse("the password cannot be written into the URL"))?;
    }
    if kept.is_empty() {
        u.set_query(None);
    } else {
        u.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(u.to_string())
}

fn redact(url: &str) -> String {
    crate::headers::redact_error(url, &[])
}

/// Open and idle pooled connections (the relay's `queuebox_db_pool_connections` gauge).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolGauges {
    /// Checked out by a statement or transaction now.
    pub active: u64,
    /// Open and waiting in the pool.
    pub idle: u64,
}

/// One connected database: everything the relay, a worker and `queuebox migrate` need from
/// it, whatever the backend. Made by [`connect`].
#[async_trait]
pub trait Database: Send + Sync + 'static {
    fn backend(&self) -> Backend;
    /// The pull store (inbox inserts, the pull lease protocol, handler transactions).
    fn store(&self) -> Arc<dyn Store>;
    /// The relay store (push and outbox claims, retention, gauges, admin).
    fn relay_store(&self) -> Arc<dyn RelayStore>;
    /// Applies every pending migration of this backend; safe from several processes at once.
    async fn migrate(&self) -> Result<MigrationReport>;
    /// The highest applied migration version, 0 before the first.
    async fn schema_version(&self) -> Result<i32>;
    /// The latest migration version this build knows (readiness compares the two).
    fn latest_version(&self) -> i32;
    /// Fails with [`Error::SchemaMissing`] unless the QueueBox tables exist.
    async fn check_schema(&self) -> Result<()>;
    fn pool_gauges(&self) -> PoolGauges;
    /// Closes the pool (the relay's last shutdown step).
    async fn close(&self);
}

/// Connects the backend `settings.url` names. A SQL Server URL in a build without the
/// `sqlserver` feature fails with an [`Error::Config`] at `database.url` naming the feature
/// (not transient: retrying cannot help, rebuilding can); an unreachable
/// server is [`Error::Connect`] naming the server (password masked).
pub async fn connect(settings: &DatabaseSettings) -> Result<Arc<dyn Database>> {
    match DatabaseUrl::parse(&settings.url)? {
        DatabaseUrl::Postgres(url) => postgres::connect(&url, settings).await,
        DatabaseUrl::SqlServer(url) => sqlserver::connect(&url, settings).await,
    }
}

#[cfg(any(not(feature = "postgres"), not(feature = "sqlserver")))]
fn not_built(url: &str, feature: &str) -> Error {
    Error::Config {
        path: "database.url".into(),
        reason: format!(
            "`{}` needs the {feature} backend, which this build lacks; build it with the cargo feature `{feature}` (e.g. `cargo build -p queuebox --features {feature}`)",
            redact(url)
        ),
    }
}

#[cfg(feature = "postgres")]
pub mod postgres {
    //! The PostgreSQL arm: [`PgStore`] behind [`Database`].
    use super::*;
    use crate::store::postgres::{PgStore, PoolSettings};

    pub(super) async fn connect(
        url: &str,
        settings: &DatabaseSettings,
    ) -> Result<Arc<dyn Database>> {
        let pool = PoolSettings {
            max_connections: settings.pool_size,
            acquire_timeout: settings.connection_timeout,
        };
        Ok(Arc::new(PostgresDatabase::new(
            PgStore::connect_with(url, &pool).await?,
        )))
    }

    /// A [`Database`] on a [`PgStore`].
    #[derive(Clone, Debug)]
    pub struct PostgresDatabase {
        store: Arc<PgStore>,
    }

    impl PostgresDatabase {
        pub fn new(store: PgStore) -> Self {
            PostgresDatabase {
                store: Arc::new(store),
            }
        }

        pub fn pg_store(&self) -> &Arc<PgStore> {
            &self.store
        }
    }

    #[async_trait]
    impl Database for PostgresDatabase {
        fn backend(&self) -> Backend {
            Backend::Postgres
        }
        fn store(&self) -> Arc<dyn Store> {
            self.store.clone()
        }
        fn relay_store(&self) -> Arc<dyn RelayStore> {
            self.store.clone()
        }
        async fn migrate(&self) -> Result<MigrationReport> {
            crate::migrate::postgres::run(&self.store).await
        }
        async fn schema_version(&self) -> Result<i32> {
            crate::migrate::postgres::current_version(&self.store).await
        }
        fn latest_version(&self) -> i32 {
            crate::migrate::latest_version(crate::migrate::POSTGRES)
        }
        async fn check_schema(&self) -> Result<()> {
            self.store.check_schema().await
        }
        fn pool_gauges(&self) -> PoolGauges {
            let pool = self.store.pool();
            let idle = pool.num_idle() as u64;
            PoolGauges {
                active: (pool.size() as u64).saturating_sub(idle),
                idle,
            }
        }
        async fn close(&self) {
            self.store.pool().close().await;
        }
    }
}

#[cfg(not(feature = "postgres"))]
mod postgres {
    use super::*;
    pub(super) async fn connect(
        url: &str,
        _settings: &DatabaseSettings,
    ) -> Result<Arc<dyn Database>> {
        Err(not_built(url, "postgres"))
    }
}

#[cfg(feature = "sqlserver")]
pub mod sqlserver {
    //! The SQL Server arm: [`SqlServerStore`] behind [`Database`].
    use super::*;
    use crate::store::sqlserver::SqlServerStore;

    pub(super) async fn connect(
        url: &str,
        settings: &DatabaseSettings,
    ) -> Result<Arc<dyn Database>> {
        Ok(Arc::new(SqlServerDatabase::new(
            SqlServerStore::connect_with(url, settings.pool_size, settings.connection_timeout)
                .await?,
        )))
    }

    /// A [`Database`] on a [`SqlServerStore`].
    #[derive(Clone, Debug)]
    pub struct SqlServerDatabase {
        store: Arc<SqlServerStore>,
    }

    impl SqlServerDatabase {
        pub fn new(store: SqlServerStore) -> Self {
            SqlServerDatabase {
                store: Arc::new(store),
            }
        }
    }

    #[async_trait]
    impl Database for SqlServerDatabase {
        fn backend(&self) -> Backend {
            Backend::SqlServer
        }
        fn store(&self) -> Arc<dyn Store> {
            self.store.clone()
        }
        fn relay_store(&self) -> Arc<dyn RelayStore> {
            self.store.clone()
        }
        async fn migrate(&self) -> Result<MigrationReport> {
            crate::migrate::sqlserver::run(&self.store).await
        }
        async fn schema_version(&self) -> Result<i32> {
            crate::migrate::sqlserver::current_version(&self.store).await
        }
        fn latest_version(&self) -> i32 {
            crate::migrate::latest_version(crate::migrate::SQLSERVER)
        }
        async fn check_schema(&self) -> Result<()> {
            self.store.check_schema().await
        }
        fn pool_gauges(&self) -> PoolGauges {
            let (active, idle) = self.store.pool().gauges();
            PoolGauges {
                active: active as u64,
                idle: idle as u64,
            }
        }
        async fn close(&self) {
            // Idle connections close when the last handle to the pool drops.
        }
    }
}

#[cfg(not(feature = "sqlserver"))]
mod sqlserver {
    use super::*;
    pub(super) async fn connect(
        url: &str,
        _settings: &DatabaseSettings,
    ) -> Result<Arc<dyn Database>> {
        Err(not_built(url, "sqlserver"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(url: &str) -> String {
        match DatabaseUrl::parse(url).unwrap() {
            DatabaseUrl::Postgres(u) => u,
            other => panic!("{url} → {other:?}"),
        }
    }

    #[test]
    fn postgres_urls_are_read_as_they_are() {
        assert_eq!(
            pg("postgres://qb:pw@db:5432/app"),
            "postgres://qb:pw@db:5432/app"
        );
        assert_eq!(
            pg(" postgresql://db/app?sslmode=require "),
            "postgresql://db/app?sslmode=require"
        );
        assert_eq!(
            DatabaseUrl::parse("POSTGRES://db/app").unwrap().backend(),
            Backend::Postgres
        );
    }

    #[test]
    fn jdbc_postgres_urls_become_postgres_urls() {
        assert_eq!(
            pg("jdbc:postgresql://db.example:5432/app?user=qb&password=p%40ss"),
            "postgres://qb:p%40ss@db.example:5432/app"
        );
        assert_eq!(
            pg("jdbc:postgresql://db:5432/app?user=qb&sslmode=require"),
            "postgres://qb@db:5432/app?sslmode=require"
        );
        assert_eq!(pg("jdbc:postgresql://db/app"), "postgres://db/app");
        let e = DatabaseUrl::parse("jdbc:postgresql:app?password=hunter22")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("postgres://user:password@host:5432/database") && !e.contains("hunter22"),
            "{e}"
        );
    }

    #[test]
    fn every_sqlserver_form_is_read_as_sqlserver() {
        for url in [
            "sqlserver://sa:pw@localhost:1433/app",
            "MSSQL://localhost",
            "jdbc:sqlserver://localhost:1433;databaseName=app;user=sa;password=pw",
            "Server=tcp:localhost,1433;Database=app;User Id=sa;Password=pw",
            "Data Source=localhost;Initial Catalog=app",
        ] {
            assert_eq!(
                DatabaseUrl::parse(url).unwrap(),
                DatabaseUrl::SqlServer(url.to_string()),
                "{url}"
            );
        }
        assert_eq!(
            sqlserver_form("jdbc:sqlserver://h;databaseName=a"),
            Some(SqlServerForm::Jdbc)
        );
        assert_eq!(
            sqlserver_form("Server=h;Database=a"),
            Some(SqlServerForm::Ado)
        );
        assert_eq!(sqlserver_form("postgres://h/a"), None);
    }

    #[test]
    fn an_unknown_url_fails_naming_the_accepted_forms() {
        for url in [
            "mysql://root:hunter22@db/app",
            "host=localhost dbname=app",
            "",
            "garbage",
        ] {
            let e = DatabaseUrl::parse(url).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Connect { .. }), "{text}");
            assert!(
                text.contains("postgres://")
                    && text.contains("jdbc:postgresql://")
                    && text.contains("sqlserver://")
                    && text.contains("ADO.NET"),
                "{text}"
            );
            assert!(!text.contains("hunter22"), "{text}");
        }
    }

    #[cfg(not(feature = "sqlserver"))]
    #[tokio::test]
    async fn a_sqlserver_url_without_the_feature_names_the_feature() {
        let e = connect(&DatabaseSettings::new("sqlserver://sa:pw@127.0.0.1:1/app"))
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`sqlserver`"), "{e}");
    }

    #[cfg(feature = "sqlserver")]
    #[tokio::test]
    async fn a_sqlserver_url_reaches_the_sqlserver_store() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = connect(&DatabaseSettings::new(format!(
            "sqlserver://sa:hunter22@127.0.0.1:{port}/app"
        )))
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains(&format!("127.0.0.1:{port}"))
                && !e.contains("hunter22")
                && !e.contains("PostgreSQL"),
            "{e}"
        );
    }
}
