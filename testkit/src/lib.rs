//! QueueBox's test kit, shared by every crate's tests and benchmarks:
//!
//! | item | what |
//! |---|---|
//! | [`database_url`] | the test server's URL (`QUEUEBOX_TEST_DATABASE_URL`, set by `scripts/postgres.sh`) |
//! | [`server_url`] | the same without its database name, to name another database on the server |
//! | [`fresh_database`] | a new, empty database of the test's own, named `qb_<prefix>_<random>` |
//! | [`drop_database`] | drops the database a URL names (a benchmark's, between rounds) |
//! | [`wait_until`] | polls a condition until it holds, or fails the test naming what never happened |
//!
//! Migrations are the caller's (`queuebox_core::migrate`): this crate does not link the core,
//! whose own tests use it. `scripts/postgres.sh clean` drops every `qb_*` database, and
//! `scripts/test.sh` calls it after each part.

#![forbid(unsafe_code)]

use std::future::Future;
use std::time::{Duration, Instant};

/// The test server's URL, with its database (`QUEUEBOX_TEST_DATABASE_URL`).
///
/// # Panics
/// When the variable is not set, saying how to set it.
pub fn database_url() -> String {
    std::env::var("QUEUEBOX_TEST_DATABASE_URL").expect(
        "QUEUEBOX_TEST_DATABASE_URL is not set: run `source scripts/postgres.sh start` or `bash scripts/test.sh`",
    )
}

/// [`database_url`] without the database name: `postgres://user@host:port`.
pub fn server_url() -> String {
    let url = database_url();
    let (server, _) = url
        .rsplit_once('/')
        .expect("QUEUEBOX_TEST_DATABASE_URL names a database");
    server.to_string()
}

/// Creates a new, empty database on the test server and returns its URL. Its name is
/// `qb_<prefix>_<16 hex digits>`, unique to the call, so tests never share rows; `prefix`
/// must be a valid unquoted PostgreSQL identifier part (letters, digits, `_`).
pub async fn fresh_database(prefix: &str) -> String {
    let name = format!(
        "qb_{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    );
    // PostgreSQL would cut a longer name to 63 bytes and create a database the URL misses.
    assert!(
        name.len() <= 63,
        "database name {name} is longer than PostgreSQL's 63: shorten the prefix"
    );
    on_server(&format!("CREATE DATABASE {name}")).await;
    format!("{}/{name}", server_url())
}

/// Drops the database that `url` names, closing its connections (`WITH (FORCE)`); one that
/// is gone already is fine.
pub async fn drop_database(url: &str) {
    let (_, name) = url.rsplit_once('/').expect("the URL names a database");
    on_server(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
}

/// Runs one statement on the test server's own database, outside any transaction (where
/// `CREATE DATABASE` and `DROP DATABASE` must run); a failure fails the test, naming it.
async fn on_server(statement: &str) {
    let admin = sqlx::PgPool::connect(&database_url())
        .await
        .expect("connect to the test server");
    sqlx::query(statement)
        .execute(&admin)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
    admin.close().await;
}

/// Polls `f` every 50 ms until it returns true.
///
/// # Panics
/// After `timeout`, naming `what`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !f().await {
        assert!(
            start.elapsed() <= timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
