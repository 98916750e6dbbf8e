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
use crate::store::names::Names;
use crate::store::relay::RelayStore;
use crate::store::sqlserver_form::sqlserver_form;
use crate::store::{Backend, Store};

pub use crate::store::PoolHealth;

/// What an error about an unknown URL lists as accepted.
pub const ACCEPTED_FORMS: &str = "postgres://user:pass@host:5432/db, postgresql://…, jdbc:postgresql://host:5432/db?user=…&password=…, \
     sqlserver://user:pass@host:1433/db, mssql://…, jdbc:sqlserver://host:1433;databaseName=…, or ADO.NET Server=tcp:host,1433;Database=…;User Id=…;Password=…";

/// Where the database is and how big its pool may grow: the plain values of the relay's
/// `database` block (`url`, `username`, `password`, `poolSize`, `connectionTimeoutMs`), or a
/// worker's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseSettings {
    pub url: String,
    /// A login given apart from the URL; each part set here wins over the URL's own.
    pub credentials: Credentials,
    /// At most this many pooled connections (at least 2).
    pub pool_size: u32,
    /// How long a statement waits for a pooled connection (opening one included) before it
    /// fails as unavailable (the relay's ingest answers 503), on either backend.
    pub connection_timeout: Duration,
    /// The table and column names (`database.outboxTableName`, …); PostgreSQL only.
    pub names: Names,
}

impl DatabaseSettings {
    /// `url` with a pool of 10 and a 10 s connection timeout.
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseSettings {
            url: url.into(),
            credentials: Credentials::default(),
            pool_size: 10,
            connection_timeout: Duration::from_secs(10),
            names: Names::default(),
        }
    }

    pub fn pool_size(mut self, n: u32) -> Self {
        self.pool_size = n;
        self
    }

    /// The relay's `database.username` / `database.password`.
    pub fn credentials(mut self, username: Option<String>, password: Option<String>) -> Self {
        self.credentials = Credentials { username, password };
        self
    }
}

/// A user name and password given apart from the database URL (the relay's
/// `database.username` / `database.password`, often a `file:` secret). They are handed to
/// the driver as values, never spliced into connection-string text, so no character of a
/// password needs escaping in any URL form, and the password is in no URL an error names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl Credentials {
    pub fn is_empty(&self) -> bool {
        self.username.is_none() && self.password.is_none()
    }
}

impl std::fmt::Debug for Credentials {
    /// The password as `***`: settings are logged and printed in test failures.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
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
    /// `queuebox migrate --baseline <version>`: records `version` and every one before it as
    /// applied without running them, then applies the later ones; refused, changing nothing,
    /// when the database has a migration history already.
    async fn migrate_from_baseline(&self, version: i32) -> Result<MigrationReport>;
    /// The highest applied migration version, 0 before the first.
    async fn schema_version(&self) -> Result<i32>;
    /// The latest migration version this build knows (readiness compares the two).
    fn latest_version(&self) -> i32;
    /// Fails with [`Error::SchemaMissing`] unless the QueueBox tables exist.
    async fn check_schema(&self) -> Result<()>;
    fn pool_gauges(&self) -> PoolGauges;
    /// What the pool cannot get and why; all well unless the backend watches its pool.
    fn pool_health(&self) -> PoolHealth {
        PoolHealth::default()
    }
    /// Runs SQL text outside any transaction, without parameters, as one batch (several
    /// statements allowed): `CREATE DATABASE`, set-up scripts of the bindings' pool. Returns
    /// the rows affected.
    async fn execute_script(&self, sql: &str) -> Result<u64>;
    /// Closes the pool (the relay's last shutdown step).
    async fn close(&self);
}

/// Connects the backend `settings.url` names. A SQL Server URL in a build without the
/// `sqlserver` feature fails with an [`Error::Config`] at `database.url` naming the feature
/// (not transient: retrying cannot help, rebuilding can); an unreachable
/// server is [`Error::Connect`] naming the server (password masked).
///
/// [`DatabaseSettings::credentials`] win over the login the URL names: on PostgreSQL they are
/// set on the parsed URL (percent-encoded by the URL parser), on SQL Server on the driver's
/// configuration after the connection string is read, so JDBC and ADO.NET strings need no
/// escaping of the password.
pub async fn connect(settings: &DatabaseSettings) -> Result<Arc<dyn Database>> {
    match DatabaseUrl::parse(&settings.url)? {
        DatabaseUrl::Postgres(url) => postgres::connect(&url, settings).await,
        DatabaseUrl::SqlServer(url) => sqlserver::connect(&url, settings).await,
    }
}

/// Migrations create QueueBox's own tables; a schema with custom names belongs to the
/// application (proto-docs/own-schema.md: renamed names with migrations are refused, naming each key).
pub fn refuse_custom_names(names: &Names) -> Result<()> {
    let keys = names.renamed_keys();
    match keys.first() {
        None => Ok(()),
        Some(first) => Err(Error::Config {
            path: first.clone(),
            reason: format!(
                "QueueBox does not migrate a schema with custom names ({}): set database.migrate: false and create the tables yourself (proto-docs/own-schema.md)",
                keys.join(", ")
            ),
        }),
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
        let url = with_credentials(url, &settings.credentials)?;
        let store = PgStore::connect_with(&url, &pool).await?;
        Ok(Arc::new(PostgresDatabase::new(
            store.renamed(settings.names.clone()),
        )))
    }

    /// `url` (a `postgres://` URL, JDBC already rewritten) with the credentials set on it.
    pub(super) fn with_credentials(url: &str, c: &Credentials) -> Result<String> {
        if c.is_empty() {
            return Ok(url.to_string());
        }
        let refuse = |why: &str| Error::Connect {
            url: redact(url),
            reason: format!("database.username / database.password: {why}"),
        };
        let mut u = url::Url::parse(url).map_err(|e| refuse(&format!("not a URL ({e})")))?;
        if let Some(user) = &c.username {
            u.set_username(user)
                .map_err(|_| refuse("the URL cannot carry a user name"))?;
        }
        if let Some(pw) = &c.password {
            u.set_password(Some(pw))
                .map_err(|_| refuse("the URL cannot carry a password"))?;
        }
        Ok(u.to_string())
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
            refuse_custom_names(self.store.names())?;
            crate::migrate::postgres::run(&self.store).await
        }
        async fn migrate_from_baseline(&self, version: i32) -> Result<MigrationReport> {
            refuse_custom_names(self.store.names())?;
            crate::migrate::postgres::run_with_baseline(&self.store, Some(version)).await
        }
        async fn schema_version(&self) -> Result<i32> {
            if !self.store.names().is_default() {
                // The application owns a schema with custom names and QueueBox keeps no
                // migration history in it: it is current when the schema guards pass.
                self.store.check_schema().await?;
                return Ok(self.latest_version());
            }
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
        fn pool_health(&self) -> PoolHealth {
            self.store.pool_health()
        }
        async fn execute_script(&self, sql: &str) -> Result<u64> {
            // The simple query protocol: several statements, no implicit transaction.
            let r = sqlx::raw_sql(sql).execute(self.store.pool()).await;
            r.map(|d| d.rows_affected()).map_err(|e| Error::Database {
                operation: "script",
                message: e.to_string(),
                code: None,
            })
        }
        async fn close(&self) {
            self.store.close().await;
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
    use crate::store::sqlserver::{parse_connection_string, SqlServerStore};

    pub(super) async fn connect(
        url: &str,
        settings: &DatabaseSettings,
    ) -> Result<Arc<dyn Database>> {
        if let Some(key) = settings.names.renamed_keys().first() {
            return Err(Error::Config {
                path: key.clone(),
                reason: "custom table and column names are implemented for PostgreSQL only; on SQL Server QueueBox uses its own migrated `outbox` and `inbox` tables".into(),
            });
        }
        let config = config_with_credentials(url, &settings.credentials)?;
        Ok(Arc::new(SqlServerDatabase::new(
            SqlServerStore::connect_with_config_timeout(
                config,
                settings.pool_size,
                &crate::store::sqlserver::redact_url(url),
                settings.connection_timeout,
            )
            .await?,
        )))
    }

    /// The driver configuration of `url` (any SQL Server form), with the credentials as its
    /// SQL Server login: the user name or password not given keeps the URL's own.
    pub fn config_with_credentials(url: &str, c: &Credentials) -> Result<tiberius::Config> {
        let mut config = parse_connection_string(url)?;
        if let Some((user, password)) = login(url, c)? {
            config.authentication(tiberius::AuthMethod::sql_server(user, password));
        }
        Ok(config)
    }

    /// The SQL Server login `c` asks for (`None`: keep the URL's), each missing part taken
    /// from the URL.
    pub(crate) fn login(url: &str, c: &Credentials) -> Result<Option<(String, String)>> {
        if c.is_empty() {
            return Ok(None);
        }
        let (url_user, url_password) = crate::store::sqlserver::url_login(url)?;
        Ok(Some((
            c.username.clone().or(url_user).unwrap_or_default(),
            c.password.clone().or(url_password).unwrap_or_default(),
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
        async fn migrate_from_baseline(&self, version: i32) -> Result<MigrationReport> {
            crate::migrate::sqlserver::run_with_baseline(&self.store, Some(version)).await
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
        async fn execute_script(&self, sql: &str) -> Result<u64> {
            // One batch on a pooled connection, outside any transaction (CREATE DATABASE
            // refuses to run inside one).
            let mut conn = self.store.pool().get().await?;
            let r = conn.client().execute(sql, &[]).await;
            let r = r.map_err(|e| crate::store::sqlserver::db_err("script", e))?;
            conn.release();
            Ok(r.total())
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

    #[test]
    fn settings_print_no_password() {
        let s = DatabaseSettings::new("postgres://db/app")
            .credentials(Some("qb".into()), Some("hunter22".into()));
        let shown = format!("{s:?}");
        assert!(shown.contains("qb") && shown.contains("***"), "{shown}");
        assert!(!shown.contains("hunter22"), "{shown}");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn credentials_are_set_on_a_postgres_url_and_win_over_its_own() {
        let c = |u: Option<&str>, p: Option<&str>| Credentials {
            username: u.map(Into::into),
            password: p.map(Into::into),
        };
        let with = postgres::with_credentials;
        assert_eq!(
            with("postgres://db:5432/app", &c(None, None)).unwrap(),
            "postgres://db:5432/app"
        );
        assert_eq!(
            with("postgres://qb@db/app", &c(None, Some("p@ss;w/rd"))).unwrap(),
            "postgres://qb:p%40ss%3Bw%2Frd@db/app"
        );
        assert_eq!(
            with("postgres://old:old@db/app", &c(Some("qb"), Some("new"))).unwrap(),
            "postgres://qb:new@db/app"
        );
        // A JDBC URL is rewritten first, so its login is replaced too (it was dropped before).
        let DatabaseUrl::Postgres(jdbc) =
            DatabaseUrl::parse("jdbc:postgresql://db/app?user=old&password=old").unwrap()
        else {
            panic!("postgres")
        };
        assert_eq!(
            with(&jdbc, &c(None, Some("new"))).unwrap(),
            "postgres://old:new@db/app"
        );
    }

    /// `database.username` / `database.password` on JDBC and ADO.NET strings: taken as values,
    /// each missing part from the string, whatever characters the password holds.
    #[cfg(feature = "sqlserver")]
    #[test]
    fn credentials_become_the_sqlserver_login_of_every_url_form() {
        let c = |u: Option<&str>, p: Option<&str>| Credentials {
            username: u.map(Into::into),
            password: p.map(Into::into),
        };
        let login = |url: &str, cr: &Credentials| sqlserver::login(url, cr).unwrap();
        let odd = "p@ss;w{o}rd='x\"ü";
        for url in [
            "jdbc:sqlserver://db:1433;databaseName=app;user=qb",
            "Server=tcp:db,1433;Database=app;User Id=qb",
            "sqlserver://qb@db:1433/app",
        ] {
            assert_eq!(
                login(url, &c(None, Some(odd))),
                Some(("qb".to_string(), odd.to_string())),
                "{url}"
            );
            assert_eq!(login(url, &c(None, None)), None, "{url}");
            // The configuration builds; the password is passed verbatim, not parsed.
            sqlserver::config_with_credentials(url, &c(None, Some(odd))).unwrap();
        }
        for url in [
            "jdbc:sqlserver://db;databaseName=app;userName=old;password={old;pw}",
            "Data Source=db;Initial Catalog=app;UID=old;PWD='old;pw'",
            "mssql://old:old%3Bpw@db/app",
        ] {
            assert_eq!(
                login(url, &c(Some("qb"), None)),
                Some(("qb".to_string(), "old;pw".to_string())),
                "{url}"
            );
            assert_eq!(
                login(url, &c(Some("qb"), Some("new"))),
                Some(("qb".to_string(), "new".to_string())),
                "{url}"
            );
        }
    }

    /// A refused connection made with a password given apart names the server, never the
    /// password (nor the URL's own).
    #[cfg(feature = "sqlserver")]
    #[tokio::test]
    async fn a_refused_sqlserver_connection_with_credentials_names_no_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for url in [
            format!("jdbc:sqlserver://127.0.0.1:{port};databaseName=app;user=sa;password=urlpw99"),
            format!("Server=tcp:127.0.0.1,{port};Database=app;User Id=sa;Password=urlpw99"),
        ] {
            let settings = DatabaseSettings::new(url.clone())
                .credentials(Some("qb".into()), Some("hunter22".into()));
            let e = connect(&settings).await.err().unwrap().to_string();
            assert!(e.contains(&format!("{port}")), "{e}");
            assert!(
                !e.contains("hunter22") && !e.contains("urlpw99"),
                "{url}: {e}"
            );
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
