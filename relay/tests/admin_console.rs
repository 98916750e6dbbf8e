//! The console's admin endpoints on the real `queuebox` binary, rows set up in PostgreSQL:
//! `GET /admin/overview` counts by state, `GET /admin/dead/{table}` with filters,
//! `GET /admin/journey`, `POST /admin/inbox/{id}/requeue` and `DELETE /admin/inbox/{id}`
//! (dead rows only), and the bad requests each names. The page itself is driven in Chromium
//! by tests/console (test part 55-console).

mod common;

use common::*;
use serde_json::Value;

const ADMIN: &str = "
admin:
  enabled: true
  insecure: true
sources:
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyHeader: X-Job-Id
";

async fn json(relay: &Relay, path: &str) -> (u16, Value) {
    let (status, body) = relay.get(path).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

async fn exec(store: &queuebox_core::store::postgres::PgStore, sql: &str) {
    sqlx::query(sql).execute(store.pool()).await.unwrap();
}

async fn start() -> (Relay, queuebox_core::store::postgres::PgStore) {
    let (url, store) = fresh_db("adminconsole").await;
    // The outbox poller is off: the rows the tests insert keep the states they are given (with
    // it on, the relay would claim the lease-expired row and find no route for it).
    let config =
        base_config(&url, "http://127.0.0.1:9").replace("outbox:\n", "outbox:\n  enabled: false\n");
    let relay = Relay::start(&format!("{config}{ADMIN}")).await;
    (relay, store)
}

#[tokio::test]
async fn overview_counts_each_state_per_topic_and_source() {
    let (relay, store) = start().await;
    exec(
        &store,
        "INSERT INTO outbox (topic, payload, state, attempt, scheduled_at, lease_expires_at, created_at) VALUES
           ('a', '{}', 'pending', 0, now() + interval '1 hour', NULL, now() - interval '90 seconds'),
           ('a', '{}', 'pending', 2, now() + interval '1 hour', NULL, now()),
           ('a', '{}', 'processing', 0, now(), now() - interval '1 second', now()),
           ('a', '{}', 'processing', 0, now(), now() + interval '1 hour', now()),
           ('a', '{}', 'dead', 3, now(), NULL, now()),
           ('a', '{}', 'sent', 1, now(), NULL, now()),
           ('b', '{}', 'sent', 0, now(), NULL, now())",
    )
    .await;
    exec(
        &store,
        "INSERT INTO inbox (source, idempotency_key, payload, consumption, state) VALUES
           ('jobs', 'k1', '{}', 'pull', 'pending'), ('jobs', 'k2', '{}', 'pull', 'dead'),
           ('jobs', 'k3', '{}', 'pull', 'processed')",
    )
    .await;
    let (status, body) = json(&relay, "/admin/overview").await;
    assert_eq!(status, 200, "{body}");
    let rows = body["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{body}");
    let a = &rows[0];
    assert_eq!(
        (a["table"].as_str(), a["topicOrSource"].as_str()),
        (Some("outbox"), Some("a"))
    );
    for (field, want) in [
        ("pending", 1),
        ("retrying", 1),
        ("processing", 2),
        ("leaseExpired", 1),
        ("dead", 1),
    ] {
        assert_eq!(a[field], want, "{field}: {a}");
    }
    assert!(a["nextLeaseExpiry"].is_string(), "{a}");
    let age = a["oldestPendingAge"].as_f64().unwrap();
    assert!((89.0..150.0).contains(&age), "oldest pending age {age}");
    assert_eq!(a["doneLast5Min"], 1, "{a}");
    // Topic b has only a row sent just now: its line shows that throughput and nothing waiting.
    let b = &rows[1];
    assert_eq!(b["topicOrSource"], "b", "{b}");
    for (field, want) in [
        ("pending", 0),
        ("processing", 0),
        ("dead", 0),
        ("doneLast5Min", 1),
    ] {
        assert_eq!(b[field], want, "{field}: {b}");
    }
    let jobs = &rows[2];
    assert_eq!(
        (jobs["table"].as_str(), jobs["consumption"].as_str()),
        (Some("inbox"), Some("pull"))
    );
    assert_eq!(
        (jobs["pending"].as_i64(), jobs["dead"].as_i64()),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn dead_list_filters_by_topic_and_source_and_refuses_a_topic_for_inbox_rows() {
    let (relay, store) = start().await;
    exec(
        &store,
        r#"INSERT INTO outbox (topic, payload, headers, state, attempt, last_error) VALUES
             ('a', '{}', '{"x-source": "s1"}', 'dead', 2, 'boom a'),
             ('b', '{}', '{"x-source": "s2"}', 'dead', 2, 'boom b'),
             ('b', '{}', '{"x-source": "s2"}', 'sent', 0, NULL)"#,
    )
    .await;
    let names = |v: &Value| -> Vec<String> {
        let mut n: Vec<String> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["topicOrSource"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(
        names(&json(&relay, "/admin/dead/outbox").await.1),
        ["a", "b"]
    );
    assert_eq!(
        names(&json(&relay, "/admin/dead/outbox?topic=a").await.1),
        ["a"]
    );
    assert_eq!(
        names(&json(&relay, "/admin/dead/outbox?source=s2").await.1),
        ["b"]
    );
    assert_eq!(
        names(&json(&relay, "/admin/dead/outbox?source=s2&topic=a").await.1),
        Vec::<String>::new()
    );
    let (_, one) = json(&relay, "/admin/dead/outbox?topic=a").await;
    assert_eq!(one["rows"][0]["attempt"], 2);
    assert_eq!(one["rows"][0]["lastError"], "boom a");
    let (status, body) = json(&relay, "/admin/dead/inbox?topic=a").await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("topic"), "{body}");
}

#[tokio::test]
async fn journey_names_a_bad_query_and_a_missing_message() {
    let (relay, store) = start().await;
    exec(
        &store,
        "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('jobs', 'k:1', '{\"n\": 1}', 'pull')",
    )
    .await;
    let (status, body) = json(&relay, "/admin/journey?q=jobs:k:1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["inbox"]["key"], "k:1", "the key may hold colons");
    assert_eq!(body["inbox"]["payload"]["n"], 1);
    let (status, body) = json(&relay, "/admin/journey?q=nonsense").await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().starts_with("q: "), "{body}");
    let (status, body) = json(&relay, "/admin/journey?q=jobs:missing").await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn inbox_requeue_and_delete_touch_dead_rows_only() {
    let (relay, store) = start().await;
    exec(
        &store,
        "INSERT INTO inbox (source, idempotency_key, payload, consumption, state, attempt, last_error) VALUES
           ('jobs', 'dead-1', '{}', 'pull', 'dead', 3, 'gave up'),
           ('jobs', 'dead-2', '{}', 'pull', 'dead', 3, 'gave up'),
           ('jobs', 'live', '{}', 'pull', 'pending', 0, NULL)",
    )
    .await;
    let id = |key: &'static str| {
        let store = &store;
        async move {
            sqlx::query_scalar::<_, String>(&format!(
                "SELECT id::text FROM inbox WHERE idempotency_key = '{key}'"
            ))
            .fetch_one(store.pool())
            .await
            .unwrap()
        }
    };
    let (dead1, dead2, live) = (id("dead-1").await, id("dead-2").await, id("live").await);

    let (s, b) = relay
        .post(&format!("/admin/inbox/{live}/requeue"), "", &[])
        .await;
    assert_eq!(
        (s, b.as_str()),
        (200, r#"{"requeued":0}"#),
        "a live row is not touched"
    );
    let (s, b) = relay
        .post(&format!("/admin/inbox/{dead1}/requeue"), "", &[])
        .await;
    assert_eq!((s, b.as_str()), (200, r#"{"requeued":1}"#));
    let state: (String, i32, Option<String>) = sqlx::query_as(&format!(
        "SELECT state, attempt, last_error FROM inbox WHERE id = '{dead1}'"
    ))
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(state, ("pending".into(), 0, None));

    let client = reqwest::Client::new();
    let delete = |id: String| {
        let client = client.clone();
        let url = relay.url(&format!("/admin/inbox/{id}"));
        async move {
            client
                .delete(url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        delete(live.clone()).await,
        r#"{"deleted":0}"#,
        "a live row is kept"
    );
    assert_eq!(delete(dead2).await, r#"{"deleted":1}"#);
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM inbox").await,
        2,
        "dead-1 (requeued) and live remain"
    );
}

/// Every admin API route is behind `admin.auth`: without the key each answers 401 and does
/// nothing (the dead row stays); with it each reaches its handler (anything but 401). The
/// console's page and its auth-scheme probe load without credentials, since the page is
/// what asks for them.
#[tokio::test]
async fn every_admin_api_route_needs_the_key_and_the_console_page_does_not() {
    let (url, store) = fresh_db("adminauth").await;
    let config =
        base_config(&url, "http://127.0.0.1:9").replace("outbox:\n", "outbox:\n  enabled: false\n");
    let relay = Relay::start(&format!(
        "{config}admin:
  enabled: true
  auth:
    type: api-key
    key: admin-key-2
sources:
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyHeader: X-Job-Id
"
    ))
    .await;
    let dead = "00000000-0000-7000-8000-000000000001";
    exec(
        &store,
        &format!(
            "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state)
             VALUES ('{dead}', 'jobs', 'k1', '{{}}', 'pull', 'dead')"
        ),
    )
    .await;
    let routes: [(&str, String, &str); 13] = [
        ("GET", "/admin/dead/inbox".into(), ""),
        ("POST", "/admin/replay".into(), r#"{"topic":"t"}"#),
        ("POST", format!("/admin/inbox/{dead}/replay"), "{}"),
        ("DELETE", format!("/admin/outbox/{dead}"), ""),
        ("POST", format!("/admin/inbox/{dead}/requeue"), ""),
        ("DELETE", format!("/admin/inbox/{dead}"), ""),
        ("POST", "/admin/cancel/inbox".into(), r#"{"source":"jobs"}"#),
        ("GET", "/admin/paused".into(), ""),
        ("POST", "/admin/pause/source".into(), r#"{"name":"jobs"}"#),
        ("POST", "/admin/resume/source".into(), r#"{"name":"jobs"}"#),
        (
            "POST",
            "/admin/transform/test".into(),
            r#"{"expression":"1","payload":{}}"#,
        ),
        ("GET", "/admin/overview".into(), ""),
        ("GET", format!("/admin/journey?id={dead}"), ""),
    ];
    let client = reqwest::Client::new();
    let send = |method: &str, path: &str, body: &str, key: Option<&str>| {
        let mut req = client
            .request(method.parse().unwrap(), relay.url(path))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            req = req.header("X-API-Key", k);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for (method, path, body) in &routes {
        for key in [None, Some("wrong-key")] {
            assert_eq!(
                send(method, path, body, key).await,
                401,
                "{method} {path} with key {key:?}"
            );
        }
    }
    let (state,): (String,) = sqlx::query_as("SELECT state FROM inbox WHERE id = $1::uuid")
        .bind(dead)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(state, "dead", "a refused request changed nothing");
    for (method, path, body) in &routes {
        let status = send(method, path, body, Some("admin-key-2")).await;
        assert!(
            status != 401 && status != 0,
            "{method} {path} with the key answered {status}"
        );
    }
    assert_eq!(relay.get("/console").await.0, 200);
    assert_eq!(relay.get("/console/auth").await.0, 200);
}
