//! Shared by the broker tests: broker URLs, a fresh migrated database per
//! test, and polling helpers. Real brokers come from `scripts/brokers.sh`, real PostgreSQL
//! from `scripts/postgres.sh`; `scripts/test.d/20-brokers.sh` sets everything up.
#![allow(dead_code)]

use std::sync::Arc;

use queuebox_core::migrate;
use queuebox_core::store::postgres::PgStore;
use sqlx::PgPool;

pub fn amqp_url() -> String {
    std::env::var("QUEUEBOX_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:55672/%2f".into())
}
pub fn nats_url() -> String {
    std::env::var("QUEUEBOX_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:54222".into())
}
pub fn kafka_brokers() -> String {
    std::env::var("QUEUEBOX_TEST_KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:59092".into())
}

/// A Kafka source on `topic` for consumer group `group`, defaults otherwise.
pub fn kafka_source_config(
    topic: &str,
    group: &str,
) -> queuebox_brokers::config::KafkaSourceConfig {
    queuebox_brokers::config::KafkaSourceConfig {
        bootstrap_servers: kafka_brokers(),
        topics: vec![topic.into()],
        group_id: group.into(),
        auto_offset_reset: Default::default(),
        max_poll_records: 100,
        security_protocol: None,
        sasl_mechanism: None,
        sasl_username: None,
        sasl_password: None,
        tls: None,
        event_type_from_header: false,
        attribute_headers: Default::default(),
    }
}

/// A name unique to this test run.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// A new, migrated database on the test server: (store, pool, url).
pub async fn fresh_db(prefix: &str) -> (Arc<PgStore>, PgPool, String) {
    let url = queuebox_testkit::fresh_database(prefix).await;
    let store = PgStore::connect(&url, 10).await.expect("connect");
    migrate::postgres::run(&store).await.expect("migrate");
    let pool = PgPool::connect(&url).await.expect("connect pool");
    (Arc::new(store), pool, url)
}

pub use queuebox_testkit::wait_until;

pub async fn inbox_count(pool: &PgPool, source: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = $1")
        .bind(source)
        .fetch_one(pool)
        .await
        .unwrap()
}

pub async fn key_count(pool: &PgPool, source: &str, key: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = $1 AND idempotency_key = $2")
        .bind(source)
        .bind(key)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// One inbox row as JSON (state, consumption, event_type, aggregate_id, headers, payload,
/// correlation_id, last_error).
pub async fn inbox_row(pool: &PgPool, source: &str, key: &str) -> Option<serde_json::Value> {
    sqlx::query_scalar(
        "SELECT json_build_object('state', state, 'consumption', consumption, 'event_type', event_type,
                'aggregate_id', aggregate_id, 'headers', headers, 'payload', payload,
                'correlation_id', correlation_id, 'last_error', last_error)
         FROM inbox WHERE source = $1 AND idempotency_key = $2",
    )
    .bind(source)
    .bind(key)
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// Makes every inbox insert whose idempotency key is `key` fail inside PostgreSQL, as a
/// database that refuses the write would (a real store failure, not a mock).
pub async fn fail_inserts_of(pool: &PgPool, key: &str) {
    sqlx::query(&format!(
        "CREATE OR REPLACE FUNCTION qb_test_fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.idempotency_key = '{key}' THEN RAISE EXCEPTION 'test: the store refuses %', NEW.idempotency_key; END IF; RETURN NEW; END $$"
    ))
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("CREATE TRIGGER qb_test_fail BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION qb_test_fail_insert()")
        .execute(pool)
        .await
        .unwrap();
}

pub async fn heal_inserts(pool: &PgPool) {
    sqlx::query("DROP TRIGGER IF EXISTS qb_test_fail ON inbox")
        .execute(pool)
        .await
        .unwrap();
}

/// Runs `bash scripts/brokers.sh <args>` from the repository root.
pub fn brokers_sh(args: &[&str]) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap(); // relay/brokers -> repository root
    let status = std::process::Command::new("bash")
        .arg(root.join("scripts/brokers.sh"))
        .args(args)
        .status()
        .expect("run brokers.sh");
    assert!(status.success(), "scripts/brokers.sh {args:?} failed");
}
