//! Many senders at once against the real `queuebox` binary: the relay stores concurrent
//! receipts in shared insert statements (`relay/src/sources/group.rs`), and every sender still
//! gets its own answer. New keys answer 202 and are stored once; two senders of one key get
//! one 202 and one 200 (duplicate) and one row; a NUL in a key answers 400 and stores nothing,
//! without failing the others of its statement. The metrics show fewer insert groups
//! (statements) than messages, so the grouping really happened.

mod common;

use common::*;

const SOURCES: &str = "
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    consumption: pull
";

#[tokio::test]
async fn concurrent_senders_share_statements_and_each_gets_its_own_answer() {
    let (url, store) = fresh_db("grouped").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&format!("{}{SOURCES}", base_config(&url, &rx.url()))).await;
    let relay = std::sync::Arc::new(relay);

    // 200 fresh keys, 50 keys sent twice at the same moment, 10 keys with a NUL.
    let mut bodies: Vec<(String, &str)> = (0..200)
        .map(|i| (format!(r#"{{"id":"fresh-{i}"}}"#), "fresh"))
        .collect();
    for i in 0..50 {
        bodies.push((format!(r#"{{"id":"twice-{i}","n":1}}"#), "twice"));
        bodies.push((format!(r#"{{"id":"twice-{i}","n":2}}"#), "twice"));
    }
    bodies.extend((0..10).map(|i| (format!(r#"{{"id":"nul-{i}\u0000"}}"#), "nul")));
    let sends = bodies.into_iter().map(|(body, kind)| {
        let relay = relay.clone();
        tokio::spawn(async move {
            let (status, answer) = relay.post("/inbox/orders", &body, &[]).await;
            (kind, status, answer)
        })
    });
    let answers = futures::future::join_all(sends).await;

    let mut counts = std::collections::BTreeMap::new();
    for a in answers {
        let (kind, status, answer) = a.unwrap();
        match (kind, status) {
            ("fresh", 202) | ("twice", 202) | ("twice", 200) => {}
            ("nul", 400) => assert!(answer.contains("U+0000"), "{answer}"),
            other => panic!("unexpected answer {other:?}: {answer}"),
        }
        *counts.entry((kind, status)).or_insert(0) += 1;
    }
    assert_eq!(counts[&("fresh", 202)], 200);
    assert_eq!(
        counts[&("twice", 202)],
        50,
        "one first receipt per twice-sent key"
    );
    assert_eq!(
        counts[&("twice", 200)],
        50,
        "one duplicate per twice-sent key"
    );
    assert_eq!(counts[&("nul", 400)], 10);

    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 250);
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(DISTINCT idempotency_key) FROM inbox WHERE state = 'pending'"
        )
        .await,
        250
    );
    let new = relay
        .metric("queuebox_inbox_messages_total{status=\"new\"}")
        .await;
    let dup = relay
        .metric("queuebox_inbox_messages_total{status=\"duplicate\"}")
        .await;
    assert_eq!((new, dup), (250.0, 50.0));
    let groups = relay.metric("queuebox_inbox_insert_groups_total").await;
    eprintln!("300 stored or answered messages in {groups} insert statements");
    assert!(
        (1.0..300.0).contains(&groups),
        "300 stored or answered messages took {groups} insert statements"
    );
}
