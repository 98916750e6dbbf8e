//! Rows 1–3: the schema the binary creates and the `migrate` command.

use super::kit::*;
use super::{NotRun, Outcome};

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
    let (code, out4) = run_to_exit(yaml, &url, &["migrate", "--baseline", "5"]).await;
    assert_ne!(
        code, 0,
        "a baseline on a database with history is refused: {out4}"
    );
    let after = scalar_i64(
        &store,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    .await;
    assert_eq!(tables, after, "the schema is unchanged");
    // Refused as an unknown flag is not the refusal the row asks for (a baseline below the
    // database's history): until `--baseline` exists the row has not been proved.
    if code == 2 && out4.contains("--baseline") {
        return Err(NotRun(
            "the exit codes hold; `migrate --baseline` is not built (issue 16), so its refusal is untested".into(),
        ));
    }
    Ok(())
}
