//! Rows 1–3: the schema the binary creates and the `migrate` command.

use std::time::Duration;

use super::kit::*;
use super::{NotRun, Outcome};

/// Row 1: the binary migrates an empty database at start-up, and a restart finds nothing to do.
/// The reference's `queuebox_capture_state` belongs to its change-data-capture wake-up;
/// QueueBox wakes its relays with LISTEN/NOTIFY instead (row 75), so the row checks the
/// NOTIFY triggers in its place. The SQL Server half (`queuebox migrate` on a fresh database
/// of `QUEUEBOX_TEST_MSSQL_URL`'s server: the tables, sequences, constraint and indexes exist;
/// a second run applies nothing) runs when that is set; without it the row is *not run*
/// (the PostgreSQL half has passed by then), never passed. Written without a SQL Server to
/// run it on: unproved until it runs on one.
pub async fn migrations_at_startup_create_the_schema_and_a_restart_is_clean() -> Outcome {
    let (url, store) = empty_db("acc_r1").await;
    let rx = Receiver::start().await;
    let mut relay = Relay::start(&base_config(&url, &rx.url())).await;
    for (kind, name) in [
        ("r", "outbox"),
        ("r", "inbox"),
        ("S", "outbox_sequence_seq"),
    ] {
        let n = scalar_i64(
            &store,
            &format!(
                "SELECT count(*) FROM pg_class WHERE relkind = '{kind}' AND relname = '{name}'"
            ),
        )
        .await;
        assert_eq!(n, 1, "{name} exists");
    }
    let uq = scalar_i64(
        &store,
        "SELECT count(*) FROM pg_constraint WHERE conname = 'uq_inbox_source_idempotency'",
    )
    .await;
    assert_eq!(uq, 1, "constraint uq_inbox_source_idempotency exists");
    for trigger in ["trg_outbox_notify", "trg_inbox_pull_notify"] {
        let n = scalar_i64(
            &store,
            &format!("SELECT count(*) FROM pg_trigger WHERE tgname = '{trigger}'"),
        )
        .await;
        assert_eq!(n, 1, "the wake-up trigger {trigger} exists");
    }
    for index in [
        "idx_outbox_pending_scheduled",
        "idx_outbox_processing_lease",
        "idx_outbox_key_sequence",
        "idx_inbox_push_pending",
        "idx_inbox_pull_pending_priority",
    ] {
        let n = scalar_i64(
            &store,
            &format!("SELECT count(*) FROM pg_indexes WHERE indexname = '{index}'"),
        )
        .await;
        assert_eq!(n, 1, "index {index} exists");
    }
    // Migration 13 replaced the pull claim's index with the priority-ordered one.
    let old = scalar_i64(
        &store,
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'idx_inbox_pull_pending'",
    )
    .await;
    assert_eq!(
        old, 0,
        "idx_inbox_pull_pending was replaced by migration 13"
    );
    relay.kill();
    let _ = relay.child.wait().await;
    // A restart against the migrated database starts and serves.
    let again = Relay::start(&base_config(&url, &rx.url())).await;
    assert_eq!(again.get("/health/ready").await.0, 200);
    // SQL Server: the same binary migrates a fresh database of its own; the tables, the
    // constraint and the indexes are there; a second run applies nothing and changes nothing.
    let Some(mssql) = std::env::var("QUEUEBOX_TEST_MSSQL_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    else {
        return Err(NotRun(
            "the PostgreSQL half passed; the SQL Server half needs QUEUEBOX_TEST_MSSQL_URL".into(),
        ));
    };
    sqlserver_migrations_at_startup(&mssql).await;
    Ok(())
}

/// Row 1's SQL Server half on the server `mssql` names (any accepted URL form).
async fn sqlserver_migrations_at_startup(mssql: &str) {
    use queuebox_core::backend::{self, DatabaseSettings};
    let name = format!(
        "qb_acc_r1_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    );
    let admin = backend::connect(&DatabaseSettings::new(mssql))
        .await
        .expect("connect to QUEUEBOX_TEST_MSSQL_URL");
    admin
        .execute_script(&format!("CREATE DATABASE [{name}]"))
        .await
        .expect("create the row's database");
    admin.close().await;
    let url = url_of_database(mssql, &name);
    let count = |sql: String| {
        let url = url.clone();
        async move {
            let db = backend::connect(&DatabaseSettings::new(url)).await.unwrap();
            let mut tx = db.store().begin().await.unwrap();
            let rows = tx.query(&sql, &[]).await.unwrap();
            tx.commit().await.unwrap();
            db.close().await;
            rows[0]["n"].as_i64().unwrap()
        }
    };
    let mut history = 0;
    for run in [1, 2] {
        let (code, out) = run_to_exit("{db}", "", &["migrate", "--database-url", &url]).await;
        assert_eq!(code, 0, "SQL Server migrate run {run}: {out}");
        for table in ["outbox", "inbox", "queuebox_schema_history"] {
            let n = count(format!(
                "SELECT COUNT(*) AS n FROM sys.tables WHERE name = '{table}'"
            ))
            .await;
            assert_eq!(n, 1, "SQL Server run {run}: table {table} exists");
        }
        for seq in ["outbox_sequence_seq", "inbox_sequence_seq"] {
            let n = count(format!(
                "SELECT COUNT(*) AS n FROM sys.sequences WHERE name = '{seq}'"
            ))
            .await;
            assert_eq!(n, 1, "SQL Server run {run}: sequence {seq} exists");
        }
        let uq = count(
            "SELECT COUNT(*) AS n FROM sys.key_constraints WHERE name = 'uq_inbox_source_idempotency'"
                .into(),
        )
        .await;
        assert_eq!(
            uq, 1,
            "SQL Server run {run}: uq_inbox_source_idempotency exists"
        );
        for index in [
            "idx_outbox_pending_scheduled",
            "idx_outbox_processing_lease",
            "idx_outbox_key_sequence",
            "idx_inbox_push_pending",
            "idx_inbox_pull_pending_priority",
        ] {
            let n = count(format!(
                "SELECT COUNT(*) AS n FROM sys.indexes WHERE name = '{index}'"
            ))
            .await;
            assert_eq!(n, 1, "SQL Server run {run}: index {index} exists");
        }
        let versions = count("SELECT COUNT(*) AS n FROM queuebox_schema_history".into()).await;
        if run == 1 {
            assert!(
                versions >= 9,
                "SQL Server run 1: {versions} versions recorded: {out}"
            );
            history = versions;
        } else {
            assert_eq!(
                versions, history,
                "SQL Server run 2 records nothing new: {out}"
            );
            assert!(
                out.contains("(0 applied now"),
                "SQL Server run 2 applies nothing: {out}"
            );
        }
    }
}

/// `url` (any SQL Server form) naming database `name`: the path of a `sqlserver://` or
/// `mssql://` URL, else a `database=` key (tiberius reads it first, the last one wins).
fn url_of_database(url: &str, name: &str) -> String {
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("sqlserver://") || lower.starts_with("mssql://") {
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, format!("?{q}")),
            None => (url, String::new()),
        };
        let after_scheme = base.find("://").unwrap() + 3;
        let host_end = base[after_scheme..]
            .find('/')
            .map_or(base.len(), |i| after_scheme + i);
        format!("{}/{name}{query}", &base[..host_end])
    } else {
        format!("{};database={name}", url.trim_end_matches(';'))
    }
}

/// Row 2: `migrate` applies everything once (exit 0), a second run applies nothing (exit 0),
/// an unknown flag exits 2, and a baseline on a database with history leaves it unchanged.
pub async fn migrate_applies_once_and_refuses_bad_arguments() -> Outcome {
    let (url, store) = empty_db("acc_r2").await;
    let yaml = "database:\n  url: {db}\n";
    let (code, out) = run_to_exit(yaml, &url, &["migrate"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("applied "), "every version is logged: {out}");
    let tables = scalar_i64(
        &store,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    .await;
    let (code, out2) = run_to_exit(yaml, &url, &["migrate"]).await;
    assert_eq!(code, 0, "{out2}");
    assert!(
        out2.contains("(0 applied now"),
        "nothing applied the second time: {out2}"
    );
    let (code, out3) = run_to_exit(yaml, &url, &["migrate", "--bogus"]).await;
    assert_eq!(code, 2, "an unknown flag exits 2: {out3}");
    assert!(
        out3.contains("Unknown arguments: --bogus") && out3.contains("Usage:"),
        "the unknown argument is named and the usage printed: {out3}"
    );
    let history = scalar_i64(&store, "SELECT count(*) FROM queuebox_schema_history").await;
    let (code, out4) = run_to_exit(yaml, &url, &["migrate", "--baseline", "5"]).await;
    assert_eq!(
        code, 1,
        "a baseline on a database with history is refused: {out4}"
    );
    assert!(
        out4.contains("The migration failed.") && out4.contains("already has a migration history"),
        "the refusal says why: {out4}"
    );
    let after = scalar_i64(
        &store,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    .await;
    assert_eq!(tables, after, "the schema is unchanged");
    let history_after = scalar_i64(&store, "SELECT count(*) FROM queuebox_schema_history").await;
    assert_eq!(history, history_after, "the history is unchanged");
    Ok(())
}

/// Row 3: a schema applied by hand (the bundled PostgreSQL files 1–5 run with plain SQL, no
/// history) stops the service with the baseline message; `migrate --baseline 5` records 1–5
/// without running them and applies 6 only; then the service starts.
pub async fn a_hand_applied_schema_is_baselined_and_migrated_on() -> Outcome {
    let (url, store) = empty_db("acc_r3").await;
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../core/migrations/postgres"
    );
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the bundled migrations")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the bundled migrations: {files:?}");
    for f in &files[..5] {
        let sql = std::fs::read_to_string(f).unwrap();
        sqlx::raw_sql(&sql).execute(store.pool()).await.unwrap();
    }
    let rx = Receiver::start().await;
    let config = base_config(&url, &rx.url());
    let (code, out) = run_to_exit(&config, &url, &["run"]).await;
    assert_ne!(
        code, 0,
        "the service does not start on tables without history: {out}"
    );
    assert!(
        out.contains("QueueBox tables exist without a migration history. Run `queuebox migrate --baseline <version>`"),
        "the baseline message: {out}"
    );
    let yaml = "database:\n  url: {db}\n";
    let (code, out) = run_to_exit(yaml, &url, &["migrate", "--baseline", "5"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("applied 0006_") && !out.contains("applied 0005_"),
        "only the later file runs: {out}"
    );
    let versions = scalar_i64(&store, "SELECT count(*) FROM queuebox_schema_history").await;
    assert_eq!(
        versions as usize,
        files.len(),
        "every version is in the history"
    );
    // Version 6 really ran: its column exists.
    let claim_owner = scalar_i64(
        &store,
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'inbox' AND column_name = 'claim_owner'",
    )
    .await;
    assert_eq!(claim_owner, 1, "0006 added inbox.claim_owner");
    let relay = Relay::start(&config).await;
    assert_eq!(relay.get("/health/ready").await.0, 200);
    Ok(())
}

/// The application's own schema of row 70 (also the core's `statement_names` test): schema
/// `shop`, tables `order` (outbox) and `user` (inbox), reserved words as column names.
const OWN_SCHEMA: &str = include_str!("../../../core/tests/fixtures/own_schema.sql");

/// The `database` keys that name `OWN_SCHEMA`'s tables and columns (JSON, which YAML reads).
const OWN_NAMES: &str = include_str!("../../../core/tests/fixtures/own_schema_names.json");

/// `OWN_NAMES` as the lines of a YAML `database` block.
fn own_names_yaml() -> String {
    let names: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(OWN_NAMES).unwrap();
    names.iter().map(|(k, v)| format!("  {k}: {v}\n")).collect()
}

/// A push source routed to the receiver and a pull source, for row 70.
const OWN_SOURCES: &str = "routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.customer
    topic: orders.created
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyPath: $.id
";

/// `base_config` on `OWN_SCHEMA`'s names with `migrate: <migrate>`.
fn own_config(url: &str, receiver: &str, migrate: bool) -> String {
    let base = base_config(url, receiver);
    let anchor = format!("  url: {url}\n");
    base.replacen(
        &anchor,
        &format!("{anchor}  migrate: {migrate}\n{}", own_names_yaml()),
        1,
    ) + OWN_SOURCES
}

/// Row 70: on a schema the application made (its own PostgreSQL schema, tables and columns
/// renamed, reserved words among them) with `migrate: false`, the binary stores a webhook,
/// relays it to the outbox and delivers it, delivers a row the application wrote to the
/// renamed outbox, and a pull worker (through the core, with the same names) claims and
/// completes a pull row. `migrate: true` with renames is refused naming the keys; a missing
/// inbox `headers` or outbox `sequence` column stops the start with the statement that adds it,
/// and after running that statement the binary starts.
pub async fn custom_table_and_column_names_run_the_whole_flow() -> Outcome {
    let (url, store) = empty_db("acc_r70").await;
    sqlx::raw_sql(OWN_SCHEMA)
        .execute(store.pool())
        .await
        .unwrap();
    let rx = Receiver::start().await;
    let relay = Relay::start(&own_config(&url, &rx.url(), false)).await;
    assert_eq!(
        relay.get("/health/ready").await.0,
        200,
        "ready on the own schema"
    );

    // Inbox: the webhook is stored in shop."user", relayed to shop."order" and delivered.
    let body = r#"{"id":"o-1","customer":"c-7","total":3}"#;
    assert_eq!(relay.post("/inbox/orders", body, &[]).await.0, 202);
    eventually("the webhook delivered", 20, || async {
        rx.to("/hooks").len() == 1
    })
    .await;
    let hook = &rx.to("/hooks")[0];
    assert_eq!(
        hook.h("x-message-key"),
        Some("c-7"),
        "the aggregate id is the key"
    );
    eventually("the inbox row processed", 10, || async {
        scalar_i64(
            &store,
            r#"SELECT count(*) FROM shop."user" WHERE "from" = 'orders' AND "key" = 'o-1' AND status = 'processed'"#,
        )
        .await
            == 1
    })
    .await;
    eventually("the outbox row sent", 10, || async {
        scalar_i64(
            &store,
            r#"SELECT count(*) FROM shop."order" WHERE "group" = 'orders.created' AND "user" = 'c-7' AND state = 'sent' AND meta ->> 'x-source' = 'orders'"#,
        )
        .await
            == 1
    })
    .await;
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM pg_tables WHERE tablename IN ('inbox', 'outbox')"
        )
        .await,
        0,
        "QueueBox created no tables of its own"
    );

    // Outbox: a row the application writes to the renamed table is delivered.
    sqlx::query(r#"INSERT INTO shop."order" ("group", "user", payload) VALUES ('app.event', 'k-1', '{"app":true}')"#)
        .execute(store.pool())
        .await
        .unwrap();
    eventually("the application's row delivered", 20, || async {
        rx.to("/hooks").len() == 2
    })
    .await;
    assert_eq!(
        rx.to("/hooks")[1].body,
        serde_json::json!({"app": true}),
        "the application's payload arrives"
    );

    // Pull: the binary stores the message; a worker on the core with the same names claims
    // and completes it.
    assert_eq!(
        relay.post("/inbox/jobs", r#"{"id":"j-1"}"#, &[]).await.0,
        202
    );
    let mut settings = queuebox_core::DatabaseSettings::new(url.clone());
    let names: serde_json::Value = serde_json::from_str(OWN_NAMES).unwrap();
    settings.names =
        queuebox_core::store::names::Names::from_json(names.as_object().unwrap()).unwrap();
    let db = queuebox_core::backend::connect(&settings).await.unwrap();
    let worker_store = db.store();
    let claimed = worker_store
        .claim_pull("jobs", 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the pull row is claimed");
    assert_eq!(claimed[0].message.idempotency_key, "j-1");
    assert!(worker_store.complete_pull(&claimed[0].claim).await.unwrap());
    assert_eq!(
        scalar_i64(
            &store,
            r#"SELECT count(*) FROM shop."user" WHERE "key" = 'j-1' AND status = 'processed'"#
        )
        .await,
        1
    );
    db.close().await;
    drop(relay);

    // migrate: true with renamed names: refused before the database is touched, naming keys.
    let (code, out) = run_to_exit(&own_config(&url, &rx.url(), true), &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    for key in [
        "database.migrate",
        "database.outboxTableName",
        "database.inboxTableName",
        "database.columnMapping.outbox.topic",
        "database.columnMapping.inbox.idempotencyKey",
    ] {
        assert!(out.contains(key), "{key} is named: {out}");
    }

    // `queuebox migrate` (which ignores database.migrate) refuses the renamed schema too, and
    // creates nothing.
    let (code, out) = run_to_exit(&own_config(&url, &rx.url(), false), &url, &["migrate"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("The migration failed.")
            && out.contains("database.columnMapping.inbox.idempotencyKey"),
        "{out}"
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'queuebox_schema_history'"
        )
        .await,
        0,
        "no migration history was created"
    );

    // Schema guards: the inbox headers column, then the outbox sequence column.
    sqlx::raw_sql(
        r#"ALTER TABLE shop."user" DROP COLUMN hdrs; ALTER TABLE shop."order" DROP COLUMN seq"#,
    )
    .execute(store.pool())
    .await
    .unwrap();
    let config = own_config(&url, &rx.url(), false);
    let (code, out) = run_to_exit(&config, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    let add_headers = r#"ALTER TABLE "shop"."user" ADD COLUMN "hdrs" JSONB NOT NULL DEFAULT '{}';"#;
    assert!(
        out.lines().any(|l| l.contains("shop.user")
            && l.contains("`hdrs`")
            && l.trim_end().ends_with(add_headers)),
        "names table and column and ends with the ALTER: {out}"
    );
    sqlx::raw_sql(add_headers)
        .execute(store.pool())
        .await
        .unwrap();
    let (code, out) = run_to_exit(&config, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("start QueueBox again: "))
        .unwrap_or_else(|| panic!("the sequence guard's statement: {out}"));
    assert!(
        line.contains("`seq`") && line.contains("database.columnMapping.outbox.sequence"),
        "{line}"
    );
    let statement = line.split_once("start QueueBox again: ").unwrap().1.trim();
    sqlx::raw_sql(statement)
        .execute(store.pool())
        .await
        .unwrap();
    let again = Relay::start(&config).await;
    assert_eq!(
        again.get("/health/ready").await.0,
        200,
        "starts once the columns exist"
    );
    Ok(())
}
