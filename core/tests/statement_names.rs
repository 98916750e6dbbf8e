//! Custom table and column names (proto-docs/own-schema.md, `store::names`): the default names render
//! exactly the statements of earlier releases, every statement rendered for a schema with
//! renamed tables and columns (reserved words, its own PostgreSQL schema) prepares on such a
//! schema, a pull row goes in, is claimed and completed there, and the schema guards name
//! what is missing.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use queuebox_core::app_tx::{self, OutboxMessage, Placeholder};
use queuebox_core::store::names::Names;
use queuebox_core::store::postgres::{sql, PgStore};
use queuebox_core::store::Backend;
use queuebox_core::{Error, NewInboxMessage, Store};

const OWN_SCHEMA: &str = include_str!("fixtures/own_schema.sql");

/// The names of `fixtures/own_schema.sql`, from `fixtures/own_schema_names.json` (the
/// relay's `database` keys, which acceptance row 70 puts in the binary's configuration).
pub fn own_names() -> Names {
    let json: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/own_schema_names.json")).unwrap();
    Names::from_json(json.as_object().unwrap()).expect("valid names")
}

/// The golden file holds each statement as 0.x sent it (`-- NAME`, the text, `;;`). When a
/// statement changes on purpose, regenerate it from `sql::statements()` rendered with
/// `Names::default()`.
#[test]
fn default_names_render_every_statement_exactly_as_before() {
    let names = Names::default();
    // A deliberate change of a statement: `QB_WRITE_GOLDEN=1 cargo test -p queuebox-core
    // --test statement_names` rewrites the file; review its diff like code.
    if std::env::var_os("QB_WRITE_GOLDEN").is_some() {
        let text: String = sql::statements()
            .into_iter()
            .map(|(name, t)| format!("-- {name}\n{}\n;;\n", names.render(Backend::Postgres, t)))
            .collect();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/postgres_default_statements.sql"
        );
        std::fs::write(path, text).unwrap();
        return;
    }
    let golden = include_str!("fixtures/postgres_default_statements.sql");
    let mut expected = BTreeMap::new();
    for block in golden.split(";;\n").filter(|b| !b.trim().is_empty()) {
        let (head, text) = block.split_once('\n').expect("a `-- NAME` line");
        let text = text.strip_suffix('\n').unwrap_or(text);
        expected.insert(head.trim_start_matches("-- ").to_string(), text.to_string());
    }
    let all = sql::statements();
    assert_eq!(expected.len(), all.len(), "one golden text per statement");
    for (name, template) in all {
        let rendered = names.render(Backend::Postgres, template);
        assert_eq!(
            Some(&rendered),
            expected.get(name),
            "{name} renders differently with the default names"
        );
    }
}

/// Every constant of `sql.rs` is in `statements()`, so a store renders it up front.
#[test]
fn every_statement_constant_is_listed() {
    let source = include_str!("../src/store/postgres/sql.rs");
    let listed: Vec<&str> = sql::statements().iter().map(|(n, _)| *n).collect();
    for line in source.lines() {
        if let Some(rest) = line.strip_prefix("pub const ") {
            let name = rest.split(':').next().unwrap().trim();
            assert!(
                listed.contains(&name),
                "{name} is missing from statements()"
            );
        }
    }
}

async fn own_schema_store(prefix: &str) -> PgStore {
    own_schema_store_at(prefix).await.0
}

/// [`own_schema_store`] and its database's URL.
async fn own_schema_store_at(prefix: &str) -> (PgStore, String) {
    let url = queuebox_testkit::fresh_database(prefix).await;
    let store = PgStore::connect(&url, 5).await.expect("connect");
    sqlx::raw_sql(OWN_SCHEMA)
        .execute(store.pool())
        .await
        .expect("create the own schema");
    (PgStore::with_names(store.pool().clone(), own_names()), url)
}

#[tokio::test]
async fn every_statement_prepares_on_a_schema_with_reserved_word_names() {
    let store = own_schema_store("own_prepare").await;
    store.check_schema().await.expect("the schema guards pass");
    let names = own_names();
    let mut failed = Vec::new();
    for (name, template) in sql::statements() {
        let text = names.render(Backend::Postgres, template);
        assert!(!text.contains("{inbox") && !text.contains("{=") && !text.contains("{outbox"));
        if let Err(e) = sqlx::Executor::prepare(store.pool(), text.as_str()).await {
            // The migration bookkeeping names QueueBox's own history table only; ENQUEUE
            // calls migration 11's function, which a schema of one's own creates itself
            // with its names (proto-docs/own-schema.md).
            if !name.starts_with("HISTORY") && name != "ENQUEUE" {
                failed.push(format!("{name}: {e}\n{text}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "statements that do not prepare:\n{}",
        failed.join("\n")
    );
}

#[tokio::test]
async fn pull_rows_are_inserted_claimed_and_completed_under_custom_names() {
    let store = own_schema_store("own_pull").await;
    let msg = NewInboxMessage::new("orders", "o-1", serde_json::json!({"n": 1})).pull();
    let id = match store.insert_inbox(&msg).await.unwrap() {
        queuebox_core::InsertOutcome::Inserted(id) => id,
        other => panic!("expected an insert, got {other:?}"),
    };
    assert!(matches!(
        store.insert_inbox(&msg).await.unwrap(),
        queuebox_core::InsertOutcome::Duplicate(d) if d == id
    ));
    let claimed = store
        .claim_pull("orders", 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].message.idempotency_key, "o-1");
    // The application's own transaction gets the same names.
    let st = app_tx::completion_statement_named(
        Backend::Postgres,
        store.names(),
        id,
        claimed[0].claim.token,
        Placeholder::Dollar,
    );
    assert!(
        st.sql
            .starts_with(r#"UPDATE "shop"."user" SET "status" = 'processed'"#),
        "{}",
        st.sql
    );
    assert!(store.complete_pull(&claimed[0].claim).await.unwrap());
    let status: String =
        sqlx::query_scalar(r#"SELECT status FROM shop."user" WHERE inbox_id = $1"#)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(status, "processed");
    // A publish through the application's statement lands in the renamed outbox.
    let msg = OutboxMessage::new("orders.created", serde_json::json!({"n": 1})).key("k-1");
    let st = app_tx::publish_statement_named(
        &[msg],
        Placeholder::Dollar,
        Backend::Postgres,
        store.names(),
    )
    .unwrap();
    let mut q = sqlx::query(&st.sql);
    for p in &st.params {
        q = q.bind(p.as_deref());
    }
    assert_eq!(q.execute(store.pool()).await.unwrap().rows_affected(), 1);
    let (topic, key): (String, String) =
        sqlx::query_as(r#"SELECT "group", "user" FROM shop."order" WHERE message_id = $1"#)
            .bind(st.ids[0])
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!((topic.as_str(), key.as_str()), ("orders.created", "k-1"));
}

#[tokio::test]
async fn schema_guards_name_the_missing_column_and_how_to_add_it() {
    let store = own_schema_store("own_guard").await;
    sqlx::raw_sql(r#"ALTER TABLE shop."user" DROP COLUMN hdrs; ALTER TABLE shop."order" DROP COLUMN seq; ALTER TABLE shop."order" DROP COLUMN last_error"#)
        .execute(store.pool())
        .await
        .unwrap();
    let message = |e: Error| match e {
        Error::Config { path, reason } => (path, reason),
        other => panic!("expected a config error, got {other:?}"),
    };
    let (path, reason) = message(store.check_schema().await.unwrap_err());
    assert_eq!(path, "database.columnMapping.inbox.headers");
    assert!(
        reason.contains("shop.user") && reason.contains("`hdrs`"),
        "{reason}"
    );
    assert!(
        reason.ends_with(
            r#"ALTER TABLE "shop"."user" ADD COLUMN "hdrs" JSONB NOT NULL DEFAULT '{}';"#
        ),
        "{reason}"
    );
    sqlx::raw_sql(r#"ALTER TABLE "shop"."user" ADD COLUMN "hdrs" JSONB NOT NULL DEFAULT '{}';"#)
        .execute(store.pool())
        .await
        .unwrap();
    let (path, reason) = message(store.check_schema().await.unwrap_err());
    assert_eq!(path, "database.columnMapping.outbox.sequence");
    let statement = reason
        .split_once("start QueueBox again: ")
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| panic!("no statement in: {reason}"));
    sqlx::raw_sql(&statement)
        .execute(store.pool())
        .await
        .unwrap();
    let (path, reason) = message(store.check_schema().await.unwrap_err());
    assert_eq!(path, "database.columnMapping.outbox.lastError");
    assert!(reason.contains("`last_error`"), "{reason}");
    // A schema made before priorities: the guard gives the statement that adds
    // the column.
    sqlx::raw_sql(r#"ALTER TABLE shop."order" ADD COLUMN last_error TEXT; DROP INDEX shop.user_pull_pending; ALTER TABLE shop."user" DROP COLUMN priority"#)
        .execute(store.pool())
        .await
        .unwrap();
    let (path, reason) = message(store.check_schema().await.unwrap_err());
    assert_eq!(path, "database.columnMapping.inbox.priority");
    let statement = reason
        .split_once("start QueueBox again: ")
        .and_then(|(_, s)| s.split_once("; and key"))
        .map(|(s, _)| s.to_string())
        .unwrap_or_else(|| panic!("no statement in: {reason}"));
    assert_eq!(
        statement,
        r#"ALTER TABLE "shop"."user" ADD COLUMN "priority" SMALLINT NOT NULL DEFAULT 0"#
    );
    sqlx::raw_sql(&statement)
        .execute(store.pool())
        .await
        .unwrap();
    // A schema made before pause: the guard gives the table every claim reads.
    sqlx::raw_sql("DROP TABLE queuebox_paused")
        .execute(store.pool())
        .await
        .unwrap();
    let (path, reason) = message(store.check_schema().await.unwrap_err());
    assert_eq!(path, "database");
    let statement = reason
        .split_once("start QueueBox again: ")
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| panic!("no statement in: {reason}"));
    sqlx::raw_sql(&statement)
        .execute(store.pool())
        .await
        .unwrap();
    store.check_schema().await.expect("the guards pass again");
}

#[test]
fn sqlserver_and_migrations_refuse_custom_names() {
    let err = queuebox_core::backend::refuse_custom_names(&own_names()).unwrap_err();
    let text = err.to_string();
    for key in [
        "database.outboxTableName",
        "database.inboxTableName",
        "database.columnMapping.outbox.topic",
        "database.columnMapping.inbox.idempotencyKey",
    ] {
        assert!(text.contains(key), "{key} missing from: {text}");
    }
    assert!(queuebox_core::backend::refuse_custom_names(&Names::default()).is_ok());
}

/// A worker given the names in its options (what the bindings pass from their JSON options)
/// opens its store with them: the start-up guards pass, it claims from the renamed table,
/// and the completion it hands to the application's driver names the renamed table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_names_in_its_options_claims_and_hands_out_renamed_statements() {
    let (store, url) = own_schema_store_at("own_worker").await;
    let msg = NewInboxMessage::new("jobs", "j-1", serde_json::json!({"n": 1})).pull();
    store.insert_inbox(&msg).await.unwrap();
    let worker = queuebox_core::Worker::connect(
        &url,
        queuebox_core::WorkerOptions {
            poll_interval: Duration::from_millis(50),
            names: own_names(),
            ..queuebox_core::WorkerOptions::new("jobs")
        },
    )
    .await
    .expect("the worker connects to the own schema");
    let task = worker.next().await.unwrap().expect("the row is claimed");
    assert_eq!(task.message().idempotency_key, "j-1");
    let st = task.completion_statement(Placeholder::Dollar).unwrap();
    assert!(st.sql.contains(r#""shop"."user""#), "{}", st.sql);
    let mut q = sqlx::query(&st.sql);
    for p in &st.params {
        q = q.bind(p.as_deref());
    }
    assert_eq!(q.execute(store.pool()).await.unwrap().rows_affected(), 1);
    task.complete().await.unwrap();
    worker.shutdown().await;
    let status: String =
        sqlx::query_scalar(r#"SELECT status FROM shop."user" WHERE "key" = 'j-1'"#)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(status, "processed");
}
