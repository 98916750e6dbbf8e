//! Rows 1–3: the schema the binary creates and the `migrate` command.

use super::kit::*;
use super::Outcome;

/// Row 1: the binary migrates an empty database at start-up, and a restart finds nothing to do.
/// The reference's `queuebox_capture_state` belongs to its change-data-capture wake-up;
/// QueueBox wakes its relays with LISTEN/NOTIFY instead (row 75), so the row checks the
/// NOTIFY triggers in its place. The SQL Server half (`queuebox migrate` on
/// `QUEUEBOX_TEST_MSSQL_URL`, applied once, nothing the second time) runs when that is set.
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
        "idx_inbox_pull_pending",
    ] {
        let n = scalar_i64(
            &store,
            &format!("SELECT count(*) FROM pg_indexes WHERE indexname = '{index}'"),
        )
        .await;
        assert_eq!(n, 1, "index {index} exists");
    }
    relay.kill();
    let _ = relay.child.wait().await;
    // A restart against the migrated database starts and serves.
    let again = Relay::start(&base_config(&url, &rx.url())).await;
    assert_eq!(again.get("/health/ready").await.0, 200);
    // SQL Server: the same binary migrates it, and a second run finds nothing to apply.
    if let Ok(mssql) = std::env::var("QUEUEBOX_TEST_MSSQL_URL") {
        for (run, expect) in [(1, "applied"), (2, "(0 applied now")] {
            let (code, out) = run_to_exit("{db}", "", &["migrate", "--database-url", &mssql]).await;
            assert_eq!(code, 0, "SQL Server migrate run {run}: {out}");
            assert!(out.contains(expect), "SQL Server migrate run {run}: {out}");
        }
    }
    Ok(())
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
