//! Cancel on the real `queuebox` binary against a real PostgreSQL:
//! `queuebox cancel inbox|outbox` and `POST /admin/cancel/{table}` turn pending and scheduled
//! rows into `cancelled`, leave a row being handled to finish (counted as in flight), cancel
//! nothing twice, and refuse a request that names no row, naming what is missing.

mod common;

use std::time::Duration;

use common::*;
use queuebox_core::{NewInboxMessage, Store};
use serde_json::{json, Value};

const ADMIN: &str = "
admin:
  enabled: true
  insecure: true
";

async fn qb(relay: &Relay, args: &[&str]) -> (i32, String, String) {
    let out = relay_command(relay.config.path(), args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn qb_json(relay: &Relay, args: &[&str]) -> Value {
    let (code, out, err) = qb(relay, args).await;
    assert_eq!(code, 0, "queuebox {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn counts(cancelled: u64, in_flight: u64, finished: u64, push: u64) -> Value {
    json!({ "cancelled": cancelled, "inFlight": in_flight, "finished": finished, "push": push })
}

async fn state(store: &queuebox_core::store::postgres::PgStore, table: &str, key: &str) -> i64 {
    let column = if table == "inbox" {
        "idempotency_key"
    } else {
        "key"
    };
    scalar_i64(
        store,
        &format!("SELECT count(*) FROM {table} WHERE {column} = '{key}' AND state = 'cancelled'"),
    )
    .await
}

#[tokio::test]
async fn pending_rows_are_cancelled_from_the_cli_and_the_admin_api_and_rows_in_flight_finish() {
    let (url, store) = fresh_db("clicancel").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{ADMIN}", base_config(&url, &rx.url()))).await;

    // Pull rows of source `jobs`: two of aggregate A, one scheduled an hour ahead.
    let job = |key: &str, aggregate: Option<&str>| {
        let mut m = NewInboxMessage::new("jobs", key, json!({})).pull();
        m.aggregate_id = aggregate.map(str::to_string);
        m
    };
    store.insert_inbox(&job("j1", Some("A"))).await.unwrap();
    store.insert_inbox(&job("j2", Some("A"))).await.unwrap();
    let mut later = job("j3", None);
    later.delay = Some(Duration::from_secs(3600));
    store.insert_inbox(&later).await.unwrap();
    // A worker holds j1.
    let claimed = store
        .claim_pull("jobs", 1, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed[0].message.idempotency_key, "j1");

    let by_aggregate = [
        "cancel",
        "inbox",
        "--source",
        "jobs",
        "--aggregate",
        "A",
        "--json",
    ];
    assert_eq!(qb_json(&relay, &by_aggregate).await, counts(1, 1, 0, 0));
    assert_eq!(state(&store, "inbox", "j2").await, 1);
    assert_eq!(
        state(&store, "inbox", "j1").await,
        0,
        "in flight: not cancelled"
    );
    assert!(store.complete_pull(&claimed[0].claim).await.unwrap());
    assert_eq!(qb_json(&relay, &by_aggregate).await, counts(0, 0, 2, 0));

    // The text form, by idempotency key: a scheduled row, then the same again.
    let by_key = ["cancel", "inbox", "--source", "jobs", "--key", "j3"];
    let (code, out, err) = qb(&relay, &by_key).await;
    assert_eq!((code, out.as_str()), (0, "cancelled 1 row(s)\n"), "{err}");
    let (_, out, _) = qb(&relay, &by_key).await;
    assert!(
        out.contains("cancelled 0 row(s)") && out.contains("1 row(s) already finished"),
        "{out}"
    );

    // Outbox rows scheduled an hour ahead, key K, through the admin API.
    scalar_i64(
        &store,
        "WITH i AS (INSERT INTO outbox (topic, key, payload, scheduled_at)
                    SELECT 't', 'K', '{}', now() + interval '1 hour' FROM generate_series(1, 2)
                    RETURNING 1) SELECT count(*) FROM i",
    )
    .await;
    let (s, b) = relay
        .post("/admin/cancel/outbox", r#"{"key":"K","topic":"t"}"#, &[])
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        serde_json::from_str::<Value>(&b).unwrap(),
        counts(2, 0, 0, 0)
    );
    assert_eq!(state(&store, "outbox", "K").await, 2);
    let (s, b) = relay
        .post("/admin/cancel/outbox", r#"{"key":"K"}"#, &[])
        .await;
    assert_eq!(
        (s, serde_json::from_str::<Value>(&b).unwrap()),
        (200, counts(0, 0, 2, 0))
    );
    // Refusals name what is wrong.
    for (path, body, named) in [
        ("/admin/cancel/outbox", r#"{"kee":"K"}"#, "kee"),
        ("/admin/cancel/inbox", r#"{"key":"j1"}"#, "source"),
        (
            "/admin/cancel/inbox",
            r#"{"source":"jobs"}"#,
            "id, key or aggregate",
        ),
        ("/admin/cancel/outbox", r#"{"aggregate":"A"}"#, "aggregate"),
    ] {
        let (s, b) = relay.post(path, body, &[]).await;
        assert_eq!(s, 400, "{body}: {b}");
        assert!(b.contains(named), "{body} names {named}: {b}");
    }
    let (s, _) = relay
        .post("/admin/cancel/queue", r#"{"id":null}"#, &[])
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn a_cancel_that_names_no_row_exits_2_naming_the_argument() {
    let cfg = write_config("database:\n  url: postgres://nobody@127.0.0.1:1/none\n");
    for (args, named) in [
        (&["cancel", "inbox", "--key", "k"][..], "--source"),
        (&["cancel", "inbox", "--source", "s"][..], "--id"),
        (
            &[
                "cancel",
                "inbox",
                "--source",
                "s",
                "--key",
                "k",
                "--aggregate",
                "a",
            ][..],
            "--aggregate",
        ),
        (&["cancel", "outbox", "--topic", "t"][..], "--id"),
        (&["cancel", "outbox", "--id", "not-a-uuid"][..], "--id"),
    ] {
        let out = relay_command(cfg.path(), args).output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} names {named}: {err}");
    }
}
