//! Rows 4–20: outbox rows written with SQL, delivered by the binary to a real HTTP receiver.

use std::time::{Duration, Instant};

use super::kit::*;
use super::Outcome;

async fn start_outbox(
    tag: &str,
    settings: &[(&str, &str)],
    extra: &str,
) -> (Relay, Receiver, queuebox_core::store::postgres::PgStore) {
    let (url, store) = empty_db(tag).await;
    let rx = Receiver::start().await;
    let mut yaml = base_config(&url, &rx.url());
    for (k, v) in settings {
        yaml = outbox_setting(yaml, k, v);
    }
    let relay = Relay::start(&format!("{yaml}{extra}")).await;
    (relay, rx, store)
}

/// An HTTP destination `name` at the receiver's `/name`, routed from `pattern`.
fn destination(rx: &Receiver, name: &str) -> String {
    format!(
        "  {name}:\n    type: http\n    baseUrl: {}\n    path: /{name}\n    timeoutMs: 3000\n",
        rx.url()
    )
}

/// Row 4: only `topic` and `payload` given; the schema fills in the rest.
pub async fn a_minimal_insert_gets_the_column_defaults() -> Outcome {
    let (url, store) = empty_db("acc_r4").await;
    let (code, out) = run_to_exit("database:\n  url: {db}\n", &url, &["migrate"]).await;
    assert_eq!(code, 0, "{out}");
    let (state, attempt, max, headers, seq): (String, i32, i32, serde_json::Value, Option<i64>) =
        sqlx::query_as(
            "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{}') \
             RETURNING state, attempt, max_attempts, headers, sequence",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!((state.as_str(), attempt, max), ("pending", 0, 5));
    assert_eq!(headers, serde_json::json!({}));
    assert!(seq.is_some(), "sequence filled");
    Ok(())
}

/// Row 5: a POST with the JSON payload and X-Message-Id / X-Topic / X-Attempt / X-Message-Key.
pub async fn http_delivery_carries_the_standard_headers() -> Outcome {
    let (_relay, rx, store) = start("acc_r5", ROUTE_ALL).await;
    let id = insert(&store, "order.created", Some("k-1")).await;
    let unkeyed = insert(&store, "order.created", None).await;
    wait_state(&store, id, "sent", 20).await;
    wait_state(&store, unkeyed, "sent", 20).await;
    let got = rx.to("/hooks");
    let d = got
        .iter()
        .find(|d| d.h("x-message-id") == Some(&id.to_string()))
        .expect("row delivered");
    assert_eq!(d.h("x-topic"), Some("order.created"));
    assert_eq!(d.h("x-attempt"), Some("0"));
    assert_eq!(d.h("x-message-key"), Some("k-1"));
    assert!(d
        .h("content-type")
        .unwrap_or("")
        .starts_with("application/json"));
    assert_eq!(d.body, serde_json::json!({"n": 1}));
    let u = got
        .iter()
        .find(|d| d.h("x-message-id") == Some(&unkeyed.to_string()))
        .unwrap();
    assert_eq!(u.h("x-message-key"), None, "no key, no X-Message-Key");
    Ok(())
}

/// Row 6: 202 and 204 complete the row; it is never sent again.
pub async fn any_2xx_completes_and_is_never_resent() -> Outcome {
    let (_relay, rx, store) = start("acc_r6", ROUTE_ALL).await;
    rx.script("/hooks", &[202, 204]);
    let a = insert(&store, "t.a", None).await;
    let b = insert(&store, "t.b", None).await;
    wait_state(&store, a, "sent", 20).await;
    wait_state(&store, b, "sent", 20).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.to("/hooks").len(), 2, "each row once");
    Ok(())
}

/// Row 7: 500 then 200 → two requests, sent; 302 → a failure, the redirect not followed.
pub async fn non_2xx_and_redirects_are_retried() -> Outcome {
    let (url, store) = empty_db("acc_r7").await;
    let rx = Receiver::start().await;
    let extra = format!(
        "{}{}routes:\n  - topicPattern: t.flaky\n    destination: flaky\n  - topicPattern: t.redirect\n    destination: redirect\n",
        destination(&rx, "flaky"),
        destination(&rx, "redirect")
    );
    let _relay = Relay::start(&format!("{}{extra}", base_config(&url, &rx.url()))).await;
    rx.script("/flaky", &[500, 200]);
    rx.script("/redirect", &[302, 200]);
    let flaky = insert(&store, "t.flaky", None).await;
    let redirect = insert(&store, "t.redirect", None).await;
    wait_state(&store, flaky, "sent", 20).await;
    wait_state(&store, redirect, "sent", 20).await;
    assert_eq!(rx.to("/flaky").len(), 2);
    assert_eq!(rx.to("/redirect").len(), 2, "302 failed once, then 200");
    assert!(
        rx.to("/redirected").is_empty(),
        "the redirect is not followed"
    );
    Ok(())
}

/// Row 8: after a failed attempt the row holds attempt 1, a future scheduled_at, the error,
/// and the failed counter moved.
pub async fn a_failed_attempt_is_booked_on_the_row_and_counted() -> Outcome {
    let (relay, rx, store) =
        start_outbox("acc_r8", &[("retryBaseDelayMs", "10000")], ROUTE_ALL).await;
    rx.script("/hooks", &[500]);
    let id = insert(&store, "t.fail", None).await;
    eventually("attempt 1", 20, || async {
        outbox_row(&store, id).await.1 == 1
    })
    .await;
    let (state, _, err) = outbox_row(&store, id).await;
    assert_eq!(state, "pending");
    assert!(
        err.as_deref().unwrap_or("").starts_with("HTTP 500"),
        "{err:?}"
    );
    let future: bool = sqlx::query_scalar("SELECT scheduled_at > now() FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(future, "scheduled_at is in the future");
    let failed = relay
        .metric("queuebox_outbox_messages_total{status=\"failed\"}")
        .await;
    assert_eq!(failed, 1.0);
    Ok(())
}

/// Row 9: with retryBaseDelayMs 1000 the gaps are ≈1 s, 2 s, 4 s (+0–25 %).
pub async fn retry_gaps_double_from_the_base_delay() -> Outcome {
    let (_relay, rx, store) =
        start_outbox("acc_r9", &[("retryBaseDelayMs", "1000")], ROUTE_ALL).await;
    rx.script("/hooks", &[500]);
    let id = insert(&store, "t.fail", None).await;
    eventually("four deliveries", 30, || async {
        rx.to("/hooks").len() >= 4
    })
    .await;
    let got = rx.to("/hooks");
    assert!(got
        .iter()
        .all(|d| d.h("x-message-id") == Some(&id.to_string())));
    for i in 0..3 {
        let gap = got[i + 1].at.duration_since(got[i].at).as_secs_f64();
        let exp = f64::from(1u32 << i);
        assert!(
            gap >= exp * 0.95 && gap <= exp * 1.25 + 0.5,
            "gap {} is {gap:.2} s, expected {exp} s + 0–25 %",
            i + 1
        );
    }
    Ok(())
}

/// Row 10: max_attempts = 2 failing forever → dead, attempt 2, three deliveries, counted.
pub async fn the_rows_max_attempts_is_its_dead_letter_ceiling() -> Outcome {
    let (relay, rx, store) = start("acc_r10", ROUTE_ALL).await;
    rx.script("/hooks", &[500]);
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t.x', '{}', 2) RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    wait_state(&store, id, "dead", 20).await;
    let (_, attempt, err) = outbox_row(&store, id).await;
    assert_eq!(attempt, 2);
    assert!(err.is_some(), "last_error set");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.to("/hooks").len(), 3);
    assert_eq!(
        relay
            .metric("queuebox_outbox_messages_total{status=\"dead\"}")
            .await,
        1.0
    );
    Ok(())
}

/// Row 12: a topic that matches no route is dead, and the error says so.
pub async fn a_topic_without_a_route_is_dead() -> Outcome {
    let (_relay, rx, store) = start(
        "acc_r12",
        "routes:\n  - topicPattern: 'order.*'\n    destination: rx\n",
    )
    .await;
    let id = insert(&store, "invoice.paid", None).await;
    wait_state(&store, id, "dead", 20).await;
    let err = outbox_row(&store, id).await.2.unwrap_or_default();
    assert!(err.to_lowercase().contains("no route"), "{err}");
    assert!(rx.deliveries().is_empty());
    Ok(())
}

/// Row 13: `*` is one segment, `**` any; the first matching route wins, once, and alone
/// (no fan-out to later matches); a topic no glob matches is dead.
pub async fn route_globs_match_whole_segments_and_the_first_route_wins() -> Outcome {
    let (url, store) = empty_db("acc_r13").await;
    let rx = Receiver::start().await;
    let extra = format!(
        "{}{}routes:\n  - topicPattern: 'order.*'\n    destination: one\n  - topicPattern: 'order.*'\n    destination: two\n  - topicPattern: 'order.**'\n    destination: two\n",
        destination(&rx, "one"),
        destination(&rx, "two")
    );
    let _relay = Relay::start(&format!("{}{extra}", base_config(&url, &rx.url()))).await;
    let created = insert(&store, "order.created", None).await;
    let added = insert(&store, "order.item.added", None).await;
    let bare = insert(&store, "order", None).await;
    wait_state(&store, created, "sent", 20).await;
    wait_state(&store, added, "sent", 20).await;
    eventually("'order' settled", 20, || async {
        outbox_row(&store, bare).await.0 != "pending"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = |path: &str| -> Vec<String> {
        rx.to(path)
            .iter()
            .filter_map(|d| d.h("x-message-id").map(String::from))
            .collect()
    };
    assert_eq!(
        ids("/one"),
        vec![created.to_string()],
        "order.* takes order.created, once"
    );
    assert!(
        ids("/two").contains(&added.to_string()),
        "order.** takes order.item.added"
    );
    assert!(
        !ids("/one").contains(&bare.to_string()),
        "order.* does not take 'order'"
    );
    // The first matching route wins, alone: the second `order.*` route (and `order.**`,
    // which does not match it) never sees order.created; a fan-out to every match would.
    assert!(
        !ids("/two").contains(&created.to_string()),
        "order.created goes to the first matching route only, not also to /two"
    );
    assert_eq!(
        ids("/two"),
        vec![added.to_string()],
        "/two gets order.item.added, once, and nothing else"
    );
    // 'order' matches neither `order.*` nor `order.**`: no route, so it is dead and
    // delivered nowhere.
    let (state, _, error) = outbox_row(&store, bare).await;
    assert_eq!(state, "dead", "'order' matches no route: {error:?}");
    assert!(
        error
            .unwrap_or_default()
            .to_lowercase()
            .contains("no route"),
        "'order' is dead for want of a route"
    );
    assert!(
        rx.deliveries()
            .iter()
            .all(|d| d.h("x-message-id") != Some(bare.to_string().as_str())),
        "'order' is delivered nowhere"
    );
    Ok(())
}

/// Row 14: scheduled_at = now + 3 s is not delivered before 3 s, and is after.
pub async fn a_row_is_not_delivered_before_its_scheduled_at() -> Outcome {
    let (_relay, rx, store) = start("acc_r14", ROUTE_ALL).await;
    let t0 = Instant::now();
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, scheduled_at) VALUES ('t.later', '{}', now() + interval '3 seconds') RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    wait_state(&store, id, "sent", 20).await;
    let at = rx.to("/hooks")[0].at.duration_since(t0);
    assert!(at >= Duration::from_millis(2900), "delivered after {at:?}");
    assert!(at <= Duration::from_secs(6), "delivered after {at:?}");
    Ok(())
}

/// Row 15: a `processing` row whose lease ran out is delivered, attempt still 0, counted.
pub async fn an_expired_lease_is_reclaimed_without_spending_an_attempt() -> Outcome {
    let (relay, rx, store) = start("acc_r15", ROUTE_ALL).await;
    let id: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, state, claim_token, claimed_at, lease_expires_at) \
         VALUES ('t.crashed', '{}', 'processing', gen_random_uuid(), now() - interval '1 minute', now() - interval '1 second') RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    wait_state(&store, id, "sent", 30).await;
    assert_eq!(outbox_row(&store, id).await.1, 0, "attempt stays 0");
    assert_eq!(rx.to("/hooks")[0].h("x-attempt"), Some("0"));
    eventually("reclaimed counter", 10, || async {
        relay
            .metric("queuebox_outbox_messages_reclaimed_total")
            .await
            >= 1.0
    })
    .await;
    Ok(())
}

/// Row 17: 20 rows, a slow receiver, concurrency 4 → never more than 4 requests at once.
pub async fn concurrency_caps_the_requests_in_flight() -> Outcome {
    let (_relay, rx, store) = start_outbox("acc_r17", &[("concurrency", "4")], ROUTE_ALL).await;
    rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_millis(300));
    for _ in 0..20 {
        insert(&store, "t.slow", None).await;
    }
    eventually("20 sent", 40, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 20
    })
    .await;
    let max = rx.max_in_flight.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max <= 4, "{max} requests at once");
    assert!(max >= 2, "the limit is used ({max} at once)");
    Ok(())
}

/// Row 18: rows of one key arrive in insert order, a failing first row holds the rest back, a
/// dead first row lets them go; two replicas keep per-key order over 200 rows and 10 keys.
pub async fn rows_of_one_key_arrive_in_insert_order() -> Outcome {
    let (url, store) = empty_db("acc_r18").await;
    let rx = Receiver::start().await;
    let extra = format!(
        "{}routes:\n  - topicPattern: t.dead\n    destination: dead\n  - topicPattern: '**'\n    destination: rx\n",
        destination(&rx, "dead")
    );
    let yaml = format!(
        "{}{extra}",
        outbox_setting(base_config(&url, &rx.url()), "concurrency", "8")
    );
    let _a = Relay::start(&yaml).await;
    rx.script("/hooks", &[500, 200]);
    rx.script("/dead", &[500]);
    // Three rows of key k in one transaction; the first fails once.
    let mut tx = store.pool().begin().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..3 {
        let id: uuid::Uuid = sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload) VALUES ('t.k', 'k', $1) RETURNING id",
        )
        .bind(serde_json::json!({ "n": n }))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        ids.push(id.to_string());
    }
    tx.commit().await.unwrap();
    eventually("three sent", 20, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE key = 'k' AND state = 'sent'",
        )
        .await
            == 3
    })
    .await;
    let order: Vec<String> = rx
        .to("/hooks")
        .iter()
        .filter_map(|d| d.h("x-message-id").map(String::from))
        .collect();
    assert_eq!(
        order,
        vec![
            ids[0].clone(),
            ids[0].clone(),
            ids[1].clone(),
            ids[2].clone()
        ],
        "row 1 failed, was retried, and only then rows 2 and 3"
    );
    // A dead first row lets the next row of its key go.
    let first: uuid::Uuid = sqlx::query_scalar("INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ('t.dead', 'd', '{}', 0) RETURNING id")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let second = insert(&store, "t.after", Some("d")).await;
    wait_state(&store, first, "dead", 20).await;
    wait_state(&store, second, "sent", 20).await;
    // Two replicas, 200 rows over 10 keys.
    let _b = Relay::start(&yaml).await;
    let mut tx = store.pool().begin().await.unwrap();
    for i in 0..200 {
        sqlx::query("INSERT INTO outbox (topic, key, payload) VALUES ('t.many', $1, $2)")
            .bind(format!("m{}", i % 10))
            .bind(serde_json::json!({ "n": i }))
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    eventually("200 sent", 60, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE topic = 't.many' AND state = 'sent'",
        )
        .await
            == 200
    })
    .await;
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    for d in rx
        .to("/hooks")
        .iter()
        .filter(|d| d.h("x-topic") == Some("t.many"))
    {
        let key = d.h("x-message-key").unwrap().to_string();
        let n = d.body["n"].as_i64().unwrap();
        let prev = last.insert(key.clone(), n).unwrap_or(-1);
        assert!(n > prev, "key {key}: {n} arrived after {prev}");
    }
    Ok(())
}

/// Row 19: five rows without a key are published at the same time.
pub async fn rows_without_a_key_are_published_concurrently() -> Outcome {
    let (_relay, rx, store) = start("acc_r19", ROUTE_ALL).await;
    rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_millis(1500));
    let mut tx = store.pool().begin().await.unwrap();
    for _ in 0..5 {
        sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('t.free', '{}')")
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    eventually("5 sent", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 5
    })
    .await;
    let max = rx.max_in_flight.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(max, 5, "all five in flight at once");
    Ok(())
}

/// Row 20: row A inserted first but committed last is not waited for: B goes first.
pub async fn rows_are_claimed_in_commit_order() -> Outcome {
    let (_relay, rx, store) = start("acc_r20", ROUTE_ALL).await;
    let mut tx_a = store.pool().begin().await.unwrap();
    let a: uuid::Uuid =
        sqlx::query_scalar("INSERT INTO outbox (topic, payload) VALUES ('t.a', '{}') RETURNING id")
            .fetch_one(&mut *tx_a)
            .await
            .unwrap();
    let b = insert(&store, "t.b", None).await;
    wait_state(&store, b, "sent", 20).await;
    tx_a.commit().await.unwrap();
    wait_state(&store, a, "sent", 20).await;
    let order: Vec<String> = rx
        .to("/hooks")
        .iter()
        .filter_map(|d| d.h("x-message-id").map(String::from))
        .collect();
    assert_eq!(order, vec![b.to_string(), a.to_string()]);
    Ok(())
}

/// Row 16: while the first relay publishes, another owner takes the row (new token, lease in
/// the past) and a second relay delivers it; the first relay's write matches no row and is
/// counted as a lost claim; the row ends as the second relay left it.
pub async fn a_write_after_losing_the_claim_changes_nothing_and_is_counted() -> Outcome {
    let (url, store) = empty_db("acc_r16").await;
    let rx = Receiver::start().await;
    let yaml = format!("{}{ROUTE_ALL}", base_config(&url, &rx.url()));
    let first = Relay::start(&yaml).await;
    rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_secs(3));
    let id = insert(&store, "t.fenced", None).await;
    eventually("the first relay publishing", 20, || async {
        rx.to("/hooks").len() == 1
    })
    .await;
    sqlx::query(
        "UPDATE outbox SET claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(id)
    .execute(store.pool())
    .await
    .unwrap();
    let _second = Relay::start(&yaml).await;
    wait_state(&store, id, "sent", 20).await;
    let lost = "queuebox_claims_lost_total{component=\"outbox\"}";
    eventually("the first relay's lost claim counted", 20, || async {
        first.metric(lost).await >= 1.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(
        outbox_row(&store, id).await.0,
        "sent",
        "the second relay's outcome stands"
    );
    assert_eq!(outbox_row(&store, id).await.1, 0);
    Ok(())
}
