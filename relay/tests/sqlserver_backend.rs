//! The relay reaches SQL Server through the core backend factory: with a SQL Server URL and
//! no server listening, `queuebox migrate` and `queuebox run` fail with the SQL Server
//! store's connection error naming the server (password masked), not a PostgreSQL parse
//! error. No SQL Server can run on the test machines; the SQL Server behaviours themselves
//! are the store contract suite's (`core/tests/store_contract.rs`, `QUEUEBOX_TEST_MSSQL_URL`).

mod common;

use std::time::Duration;

use common::{free_port, relay_command, write_config};

fn refused_sqlserver_url() -> (String, String) {
    let port = free_port();
    (
        format!("sqlserver://sa:hunter22@127.0.0.1:{port}/app?trust_server_certificate=true"),
        format!("127.0.0.1:{port}"),
    )
}

fn assert_sqlserver_connect_error(stderr: &str, server: &str) {
    assert!(
        stderr.contains("cannot connect to the database") && stderr.contains(server),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter22"),
        "the password is masked: {stderr}"
    );
    assert!(
        !stderr.contains("PostgreSQL") && !stderr.contains("postgres"),
        "not the PostgreSQL store: {stderr}"
    );
}

#[tokio::test]
async fn migrate_with_a_sqlserver_url_and_no_server_names_the_server() {
    let (url, server) = refused_sqlserver_url();
    let cfg = write_config("");
    let out = relay_command(cfg.path(), &["migrate", "--database-url", &url])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_sqlserver_connect_error(&stderr, &server);
}

#[tokio::test]
async fn run_with_database_type_sqlserver_and_no_server_names_the_server() {
    let (url, server) = refused_sqlserver_url();
    let cfg = write_config(&format!(
        "server:\n  httpPort: {}\n  bindAddress: 127.0.0.1\ndatabase:\n  type: sqlserver\n  url: \"{url}\"\n  startupTimeoutMs: 500\n",
        free_port()
    ));
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        relay_command(cfg.path(), &["run"]).output(),
    )
    .await
    .expect("the relay gives up")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("database.startupTimeoutMs"), "{stderr}");
    assert_sqlserver_connect_error(&stderr, &server);
}

#[tokio::test]
async fn a_database_url_no_backend_reads_is_refused_naming_the_accepted_forms() {
    let cfg = write_config("");
    let out = relay_command(
        cfg.path(),
        &[
            "migrate",
            "--database-url",
            "mysql://root:hunter22@127.0.0.1/app",
        ],
    )
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not a database URL")
            && stderr.contains("jdbc:postgresql://")
            && stderr.contains("sqlserver://"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter22"), "{stderr}");
}
