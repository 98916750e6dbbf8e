//! Every statement of the PostgreSQL backend (`store::postgres::sql::statements()`) is
//! prepared on a real, migrated database: each parses, names only existing tables and
//! columns, and its parameters resolve to types. The behaviours themselves are the store
//! contract suite's (`store_contract.rs`).

mod support;

use queuebox_core::store::postgres::sql;

#[tokio::test]
async fn every_postgres_statement_prepares_on_a_migrated_database() {
    let (store, _) = support::fresh_store("statements").await;
    let all = sql::statements();
    assert!(
        all.len() >= 35,
        "statements() lists the backend's statements"
    );
    let mut failed = Vec::new();
    let names = queuebox_core::store::names::Names::default();
    for (name, template) in &all {
        let text = names.render(queuebox_core::store::Backend::Postgres, template);
        if let Err(e) = sqlx::Executor::prepare(store.pool(), text.as_str()).await {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "statements that do not prepare:\n{}",
        failed.join("\n")
    );
}

#[test]
fn statement_names_are_unique() {
    let names: std::collections::BTreeSet<_> = sql::statements().iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), sql::statements().len());
}
