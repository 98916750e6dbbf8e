//! The operator commands on the real `queuebox` binary against a real PostgreSQL: rows made
//! dead by a real failing receiver are listed with their last error (`dead list`), deleted
//! by filter (`dead delete`, only the matching rows), replayed (`dead replay`, then
//! delivered by the running relay), and a pushed message's journey is shown inbox → outbox
//! (`inspect`). Bad arguments exit 2 naming the argument; a change without ids or `--yes`
//! changes nothing.

mod common;

use common::*;
use serde_json::Value;

const SOURCES: &str = "
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    topic: 'orders.created'
  users:
    path: /users
    idempotencyKeyPath: $.id
    topic: 'users.created'
";

/// Runs `queuebox --config <cfg> <args>`; returns (exit code, stdout, stderr).
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

#[tokio::test]
async fn dead_rows_are_listed_deleted_by_filter_and_replayed_to_a_real_receiver() {
    let (url, store) = fresh_db("clidead").await;
    let rx = Receiver::start().await;
    // maxAttempts is 2: the receiver answers 500 until the three rows are dead.
    rx.script("/hooks", &[500]);
    let relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;
    for (path, body) in [
        ("/inbox/orders", r#"{"id":"o-1","orderId":"a"}"#),
        ("/inbox/orders", r#"{"id":"o-2","orderId":"b"}"#),
        ("/inbox/users", r#"{"id":"u-1"}"#),
    ] {
        let (s, b) = relay.post(path, body, &[]).await;
        assert_eq!(s, 202, "{b}");
    }
    eventually("three dead outbox rows", 30, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await == 3
    })
    .await;

    // list: every dead row with its last error, as a table and as JSON.
    let (code, table, err) = qb(&relay, &["dead", "list"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("LAST ERROR") && table.contains("(3 row(s))"),
        "{table}"
    );
    assert!(
        table.contains("users.created") && table.contains("500"),
        "{table}"
    );
    let rows = qb_json(&relay, &["dead", "list", "--json"]).await["rows"].clone();
    assert_eq!(rows.as_array().unwrap().len(), 3, "{rows}");
    for r in rows.as_array().unwrap() {
        let e = r["lastError"].as_str().unwrap_or_default();
        assert!(
            e.contains("500"),
            "the receiver's status is the last error: {r}"
        );
        assert_eq!(r["attempt"], 2, "{r}");
    }
    let users = qb_json(&relay, &["dead", "list", "--source", "users", "--json"]).await;
    assert_eq!(users["rows"].as_array().unwrap().len(), 1, "{users}");
    assert_eq!(users["rows"][0]["topicOrSource"], "users.created");
    // --older-than counts by the database clock: the rows are older than 0s, not than 1h.
    let all = qb_json(&relay, &["dead", "list", "--older-than", "0s", "--json"]).await;
    assert_eq!(all["rows"].as_array().unwrap().len(), 3, "{all}");
    let none = qb_json(&relay, &["dead", "list", "--older-than", "1h", "--json"]).await;
    assert_eq!(none["rows"].as_array().unwrap().len(), 0, "{none}");
    let inbox = qb_json(&relay, &["dead", "list", "--table", "inbox", "--json"]).await;
    assert_eq!(
        inbox["rows"].as_array().unwrap().len(),
        0,
        "forwarded inbox rows: {inbox}"
    );

    // A change without ids or --yes is a usage error and changes nothing.
    let (code, _, err) = qb(&relay, &["dead", "delete", "--topic", "users.created"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    let (code, _, err) = qb(&relay, &["dead", "replay", "--topic", "orders.created"]).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await,
        3
    );

    // delete: only the filtered row goes.
    let deleted = qb_json(
        &relay,
        &[
            "dead",
            "delete",
            "--topic",
            "users.created",
            "--yes",
            "--json",
        ],
    )
    .await;
    assert_eq!(deleted["deleted"], 1, "{deleted}");
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE topic = 'users.created'"
        )
        .await,
        0
    );
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await,
        2
    );

    // replay: back to pending, and the running relay delivers them (the receiver says 200 now).
    let failures = rx.to("/hooks").len();
    rx.script("/hooks", &[200]);
    let (code, out, err) = qb(&relay, &["dead", "replay", "--source", "orders", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("replayed 2 dead row(s)"), "{out}");
    eventually("the replayed rows sent", 30, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 2
    })
    .await;
    assert_eq!(rx.to("/hooks").len(), failures + 2, "the two replays");

    // inspect: inbox row → its outbox row, by source:key and by the outbox row's id.
    let (code, out, err) = qb(&relay, &["inspect", "orders:o-1"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("inbox") && out.contains("└─> outbox"),
        "{out}"
    );
    assert!(
        out.contains("state=sent") && out.contains("key=o-1"),
        "{out}"
    );
    let j = qb_json(&relay, &["inspect", "orders:o-1", "--json"]).await;
    assert_eq!(j["inbox"]["key"], "o-1", "{j}");
    assert_eq!(j["inbox"]["state"], "processed", "{j}");
    let outbox = j["outbox"].as_array().unwrap();
    assert_eq!(outbox.len(), 1, "{j}");
    assert_eq!(outbox[0]["state"], "sent");
    let outbox_id = outbox[0]["id"].as_str().unwrap().to_string();
    let by_outbox = qb_json(&relay, &["inspect", &outbox_id, "--json"]).await;
    assert_eq!(by_outbox["inbox"]["id"], j["inbox"]["id"], "{by_outbox}");
    // A delete by id touches only dead rows: the sent row stays.
    let kept = qb_json(&relay, &["dead", "delete", &outbox_id, "--json"]).await;
    assert_eq!(kept["deleted"], 0, "{kept}");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
        2
    );
    let (code, _, err) = qb(&relay, &["inspect", "orders:nope"]).await;
    assert_eq!(code, 1, "nothing matches: {err}");
    assert!(err.contains("orders:nope"), "{err}");
}

#[tokio::test]
async fn bad_operator_arguments_exit_2_naming_the_argument() {
    let cfg = write_config("database:\n  url: postgres://nobody@127.0.0.1:1/none\n");
    for (args, named) in [
        (&["dead", "list", "--table", "queue"][..], "--table"),
        (&["dead", "list", "--limit", "0"][..], "--limit"),
        (
            &["dead", "list", "--older-than", "soon"][..],
            "--older-than",
        ),
        (&["dead", "delete", "not-a-uuid"][..], "IDS"),
        (&["dead", "replay", "--source", "orders"][..], "--yes"),
        (&["dead", "list", "--colour"][..], "--colour"),
        (&["inspect", "nothing"][..], "MESSAGE_ID|SOURCE:KEY"),
        (
            &["dead", "list", "--table", "inbox", "--topic", "orders"][..],
            "--topic",
        ),
    ] {
        let out = relay_command(cfg.path(), args).output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} names {named}: {err}");
    }
}

/// A push row the inbox relay could not route (its topic rendered empty) is dead in the
/// inbox; after the operator fixes the source's topic and restarts, `dead replay --table
/// inbox` requeues it and the relay forwards and delivers it.
#[tokio::test]
async fn a_dead_inbox_row_is_requeued_and_forwarded_after_the_fix() {
    let (url, store) = fresh_db("clideadinbox").await;
    let rx = Receiver::start().await;
    let source = |topic: &str| {
        format!(
            "{}routes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  typed:\n    path: /typed\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    topic: '{topic}'\n",
            base_config(&url, &rx.url())
        )
    };
    let mut relay = Relay::start(&source("{{ eventType }}")).await;
    let (s, b) = relay.post("/inbox/typed", r#"{"id":"t-1"}"#, &[]).await;
    assert_eq!(s, 202, "{b}");
    eventually("a dead inbox row", 30, || async {
        scalar_i64(&store, "SELECT count(*) FROM inbox WHERE state = 'dead'").await == 1
    })
    .await;
    let rows = qb_json(&relay, &["dead", "list", "--table", "inbox", "--json"]).await;
    assert_eq!(rows["rows"][0]["topicOrSource"], "typed", "{rows}");
    assert!(
        rows["rows"][0]["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("empty topic"),
        "{rows}"
    );
    // An inbox row has no topic: the filter is a usage mistake, refused naming it.
    let (code, _, err) = qb(
        &relay,
        &["dead", "list", "--table", "inbox", "--topic", "x"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--topic"), "{err}");

    // The old relay must be gone, or its inbox relay claims the requeued row again.
    relay.term();
    relay.child.wait().await.unwrap();
    let relay = Relay::start(&source("typed.fixed")).await;
    let out = qb_json(
        &relay,
        &[
            "dead", "replay", "--table", "inbox", "--source", "typed", "--yes", "--json",
        ],
    )
    .await;
    assert_eq!(out["replayed"], 1, "{out}");
    eventually("the requeued row delivered", 30, || async {
        rx.to("/hooks").len() == 1
    })
    .await;
    let j = qb_json(&relay, &["inspect", "typed:t-1", "--json"]).await;
    assert_eq!(j["inbox"]["state"], "processed", "{j}");
    assert_eq!(j["outbox"][0]["topicOrSource"], "typed.fixed", "{j}");
}
