//! The bindings' enqueue pool goes through the core's backend factory: against the test
//! PostgreSQL it creates a database with a script, migrates it, enqueues (a repeat is a
//! duplicate) and queries; a SQL Server URL reaches the factory's SQL Server arm (or its
//! "build with the `sqlserver` feature" refusal) and an unknown URL is refused naming the
//! accepted forms, not by a PostgreSQL parser.

use queuebox_bridge::database::Database;
use queuebox_core::SqlValue;

fn admin_url() -> String {
    std::env::var("QUEUEBOX_TEST_DATABASE_URL")
        .expect("NOT RUN: QUEUEBOX_TEST_DATABASE_URL is not set (source scripts/postgres.sh start)")
}

#[tokio::test]
async fn the_enqueue_pool_runs_scripts_enqueues_and_queries_through_the_backend_factory() {
    let admin_url = admin_url();
    let admin = Database::connect(&admin_url, Some(2)).await.unwrap();
    let name = format!("qb_bridge_{}", uuid::Uuid::new_v4().simple());
    admin
        .execute_script(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let url = format!("{}/{name}", admin_url.rsplit_once('/').unwrap().0);
    queuebox_bridge::migrate::migrate(url.clone())
        .await
        .unwrap();

    let db = Database::connect(&url, None).await.unwrap();
    let msg = r#"{"source":"orders","idempotencyKey":"k-1","payload":{"n":1}}"#;
    let first: serde_json::Value = serde_json::from_str(&db.enqueue(msg).await.unwrap()).unwrap();
    let again: serde_json::Value = serde_json::from_str(&db.enqueue(msg).await.unwrap()).unwrap();
    assert_eq!(first["duplicate"], false);
    assert_eq!(
        (again["duplicate"].clone(), &again["id"]),
        (true.into(), &first["id"])
    );
    let rows = db
        .query(
            "SELECT source, state FROM inbox WHERE idempotency_key = $1",
            &[SqlValue::Text("k-1".into())],
        )
        .await
        .unwrap();
    assert_eq!(rows, r#"[{"source":"orders","state":"pending"}]"#);
    // Several statements in one script, outside a transaction.
    assert_eq!(
        db.execute_script("CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2)")
            .await
            .unwrap(),
        2
    );
    db.close().await;
    admin
        .execute_script(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
    admin.close().await;
}

#[tokio::test]
async fn other_urls_are_the_factorys_to_refuse() {
    let e = Database::connect("jdbc:sqlserver://127.0.0.1:1;databaseName=app", None)
        .await
        .err()
        .unwrap()
        .to_string();
    // Without core's `sqlserver` feature the factory names the feature; with it (a workspace
    // build unifies the relay's default features) the SQL Server store is refused at port 1.
    let sqlserver_arm = e.contains("127.0.0.1:1") && e.contains("refused");
    assert!(e.contains("`sqlserver`") || sqlserver_arm, "{e}");
    let e = Database::connect("mysql://root:hunter22@db/app", None)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sqlserver://") && !e.contains("hunter22"), "{e}");
}
