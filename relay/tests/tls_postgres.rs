//! PostgreSQL over TLS, against a real TLS-only cluster of each test (scripts/postgres-tls.sh:
//! a throwaway CA, server and client certificates made with openssl, `ssl = on`, and a
//! pg_hba.conf of `hostssl … cert` / `hostssl … scram-sha-256 clientcert=verify-full` lines
//! only). The relay binary, `queuebox migrate` and a Rust pull worker connect from the libpq
//! URL parameters alone; PostgreSQL's own `pg_stat_ssl` shows their sessions encrypted; a
//! wrong CA, a host name the certificate does not name and a missing or untrusted client
//! certificate are clear start-up errors; nothing falls back to plain text.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use queuebox_core::store::postgres::PgStore;
use queuebox_core::{Error, NewInboxMessage, Outcome, Store, Worker, WorkerOptions};

/// A TLS-only cluster of one test; stopped and removed (certificates too) on drop.
struct TlsPg {
    port: u16,
    dir: String,
}

impl TlsPg {
    /// Starts one, or prints why it cannot and returns `None` (the test then says it did
    /// not run).
    async fn start(test: &str) -> Option<TlsPg> {
        if std::process::Command::new("openssl")
            .arg("version")
            .output()
            .is_err()
        {
            panic!("NOT RUN {test}: openssl is not installed, no certificates can be made (scripts/test.d/10-rust.sh installs it; apt-get install openssl)");
        }
        let port = free_port();
        let pg = TlsPg {
            port,
            dir: format!("/tmp/qb-tls-{port}"),
        };
        let (p, d) = (pg.port, pg.dir.clone());
        let out = tokio::task::spawn_blocking(move || script(p, &d, "start"))
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "postgres-tls.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(pg)
    }

    fn cert(&self, name: &str) -> String {
        format!("{}.certs/{name}", self.dir)
    }

    /// `postgres://{user}@{host}:{port}/queuebox?{params}`.
    fn url(&self, user: &str, host: &str, params: &str) -> String {
        format!("postgres://{user}@{host}:{}/queuebox?{params}", self.port)
    }

    /// The recommended URL: verify-full with the test CA and the `postgres` client certificate.
    fn verify_full(&self, host: &str) -> String {
        self.url(
            "postgres",
            host,
            &self.client_params("verify-full", "ca.crt", "client-postgres"),
        )
    }

    fn client_params(&self, mode: &str, ca: &str, client: &str) -> String {
        format!(
            "sslmode={mode}&sslrootcert={}&sslcert={}&sslkey={}",
            self.cert(ca),
            self.cert(&format!("{client}.crt")),
            self.cert(&format!("{client}.key"))
        )
    }

    /// Every client session on the server other than the asking one, from `pg_stat_ssl`:
    /// (user, ssl, version, client certificate DN).
    async fn sessions(&self) -> Vec<(String, bool, Option<String>, Option<String>)> {
        let admin = PgStore::connect(&self.verify_full("127.0.0.1"), 2)
            .await
            .expect("admin over TLS");
        let rows = sqlx::query_as(
            "SELECT a.usename::text, s.ssl, s.version, s.client_dn FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.backend_type = 'client backend' AND a.datname = 'queuebox' AND s.pid <> pg_backend_pid()",
        )
        .fetch_all(admin.pool())
        .await
        .unwrap();
        admin.close().await;
        rows
    }
}

fn script(port: u16, dir: &str, action: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/postgres-tls.sh"
        ))
        .arg(action)
        .env("QB_PG_TLS_PORT", port.to_string())
        .env("QB_PG_TLS_DIR", dir)
        .output()
        .unwrap()
}

impl Drop for TlsPg {
    fn drop(&mut self) {
        script(self.port, &self.dir, "stop");
    }
}

const SOURCES: &str = "sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
    consumption: pull
";

/// A relay configuration on `url` (quoted: the URL carries `&` and `?`).
fn relay_yaml(url: &str) -> String {
    let yaml =
        base_config("DBURL", "http://127.0.0.1:9").replace("url: DBURL", &format!("url: '{url}'"));
    format!("{yaml}{SOURCES}")
}

/// Runs `queuebox run` on `url`, expecting it to fail at start-up; returns its stderr and
/// how long it took.
async fn failed_start(url: &str) -> (String, Duration) {
    let config = write_config(&relay_yaml(url).replace("{port}", &free_port().to_string()));
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        relay_command(config.path(), &["run"]).output(),
    )
    .await
    .expect("the relay gave up within 30 s")
    .unwrap();
    assert!(!out.status.success(), "the relay must not start");
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

async fn connect_err(url: &str) -> Error {
    PgStore::connect(url, 2)
        .await
        .map(|_| ())
        .expect_err("the connection must be refused")
}

#[tokio::test]
async fn relay_and_migrate_with_a_verify_full_url_ingest_and_their_sessions_are_encrypted() {
    let Some(pg) = TlsPg::start(
        "relay_and_migrate_with_a_verify_full_url_ingest_and_their_sessions_are_encrypted",
    )
    .await
    else {
        return;
    };
    let url = pg.verify_full("127.0.0.1");

    // queuebox migrate, from the URL alone.
    let cfg = write_config("{}\n");
    let out = relay_command(cfg.path(), &["migrate", "--database-url", &url])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "migrate: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let relay = Relay::start(&relay_yaml(&url).replace("  migrate: true\n", "")).await;
    eventually("the relay is ready", 30, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;
    let (status, body) = relay.post("/inbox/orders", r#"{"id":"tls-1"}"#, &[]).await;
    assert_eq!(status, 202, "{body}");

    let store = PgStore::connect(&url, 2).await.unwrap();
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inbox WHERE idempotency_key = 'tls-1'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(stored, 1);
    store.close().await;

    let sessions = pg.sessions().await;
    eprintln!("pg_stat_ssl with the relay running (user, ssl, version, client_dn):");
    for s in &sessions {
        eprintln!("  {s:?}");
    }
    assert!(!sessions.is_empty(), "the relay holds sessions");
    for (user, ssl, version, dn) in &sessions {
        assert_eq!(user, "postgres");
        assert!(ssl, "every session of the relay is encrypted");
        assert!(
            version.as_deref().is_some_and(|v| v.starts_with("TLSv1.")),
            "{version:?}"
        );
        assert_eq!(
            dn.as_deref(),
            Some("/CN=postgres"),
            "the relay presented its client certificate"
        );
    }
}

#[tokio::test]
async fn a_wrong_ca_is_a_start_up_error_naming_the_database_and_the_cause() {
    let Some(pg) =
        TlsPg::start("a_wrong_ca_is_a_start_up_error_naming_the_database_and_the_cause").await
    else {
        return;
    };
    let url = pg.url(
        "postgres",
        "127.0.0.1",
        &pg.client_params("verify-full", "other-ca.crt", "client-postgres"),
    );
    let (stderr, took) = failed_start(&url).await;
    eprintln!("relay with the wrong CA, after {took:?}:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot set up TLS to the database at postgres://postgres@127.0.0.1:{}/queuebox",
            pg.port
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("not signed by a CA QueueBox trusts") && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
    // Not retried until database.startupTimeoutMs (60 s here): the same CA fails every time.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // libpq's rule: require with an sslrootcert checks the chain too.
    let e = connect_err(&pg.url(
        "postgres",
        "127.0.0.1",
        &pg.client_params("require", "other-ca.crt", "client-postgres"),
    ))
    .await;
    assert!(matches!(e, Error::Tls { .. }), "{e}");
}

#[tokio::test]
async fn a_host_name_the_certificate_does_not_name_is_refused_under_verify_full() {
    let Some(pg) =
        TlsPg::start("a_host_name_the_certificate_does_not_name_is_refused_under_verify_full")
            .await
    else {
        return;
    };
    // The server listens on 127.0.0.2 too, but its certificate names localhost and 127.0.0.1.
    let (stderr, _) = failed_start(&pg.verify_full("127.0.0.2")).await;
    eprintln!("relay on 127.0.0.2:\n{stderr}");
    assert!(stderr.contains("does not name `127.0.0.2`"), "{stderr}");
    // The names it does carry work.
    PgStore::connect(&pg.verify_full("localhost"), 2)
        .await
        .expect("localhost is in the certificate");
}

#[tokio::test]
async fn without_a_trusted_client_certificate_the_server_refuses_the_connection() {
    let Some(pg) =
        TlsPg::start("without_a_trusted_client_certificate_the_server_refuses_the_connection")
            .await
    else {
        return;
    };
    let no_client = pg.url(
        "postgres",
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", pg.cert("ca.crt")),
    );
    let (stderr, took) = failed_start(&no_client).await;
    eprintln!("relay without a client certificate, after {took:?}:\n{stderr}");
    assert!(
        stderr.contains("cannot set up TLS to the database")
            && stderr.contains("client certificate"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let e = connect_err(&pg.url(
        "postgres",
        "127.0.0.1",
        &pg.client_params("verify-full", "ca.crt", "client-other"),
    ))
    .await;
    eprintln!("client certificate of another CA: {e}");
    assert!(
        matches!(e, Error::Tls { .. }) && e.to_string().contains("refused the client certificate"),
        "{e}"
    );

    let e = connect_err(&pg.url("postgres", "127.0.0.1", &format!("sslmode=verify-full&sslrootcert={}&sslcert=/nonexistent/client.crt&sslkey=/nonexistent/client.key", pg.cert("ca.crt")))).await;
    assert!(
        e.to_string()
            .contains("sslcert file `/nonexistent/client.crt` cannot be read"),
        "{e}"
    );
}

#[tokio::test]
async fn sslmode_disable_is_refused_by_a_tls_only_server() {
    let Some(pg) = TlsPg::start("sslmode_disable_is_refused_by_a_tls_only_server").await else {
        return;
    };
    let e = connect_err(&pg.url(
        "postgres",
        "127.0.0.1",
        &format!(
            "sslmode=disable&sslcert={}&sslkey={}",
            pg.cert("client-postgres.crt"),
            pg.cert("client-postgres.key")
        ),
    ))
    .await;
    eprintln!("sslmode=disable: {e}");
    assert!(
        e.to_string().contains("no pg_hba.conf entry") && e.to_string().contains("no encryption"),
        "{e}"
    );
}

#[tokio::test]
async fn password_from_a_file_secret_pgpassword_and_pgpassfile_work_with_a_client_certificate() {
    let Some(pg) = TlsPg::start(
        "password_from_a_file_secret_pgpassword_and_pgpassfile_work_with_a_client_certificate",
    )
    .await
    else {
        return;
    };
    let url = pg.url(
        "app",
        "127.0.0.1",
        &pg.client_params("verify-full", "ca.crt", "client-app"),
    );

    // PGPASSWORD (read by sqlx) for `queuebox migrate`.
    let cfg = write_config("{}\n");
    let out = relay_command(cfg.path(), &["migrate", "--database-url", &url])
        .env("PGPASSWORD", "app-secret")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "migrate with PGPASSWORD: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A PGPASSFILE in .pgpass format (mode 0600, as libpq demands).
    let pgpass = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        pgpass.path(),
        format!("127.0.0.1:{}:queuebox:app:app-secret\n", pg.port),
    )
    .unwrap();
    let out = relay_command(cfg.path(), &["migrate", "--database-url", &url])
        .env("PGPASSFILE", pgpass.path())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "migrate with PGPASSFILE: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // database.password: file:/path in the relay's configuration.
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "app-secret\n").unwrap();
    let yaml = relay_yaml(&url).replace(
        "database:\n",
        &format!("database:\n  password: file:{}\n", secret.path().display()),
    );
    let relay = Relay::start(&yaml).await;
    eventually("the relay is ready", 30, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;
    assert_eq!(
        relay
            .post("/inbox/orders", r#"{"id":"by-app"}"#, &[])
            .await
            .0,
        202
    );
    let sessions = pg.sessions().await;
    let app: Vec<_> = sessions.iter().filter(|s| s.0 == "app").collect();
    assert!(
        !app.is_empty() && app.iter().all(|s| s.1 && s.3.as_deref() == Some("/CN=app")),
        "{sessions:?}"
    );

    // The same relay with a wrong password file: refused by the server, not by TLS.
    std::fs::write(secret.path(), "wrong\n").unwrap();
    let (stderr, _) =
        failed_start_with(&yaml.replace("startupTimeoutMs: 60000", "startupTimeoutMs: 1000")).await;
    assert!(
        stderr.contains("password authentication failed for user \"app\""),
        "{stderr}"
    );
}

async fn failed_start_with(yaml: &str) -> (String, Duration) {
    let config = write_config(&yaml.replace("{port}", &free_port().to_string()));
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        relay_command(config.path(), &["run"]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(!out.status.success());
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_pull_worker_connects_to_the_tls_only_server_with_the_url_alone() {
    let Some(pg) =
        TlsPg::start("a_pull_worker_connects_to_the_tls_only_server_with_the_url_alone").await
    else {
        return;
    };
    let url = pg.verify_full("localhost");
    let store = PgStore::connect(&url, 2).await.unwrap();
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    store
        .insert_inbox(&NewInboxMessage::new("jobs", "job-1", serde_json::json!({"n": 1})).pull())
        .await
        .unwrap();

    let worker = Worker::connect(
        &url,
        WorkerOptions {
            poll_interval: Duration::from_millis(50),
            ..WorkerOptions::new("jobs")
        },
    )
    .await
    .expect("the worker connects over TLS");
    let stop = Arc::new(tokio::sync::Notify::new());
    let (w, s) = (worker.clone(), stop.clone());
    let run = tokio::spawn(async move {
        w.run(|_task| async { Ok(Outcome::Complete) }, async move {
            s.notified().await
        })
        .await
    });
    eventually("the worker processes the row", 30, || async {
        sqlx::query_scalar::<_, String>(
            "SELECT state::text FROM inbox WHERE idempotency_key = 'job-1'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap()
            == "processed"
    })
    .await;
    let sessions = pg.sessions().await;
    eprintln!("pg_stat_ssl with the worker running: {sessions:?}");
    assert!(
        sessions.len() >= 2 && sessions.iter().all(|s| s.1),
        "{sessions:?}"
    );
    stop.notify_waiters();
    run.await.unwrap().unwrap();
}

/// A small measurement, printed for the README: the median time to open one connection with
/// TLS (verify-full, client-certificate authentication) on the TLS-only cluster, and without
/// TLS (trust authentication) on the shared test server of the same machine.
#[tokio::test]
async fn connection_set_up_time_with_and_without_tls() {
    let Some(pg) = TlsPg::start("connection_set_up_time_with_and_without_tls").await else {
        return;
    };
    async fn median(url: &str) -> Duration {
        let opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let mut times = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            let c = <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts)
                .await
                .unwrap();
            times.push(t.elapsed());
            sqlx::Connection::close(c).await.unwrap();
        }
        times.sort();
        times[times.len() / 2]
    }
    let tls = median(&pg.verify_full("127.0.0.1")).await;
    let plain = median(&format!("{}/postgres?sslmode=disable", server_url())).await;
    eprintln!("connection set-up, median of 30: TLS verify-full + client certificate {tls:?}, plain {plain:?}");
    assert!(tls < Duration::from_secs(2));
}
