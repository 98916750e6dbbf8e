//! Rows 55–75: health, the management port, metrics, admin, configuration, start-up and
//! shutdown, the NOTIFY wake-up.

use std::time::{Duration, Instant};

use super::kit::*;
use super::{NotRun, Outcome};

/// Row 55: live is 200 even with the database down; ready (and its `/health` alias) is 200
/// with everything up and 503 with the database down; disabled loops keep ready 200.
pub async fn health_answers_live_and_ready() -> Outcome {
    let cluster = Cluster::new(free_port(), "acc-r55");
    cluster.script_async("start").await;
    let rx = Receiver::start().await;
    let yaml = base_config(&cluster.url(), &rx.url()).replace(
        "  startupTimeoutMs: 60000\n",
        "  startupTimeoutMs: 60000\n  connectionTimeoutMs: 1000\n",
    );
    let relay = Relay::start(&yaml).await;
    eventually("ready", 20, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;
    assert_eq!(relay.get("/health").await.0, 200);
    assert_eq!(relay.get("/health/live").await.0, 200);
    cluster.script_async("stop").await;
    eventually("not ready with the database down", 30, || async {
        relay.get("/health/ready").await.0 == 503
    })
    .await;
    assert_eq!(
        relay.get("/health").await.0,
        503,
        "/health is ready's alias"
    );
    assert_eq!(
        relay.get("/health/live").await.0,
        200,
        "live while the database is down"
    );
    cluster.script_async("start").await;
    eventually("ready again", 30, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;
    // Disabled relays and retention keep readiness.
    let (url, _store) = empty_db("acc_r55").await;
    let disabled = base_config(&url, &rx.url())
        .replacen("  relay:\n", "  relay:\n    enabled: false\n", 1)
        .replacen("outbox:\n", "outbox:\n  enabled: false\n", 1);
    let quiet = Relay::start(&disabled).await;
    eventually("ready with the loops disabled", 20, || async {
        quiet.get("/health/ready").await.0 == 200
    })
    .await;
    Ok(())
}

/// Row 56: with `managementPort`, metrics and health answer there and 404 on the main port.
pub async fn the_management_port_serves_metrics_and_health() -> Outcome {
    let (url, _store) = empty_db("acc_r56").await;
    let rx = Receiver::start().await;
    let mgmt = free_port();
    let yaml = base_config(&url, &rx.url()).replacen(
        "  bindAddress: 127.0.0.1\n",
        &format!("  bindAddress: 127.0.0.1\n  managementPort: {mgmt}\n"),
        1,
    );
    let relay = Relay::start(&yaml).await;
    let at = |path: &str| {
        let url = format!("http://127.0.0.1:{mgmt}{path}");
        async move {
            match reqwest::get(url).await {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(_) => (0, String::new()),
            }
        }
    };
    eventually("management port ready", 20, || async {
        at("/health/ready").await.0 == 200
    })
    .await;
    let (s, text) = at("/metrics").await;
    assert_eq!(s, 200);
    assert!(text.contains("queuebox_"), "metrics on the management port");
    assert_eq!(relay.get("/metrics").await.0, 404);
    assert_eq!(relay.get("/health/ready").await.0, 404);
    Ok(())
}

/// Row 58: an old pending row moves `queuebox_outbox_oldest_pending_age_seconds` above 0; an
/// empty table brings it back to 0.
pub async fn the_oldest_pending_age_gauge_follows_the_table() -> Outcome {
    let (url, store) = empty_db("acc_r58").await;
    let rx = Receiver::start().await;
    rx.script("/hooks", &[500]);
    let mut yaml = base_config(&url, &rx.url());
    yaml = outbox_setting(yaml, "retryBaseDelayMs", "60000");
    yaml = outbox_setting(yaml, "pendingGaugeIntervalMs", "100");
    let relay = Relay::start(&format!("{yaml}{ROUTE_ALL}")).await;
    let gauge = "queuebox_outbox_oldest_pending_age_seconds";
    sqlx::query("INSERT INTO outbox (topic, payload, created_at) VALUES ('t.old', '{}', now() - interval '1 hour')")
        .execute(store.pool())
        .await
        .unwrap();
    eventually("the gauge shows the old row", 20, || async {
        relay.metric(gauge).await > 3000.0
    })
    .await;
    sqlx::query("DELETE FROM outbox")
        .execute(store.pool())
        .await
        .unwrap();
    eventually("the gauge back at 0", 20, || async {
        let (_, text) = relay.get("/metrics").await;
        text.lines().any(|l| {
            l.strip_prefix(gauge)
                .and_then(|v| v.trim().parse::<f64>().ok())
                == Some(0.0)
        })
    })
    .await;
    Ok(())
}

/// Row 59: without `admin.enabled` the admin routes do not exist; enabled without auth is
/// refused at start-up unless `insecure: true`.
pub async fn admin_routes_do_not_exist_unless_enabled() -> Outcome {
    let (relay, _rx, _store) = start("acc_r59", "").await;
    assert_eq!(
        relay.post("/admin/replay", r#"{"topic":"x"}"#, &[]).await.0,
        404
    );
    let (url, _) = empty_db("acc_r59b").await;
    let yaml = "database:\n  url: {db}\nadmin:\n  enabled: true\n";
    let (code, out) = run_to_exit(yaml, &url, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("admin"), "the error names admin: {out}");
    let insecure = format!(
        "{}admin:\n  enabled: true\n  insecure: true\n",
        base_config(&url, "http://127.0.0.1:9")
    );
    let open = Relay::start(&insecure).await;
    assert_eq!(
        open.post("/admin/replay", "{}", &[]).await.0,
        400,
        "the route exists"
    );
    Ok(())
}

/// Row 61: `{}` → 400, no credentials → 401, a topic → 200 with the count; processing rows
/// are untouched, moved rows are pending with attempt 0.
pub async fn admin_replay_moves_sent_rows_back_to_pending() -> Outcome {
    let (url, store) = empty_db("acc_r61").await;
    let rx = Receiver::start().await;
    let yaml = base_config(&url, &rx.url()).replacen("outbox:\n", "outbox:\n  enabled: false\n", 1)
        + "admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: adm1n\n";
    let relay = Relay::start(&yaml).await;
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state, attempt) VALUES \
         ('orders.created', '{}', 'sent', 3), ('orders.created', '{}', 'sent', 1), \
         ('orders.other', '{}', 'sent', 1)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state, claim_token, claimed_at, lease_expires_at) VALUES \
         ('orders.created', '{}', 'processing', gen_random_uuid(), now(), now() + interval '1 hour')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let auth = [("Authorization", "Bearer adm1n")];
    assert_eq!(relay.post("/admin/replay", "{}", &auth).await.0, 400);
    assert_eq!(
        relay
            .post("/admin/replay", r#"{"topic":"orders.created"}"#, &[])
            .await
            .0,
        401
    );
    let (s, b) = relay
        .post("/admin/replay", r#"{"topic":"orders.created"}"#, &auth)
        .await;
    assert_eq!((s, b.as_str()), (200, r#"{"moved":2}"#));
    let moved = scalar_i64(&store, "SELECT count(*) FROM outbox WHERE topic = 'orders.created' AND state = 'pending' AND attempt = 0").await;
    assert_eq!(moved, 2);
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE state = 'processing'"
        )
        .await,
        1
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE topic = 'orders.other' AND state = 'sent'"
        )
        .await,
        1
    );
    Ok(())
}

/// Row 66: unknown keys fail with a hint, in files and in the environment; foreign
/// `QUEUEBOX_*_SERVICE_HOST` variables are ignored; several mistakes are one error; a
/// destination needs a type, a source does not.
pub async fn config_mistakes_are_refused_naming_the_key() -> Outcome {
    let (url, _) = empty_db("acc_r66").await;
    let check = |yaml: String, env: Vec<(&'static str, &'static str)>| {
        let url = url.clone();
        async move {
            let config = write_config(&yaml.replace("{db}", &url));
            let mut cmd = relay_command(config.path(), &["check-config"]);
            for (k, v) in env {
                cmd.env(k, v);
            }
            let out = cmd.output().await.unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.code().unwrap_or(-1), text)
        }
    };
    let base = "database:\n  url: {db}\n".to_string();
    let (code, out) = check(format!("{base}outbox:\n  batchSzie: 5\n"), vec![]).await;
    assert_ne!(code, 0);
    assert!(
        out.contains("outbox.batchSzie") && out.contains("did you mean batchSize"),
        "{out}"
    );
    let (code, out) = check(base.clone(), vec![("QUEUEBOX_OUTBOX_BATCHSZIE", "5")]).await;
    assert_ne!(code, 0, "an unknown variable fails: {out}");
    assert!(out.contains("QUEUEBOX_OUTBOX_BATCHSZIE"), "{out}");
    let (code, out) = check(base.clone(), vec![("QUEUEBOX_DB_SERVICE_HOST", "10.0.0.1")]).await;
    assert_eq!(code, 0, "a Kubernetes service variable is ignored: {out}");
    let three =
        format!("{base}outbox:\n  batchSzie: 5\n  pollIntervalMz: 1\ninbox:\n  maxBodyBites: 1\n");
    let (code, out) = check(three, vec![]).await;
    assert_ne!(code, 0);
    for key in ["batchSzie", "pollIntervalMz", "maxBodyBites"] {
        assert!(out.contains(key), "{key} listed: {out}");
    }
    let untyped = format!("{base}destinations:\n  d:\n    baseUrl: http://x\n");
    let (code, out) = check(untyped, vec![]).await;
    assert_ne!(code, 0, "a destination without type: {out}");
    assert!(out.contains("destinations.d"), "{out}");
    let source = format!("{base}sources:\n  s:\n    path: /s\n    topic: s\n");
    let (code, out) = check(source, vec![]).await;
    assert_eq!(code, 0, "a source without type is http: {out}");
    assert!(out.contains("type: http"), "{out}");
    Ok(())
}

/// Row 69: ftp, credentials in the URL, `..` paths and (with blockPrivateAddresses) a
/// loopback host are refused at start-up, naming the destination.
pub async fn bad_outbound_urls_are_refused_at_startup() -> Outcome {
    let (url, _) = empty_db("acc_r69").await;
    for (base_url, block) in [
        ("ftp://x", false),
        ("http://user:pw@example.com", false),
        ("http://example.com/../x", false),
        ("http://127.0.0.1:9", true),
    ] {
        let yaml = format!(
            "database:\n  url: {{db}}\nhttp:\n  blockPrivateAddresses: {block}\ndestinations:\n  hook:\n    type: http\n    baseUrl: '{base_url}'\n"
        );
        let (code, out) = run_to_exit(&yaml, &url, &["run"]).await;
        assert_ne!(code, 0, "{base_url} accepted: {out}");
        assert!(
            out.contains("destinations.hook"),
            "{base_url}: the error names the destination: {out}"
        );
        assert!(
            !out.contains("user:pw"),
            "the credentials are not echoed: {out}"
        );
    }
    Ok(())
}

/// Row 75 (a change-data-capture wake-up is optional; QueueBox wakes the
/// outbox relay with LISTEN/NOTIFY instead): with a 10 s poll interval an inserted row is
/// delivered well within a second; and with the wake-up gone (its trigger dropped, the
/// reference's "capture stopped") polling still delivers, within a poll interval.
pub async fn an_insert_wakes_the_outbox_relay_before_the_poll_interval() -> Outcome {
    let (url, store) = empty_db("acc_r75").await;
    let rx = Receiver::start().await;
    let yaml = outbox_setting(base_config(&url, &rx.url()), "pollIntervalMs", "10000");
    let mut relay = Relay::start(&format!("{yaml}{ROUTE_ALL}")).await;
    // Past the first poll after start-up, so only a wake-up can explain a fast delivery.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t0 = Instant::now();
    insert(&store, "t.now", None).await;
    eventually("delivered", 15, || async { rx.to("/hooks").len() == 1 }).await;
    let took = rx.to("/hooks")[0].at.duration_since(t0);
    assert!(
        took < Duration::from_secs(2),
        "delivered after {took:?} with a 10 s poll interval"
    );
    // No wake-up any more: the trigger that notifies is gone. A relay polling every second
    // still delivers a new row, within about one poll interval.
    relay.kill();
    let _ = relay.child.wait().await;
    sqlx::query("DROP TRIGGER trg_outbox_notify ON outbox")
        .execute(store.pool())
        .await
        .unwrap();
    // Its LISTEN session (the first relay's gone first): the wake-up it sends when it
    // subscribes (for rows inserted while nobody listened) must be over before the insert.
    let listening = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'";
    eventually("the first relay's LISTEN session gone", 10, || async {
        scalar_i64(&store, listening).await == 0
    })
    .await;
    let yaml = outbox_setting(base_config(&url, &rx.url()), "pollIntervalMs", "1000");
    let _polling = Relay::start(&format!("{yaml}{ROUTE_ALL}")).await;
    eventually("the relay listening", 10, || async {
        scalar_i64(&store, listening).await >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t0 = Instant::now();
    insert(&store, "t.polled", None).await;
    eventually("delivered by polling, without a wake-up", 10, || async {
        rx.to("/hooks").len() == 2
    })
    .await;
    let took = rx.to("/hooks")[1].at.duration_since(t0);
    assert!(
        took < Duration::from_millis(2500),
        "delivered after {took:?} with a 1 s poll interval and no wake-up"
    );
    Ok(())
}

/// Row 57: after traffic the scrape holds every `queuebox_*` family of §9 with its labels,
/// and `queuebox{version=…} 1`; the error families count what happened: an outbox row
/// published but not markable sent (a trigger refuses the mark) counts
/// `queuebox_outbox_process_errors_total`, a source transform that throws and an insert the
/// database refuses count `queuebox_inbox_rejections_total` with `transform_failed` and
/// `storage_failed`, and a header filter counts `queuebox_inbox_filtered_total{source}`. Not
/// here: the families whose traffic other rows make and check: transform failures (22), lost
/// claims (16), relay errors (44).
pub async fn every_metric_family_appears_after_traffic() -> Outcome {
    let (url, store) = empty_db("acc_r57").await;
    let rx = Receiver::start().await;
    rx.script("/hooks", &[500, 200]);
    let yaml = outbox_setting(base_config(&url, &rx.url()), "pendingGaugeIntervalMs", "100")
        .replacen("  relay:\n", "  relay:\n    pendingGaugeIntervalMs: 100\n", 1)
        + "retention:\n  enabled: true\n  outbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n  inbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n"
        + "routes:\n  - topicPattern: '**'\n    destination: rx\nsources:\n  hooks:\n    path: /hooks\n    idempotencyKeyPath: $.id\n    topic: hooked\n"
        + "  shaped:\n    path: /shaped\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '$error(\"no\")'\n"
        + "  tenants:\n    path: /tenants\n    consumption: pull\n    idempotencyKeyPath: $.id\n    filter:\n      require:\n        - header: x-tenant\n          equals: acme\n";
    let relay = Relay::start(&yaml).await;
    assert_eq!(
        relay.post("/inbox/hooks", r#"{"id":"m1"}"#, &[]).await.0,
        202
    );
    assert_eq!(
        relay.post("/inbox/hooks", r#"{"id":"m1"}"#, &[]).await.0,
        200
    );
    assert_eq!(
        relay.post("/inbox/hooks", r#"{"nokey":1}"#, &[]).await.0,
        400
    );
    // A row whose claim expired, for the reclaim counter.
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state, claim_token, claimed_at, lease_expires_at) \
         VALUES ('t.crashed', '{}', 'processing', gen_random_uuid(), now(), now() - interval '1 second')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    eventually("both delivered, one after a failure", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 2
    })
    .await;
    // The error traffic: a throwing source transform (422), a filtered message (202
    // filtered), an insert the database refuses (500), and a row delivered whose sent mark
    // the database refuses (it stays claimed and comes back after its lease).
    assert_eq!(
        relay.post("/inbox/shaped", r#"{"id":"s1"}"#, &[]).await.0,
        422
    );
    let (code, body) = relay.post("/inbox/tenants", r#"{"id":"t1"}"#, &[]).await;
    assert_eq!((code, body.as_str()), (202, r#"{"status":"filtered"}"#));
    refuse_inserts(&store, "inbox").await;
    assert_eq!(
        relay.post("/inbox/hooks", r#"{"id":"m2"}"#, &[]).await.0,
        500
    );
    allow_inserts(&store, "inbox").await;
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_mark() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no sent mark'; END $$;
         CREATE TRIGGER refuse_mark BEFORE UPDATE ON outbox FOR EACH ROW
           WHEN (NEW.state = 'sent' AND NEW.topic = 't.unmarkable') EXECUTE FUNCTION refuse_mark();
         INSERT INTO outbox (topic, payload) VALUES ('t.unmarkable', '{}');",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for series in [
        "queuebox_outbox_process_errors_total",
        "queuebox_inbox_rejections_total{reason=\"transform_failed\"}",
        "queuebox_inbox_rejections_total{reason=\"storage_failed\"}",
        "queuebox_inbox_filtered_total{source=\"tenants\"}",
    ] {
        eventually(&format!("{series} counted"), 20, || async {
            relay.metric(series).await >= 1.0
        })
        .await;
    }
    // (family, a label it must carry): a line of the family with the label, whatever its
    // suffix (`_total`, `_max`, `_bucket`, `_sum`, …).
    let expected = [
        ("queuebox{", "version=\""),
        ("queuebox_uptime_seconds", ""),
        ("queuebox_outbox_messages_total", "status=\"sent\""),
        ("queuebox_outbox_messages_total", "status=\"failed\""),
        ("queuebox_outbox_messages_pending", ""),
        ("queuebox_outbox_oldest_pending_age_seconds", ""),
        ("queuebox_inbox_oldest_pending_age_seconds", ""),
        ("queuebox_outbox_processing_duration_seconds", ""),
        (
            "queuebox_outbox_publish_duration_seconds",
            "destination_type=\"http\"",
        ),
        (
            "queuebox_outbox_destination_messages_total",
            "destination=\"rx\",outcome=\"success\"",
        ),
        (
            "queuebox_outbox_destination_messages_total",
            "destination=\"rx\",outcome=\"failure\"",
        ),
        ("queuebox_outbox_queue_depth", "destination=\"rx\""),
        (
            "queuebox_http_publish_responses_total",
            "status_class=\"5xx\"",
        ),
        (
            "queuebox_http_publish_responses_total",
            "status_class=\"2xx\"",
        ),
        ("queuebox_inbox_messages_total", "status=\"new\""),
        ("queuebox_inbox_messages_total", "status=\"duplicate\""),
        ("queuebox_inbox_messages_total", "status=\"forwarded\""),
        (
            "queuebox_inbox_rejections_total",
            "reason=\"extraction_failed\"",
        ),
        (
            "queuebox_cleanup_messages_deleted_total",
            "table=\"outbox\"",
        ),
        ("queuebox_cleanup_duration_seconds", "table=\"outbox\""),
        ("queuebox_cleanup_last_run_timestamp", "table=\"inbox\""),
        ("queuebox_outbox_messages_reclaimed_total", ""),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let (_, text) = relay.get("/metrics").await;
        let missing: Vec<(&str, &str)> = expected
            .iter()
            .filter(|(family, label)| {
                !text
                    .lines()
                    .any(|l| l.starts_with(family) && l.contains(label))
            })
            .copied()
            .collect();
        if missing.is_empty() {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "missing from the scrape: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let info = text
        .lines()
        .find(|l| l.starts_with("queuebox{version="))
        .unwrap();
    assert!(info.ends_with(" 1"), "{info}");
    Ok(())
}

/// Row 63: AGE retention deletes old terminal rows in batches of `batchSize` (a statement
/// trigger counts the rows each DELETE removes) and keeps pending and processing ones; COUNT
/// keeps N per state; COUNT on the inbox is refused naming the key; the cleanup metrics appear.
pub async fn retention_deletes_old_terminal_rows_only() -> Outcome {
    let (url, store) = empty_db("acc_r63").await;
    let rx = Receiver::start().await;
    let age = base_config(&url, &rx.url()).replacen("outbox:\n", "outbox:\n  enabled: false\n", 1)
        .replacen("  relay:\n", "  relay:\n    enabled: false\n", 1)
        + "retention:\n  enabled: true\n  outbox:\n    policy: AGE\n    maxAge: 1m\n    cleanupInterval: 1s\n    batchSize: 2\n  inbox:\n    policy: AGE\n    maxAge: 1m\n    cleanupInterval: 1s\n    batchSize: 2\n";
    // The schema first (retention starts with the binary), then old and new rows of every state.
    let (code, out) = run_to_exit("database:\n  url: {db}\n", &url, &["migrate"]).await;
    assert_eq!(code, 0, "{out}");
    // Every DELETE statement on the two tables logs how many rows it removed (a statement
    // trigger over the deleted rows), so the batches can be counted.
    sqlx::raw_sql(
        "CREATE TABLE deletes (tbl text NOT NULL, n bigint NOT NULL);
         CREATE FUNCTION log_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO deletes SELECT TG_TABLE_NAME, count(*) FROM gone; RETURN NULL; END $$;
         CREATE TRIGGER log_outbox_deletes AFTER DELETE ON outbox REFERENCING OLD TABLE AS gone
           FOR EACH STATEMENT EXECUTE FUNCTION log_deletes();
         CREATE TRIGGER log_inbox_deletes AFTER DELETE ON inbox REFERENCING OLD TABLE AS gone
           FOR EACH STATEMENT EXECUTE FUNCTION log_deletes();",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for (state, old) in [
        ("sent", true),
        ("sent", true),
        ("sent", true),
        ("dead", true),
        ("pending", true),
        ("sent", false),
    ] {
        let at = if old {
            "now() - interval '1 hour'"
        } else {
            "now()"
        };
        sqlx::query(&format!(
            "INSERT INTO outbox (topic, payload, state, created_at, updated_at) VALUES ('t', '{{}}', '{state}', {at}, {at})"
        ))
        .execute(store.pool())
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state, claim_token, claimed_at, lease_expires_at, created_at, updated_at) \
         VALUES ('t', '{}', 'processing', gen_random_uuid(), now(), now() + interval '1 hour', now() - interval '1 hour', now() - interval '1 hour')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for (i, (state, old)) in [
        ("processed", true),
        ("processed", true),
        ("dead", true),
        ("pending", true),
        ("processed", false),
    ]
    .iter()
    .enumerate()
    {
        let at = if *old {
            "now() - interval '1 hour'"
        } else {
            "now()"
        };
        sqlx::query(&format!(
            "INSERT INTO inbox (source, idempotency_key, payload, state, created_at) VALUES ('s', 'k{i}', '{{}}', '{state}', {at})"
        ))
        .execute(store.pool())
        .await
        .unwrap();
    }
    let relay = Relay::start(&age).await;
    eventually("old terminal rows deleted", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox").await == 3
            && scalar_i64(&store, "SELECT count(*) FROM inbox").await == 2
    })
    .await;
    let left: Vec<String> = sqlx::query_scalar("SELECT state FROM outbox ORDER BY state")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(
        left,
        ["pending", "processing", "sent"],
        "pending, processing and the new sent row stay"
    );
    let inbox_left: Vec<String> = sqlx::query_scalar("SELECT state FROM inbox ORDER BY state")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(inbox_left, ["pending", "processed"]);
    // In batches of batchSize 2: 4 old outbox rows and 3 old inbox rows take at least two
    // DELETE statements each, none of them removing more than 2 rows.
    for (table, rows) in [("outbox", 4i64), ("inbox", 3)] {
        let (statements, largest, total): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT count(*), max(n), sum(n)::int8 FROM deletes WHERE tbl = $1 AND n > 0",
        )
        .bind(table)
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(total, Some(rows), "{table}: rows deleted");
        assert!(
            largest <= Some(2) && statements >= 2,
            "{table}: {rows} rows deleted in {statements} statements of up to {largest:?} rows; batchSize is 2"
        );
    }
    eventually("cleanup metrics", 10, || async {
        relay
            .metric("queuebox_cleanup_messages_deleted_total{table=\"outbox\"}")
            .await
            >= 4.0
    })
    .await;
    // COUNT keeps the newest N per terminal state.
    let (url2, store2) = empty_db("acc_r63b").await;
    let (code, out) = run_to_exit("database:\n  url: {db}\n", &url2, &["migrate"]).await;
    assert_eq!(code, 0, "{out}");
    for i in 0..5 {
        for state in ["sent", "dead"] {
            sqlx::query(&format!(
                "INSERT INTO outbox (topic, payload, state, updated_at) VALUES ('t', '{{}}', '{state}', now() - make_interval(mins => {i}))"
            ))
            .execute(store2.pool())
            .await
            .unwrap();
        }
    }
    let count = base_config(&url2, &rx.url()).replacen("outbox:\n", "outbox:\n  enabled: false\n", 1)
        + "retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 2\n    cleanupInterval: 1s\n";
    let _r = Relay::start(&count).await;
    eventually("two per state kept", 20, || async {
        scalar_i64(&store2, "SELECT count(*) FROM outbox").await == 4
    })
    .await;
    assert_eq!(
        scalar_i64(&store2, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
        2
    );
    let refused = "database:\n  url: {db}\nretention:\n  enabled: true\n  inbox:\n    policy: COUNT\n    maxCount: 2\n";
    let (code, out) = run_to_exit(refused, &url2, &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("retention.inbox.policy"), "{out}");
    Ok(())
}

/// Row 65: with no file and no `QUEUEBOX_*` variable the packaged demo configuration is in
/// effect (sources `stripe` and `github`, said at warn level); a file with one destination
/// replaces it entirely — no demo source or route remains (`check-config` shows none, and
/// `POST /inbox/stripe` answers 404), whether named by `--config` or `QUEUEBOX_CONFIG_FILE`.
pub async fn a_file_replaces_the_packaged_configuration() -> Outcome {
    let bare = || {
        let mut cmd = tokio::process::Command::new(queuebox_bin());
        for (k, _) in std::env::vars() {
            if k.starts_with("QUEUEBOX_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .stdin(std::process::Stdio::null());
        cmd
    };
    let packaged = bare().arg("check-config").output().await.unwrap();
    let text = String::from_utf8_lossy(&packaged.stdout);
    assert!(packaged.status.success(), "{packaged:?}");
    for name in ["stripe:", "github:", "stripe.**", "github.**"] {
        assert!(text.contains(name), "the packaged demo has {name}: {text}");
    }

    let (url, _store) = empty_db("acc_r65").await;
    let rx = Receiver::start().await;
    let port = free_port();
    let file = write_config(&format!(
        "server:\n  httpPort: {port}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: {url}\ndestinations:\n  only:\n    type: http\n    baseUrl: {}\n",
        rx.url()
    ));
    for by_env in [false, true] {
        let mut cmd = bare();
        if by_env {
            cmd.env("QUEUEBOX_CONFIG_FILE", file.path());
        } else {
            cmd.arg("--config").arg(file.path());
        }
        let out = cmd.arg("check-config").output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(text.contains("only:"), "{text}");
        for demo in ["stripe", "github", "billing"] {
            assert!(
                !text.contains(demo),
                "no demo {demo} (by_env {by_env}): {text}"
            );
        }
    }
    let mut cmd = bare();
    let _child = cmd
        .arg("--config")
        .arg(file.path())
        .arg("run")
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    eventually("listening", 60, || async {
        reqwest::get(format!("{base}/health/live")).await.is_ok()
    })
    .await;
    for demo in ["/inbox/stripe", "/inbox/github"] {
        let status = reqwest::Client::new()
            .post(format!("{base}{demo}"))
            .header("content-type", "application/json")
            .body(r#"{"id":"evt_1","type":"charge.succeeded"}"#)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 404, "{demo}: no demo source");
    }
    Ok(())
}

/// Row 64: no configuration file at all, everything from `QUEUEBOX_*` variables (list
/// indexes, `__` for an underscore inside a name): a webhook goes in and is delivered; no
/// demo source exists.
pub async fn configuration_from_the_environment_alone_works() -> Outcome {
    let (url, store) = empty_db("acc_r64").await;
    let rx = Receiver::start().await;
    let port = free_port();
    let mut cmd = tokio::process::Command::new(queuebox_bin());
    for (k, _) in std::env::vars() {
        if k.starts_with("QUEUEBOX_") {
            cmd.env_remove(k);
        }
    }
    let hooks = format!("{}/env", rx.url());
    cmd.envs([
        ("QUEUEBOX_DATABASE_URL", url.as_str()),
        ("QUEUEBOX_SERVER_HTTPPORT", &port.to_string()),
        ("QUEUEBOX_SERVER_BINDADDRESS", "127.0.0.1"),
        ("QUEUEBOX_OUTBOX_POLLINTERVALMS", "20"),
        ("QUEUEBOX_INBOX_RELAY_POLLINTERVALMS", "20"),
        ("QUEUEBOX_DESTINATIONS_MY__RX_TYPE", "http"),
        ("QUEUEBOX_DESTINATIONS_MY__RX_BASEURL", hooks.as_str()),
        ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "orders.*"),
        ("QUEUEBOX_ROUTES_0_DESTINATION", "my_rx"),
        ("QUEUEBOX_SOURCES_ORDERS_PATH", "/orders"),
        ("QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH", "$.id"),
        ("QUEUEBOX_SOURCES_ORDERS_TOPIC", "orders.placed"),
        ("RUST_LOG", "warn"),
    ])
    .kill_on_drop(true)
    .stdin(std::process::Stdio::null());
    let _child = cmd.arg("run").spawn().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    eventually("listening", 60, || async {
        reqwest::get(format!("{base}/health/live")).await.is_ok()
    })
    .await;
    let post = |path: &str| {
        reqwest::Client::new()
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(r#"{"id":"env-1"}"#)
            .send()
    };
    assert_eq!(post("/inbox/orders").await.unwrap().status().as_u16(), 202);
    assert_eq!(
        post("/inbox/stripe").await.unwrap().status().as_u16(),
        404,
        "no demo source"
    );
    eventually("delivered", 20, || async { rx.to("/env").len() == 1 }).await;
    assert_eq!(rx.to("/env")[0].h("x-topic"), Some("orders.placed"));
    // The relay marks a row sent after the receiver's answer, so the mark can trail the
    // delivery the receiver recorded.
    eventually("marked sent", 20, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 1
    })
    .await;
    Ok(())
}

/// Row 67: `file:` secrets are read (trailing newline dropped): the database password, and a
/// source's bearer token that a request must match; `database.url: file:…` is refused. The
/// database is a cluster of the row's own whose role `app` must give its password
/// (scram-sha-256): the binary connects with the file's password, and not with a wrong one.
pub async fn file_secrets_are_read_and_a_file_url_is_refused() -> Outcome {
    let cluster = Cluster::new(free_port(), "acc-r67");
    cluster.script_async("start").await;
    let admin = queuebox_core::store::postgres::PgStore::connect(&cluster.url(), 2)
        .await
        .unwrap();
    // One statement each: CREATE DATABASE cannot run in the transaction a script runs in.
    for sql in [
        "CREATE ROLE app LOGIN PASSWORD 'pw-from-file'",
        "CREATE DATABASE app OWNER app",
    ] {
        sqlx::query(sql).execute(admin.pool()).await.unwrap();
    }
    // Password authentication for `app` over TCP (the first matching line wins), the
    // superuser keeps trust.
    let hba = std::path::Path::new(&cluster.dir).join("pg_hba.conf");
    let rest = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(
        &hba,
        format!("host all app 127.0.0.1/32 scram-sha-256\n{rest}"),
    )
    .unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(admin.pool())
        .await
        .unwrap();
    let url = format!("postgres://app@127.0.0.1:{}/app", cluster.port);
    // The reload is asynchronous: wait until the role is refused without its password.
    eventually("password authentication for app", 10, || async {
        queuebox_core::store::postgres::PgStore::connect(&url, 1)
            .await
            .is_err()
    })
    .await;
    let store = queuebox_core::store::postgres::PgStore::connect(
        &format!("postgres://postgres@127.0.0.1:{}/app", cluster.port),
        2,
    )
    .await
    .unwrap();
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "pw-from-file\n").unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok-from-file\n").unwrap();
    let with_password = |file: &std::path::Path| {
        base_config(&url, &rx.url()).replacen(
            "  startupTimeoutMs: 60000\n",
            &format!(
                "  startupTimeoutMs: 3000\n  password: file:{}\n",
                file.display()
            ),
            1,
        )
    };
    // A wrong password in the file: the database refuses the binary, which gives up.
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "pw-from-fil\n").unwrap();
    let wrong_yaml =
        with_password(&wrong).replace("startupTimeoutMs: 3000", "startupTimeoutMs: 1000");
    let (code, out) = run_to_exit(&wrong_yaml, "", &["run"]).await;
    assert_ne!(
        code, 0,
        "a wrong password in the file must not connect: {out}"
    );
    assert!(
        out.contains("password authentication failed"),
        "refused for its password: {out}"
    );
    let yaml = with_password(&pw) + &format!(
        "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyPath: $.id\n    auth:\n      type: bearer\n      token: file:{}\n",
        token.display()
    );
    let relay = Relay::start(&yaml).await;
    let body = r#"{"id":"f1"}"#;
    assert_eq!(
        relay
            .post("/inbox/s", body, &[("Authorization", "Bearer tok-from")])
            .await
            .0,
        401
    );
    assert_eq!(
        relay
            .post(
                "/inbox/s",
                body,
                &[("Authorization", "Bearer tok-from-file")]
            )
            .await
            .0,
        202
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 1);
    let url_file = dir.path().join("url");
    std::fs::write(&url_file, format!("{url}\n")).unwrap();
    let yaml = format!("database:\n  url: file:{}\n", url_file.display());
    let (code, out) = run_to_exit(&yaml, "", &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("database.url"), "{out}");
    Ok(())
}

/// A receiver that answers 500 with the request's headers in its body, as a careless
/// endpoint would.
async fn echoing_receiver() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|headers: axum::http::HeaderMap| async move {
        let echoed: Vec<String> = headers
            .iter()
            .map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v.as_bytes())))
            .collect();
        (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            echoed.join("\n"),
        )
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://127.0.0.1:{port}")
}

/// Row 68: the database password never shows in configuration errors, the redacted config or
/// the logs, and destination credentials echoed back by an endpoint never reach `last_error`.
pub async fn secrets_never_show_in_errors_logs_or_last_error() -> Outcome {
    let secret_url = "postgres://postgres:hunter2-db@127.0.0.1:1/nowhere";
    let mistake = format!(
        "database:\n  url: {secret_url}\n  startupTimeoutMs: 1000\noutbox:\n  batchSzie: 1\n"
    );
    let (code, out) = run_to_exit(&mistake, "", &["check-config"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains("hunter2-db"), "configuration error: {out}");
    let valid = format!("database:\n  url: {secret_url}\n  startupTimeoutMs: 1000\n");
    let (code, out) = run_to_exit(&valid, "", &["check-config"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("hunter2-db"), "resolved configuration: {out}");
    let (code, out) = run_to_exit(
        &format!("server:\n  httpPort: {{port}}\n{valid}"),
        "",
        &["run"],
    )
    .await;
    assert_ne!(code, 0, "no database: {out}");
    assert!(!out.contains("hunter2-db"), "logs: {out}");

    let (url, store) = empty_db("acc_r68").await;
    let echo = echoing_receiver().await;
    let extra = format!(
        "  basic:\n    type: http\n    baseUrl: {echo}\n    auth:\n      type: basic\n      username: relay-user\n      password: 'pw-secret-1'\n  header:\n    type: http\n    baseUrl: {echo}\n    auth:\n      type: header\n      headerName: X-Relay-Token\n      headerValue: tok-secret-2\nroutes:\n  - topicPattern: t.basic\n    destination: basic\n  - topicPattern: t.header\n    destination: header\n"
    );
    let _relay = Relay::start(&format!(
        "{}{extra}",
        base_config(&url, "http://127.0.0.1:9")
    ))
    .await;
    let a = insert(&store, "t.basic", None).await;
    let b = insert(&store, "t.header", None).await;
    wait_state(&store, a, "dead", 20).await;
    wait_state(&store, b, "dead", 20).await;
    let basic64 = "cmVsYXktdXNlcjpwdy1zZWNyZXQtMQ"; // base64("relay-user:pw-secret-1") without padding
    for id in [a, b] {
        let err = outbox_row(&store, id).await.2.unwrap_or_default();
        assert!(err.starts_with("HTTP 500"), "{err}");
        for secret in ["pw-secret-1", "tok-secret-2", basic64] {
            assert!(!err.contains(secret), "last_error holds {secret}: {err}");
        }
    }
    Ok(())
}

/// Row 71: the binary waits for a database that comes up within `startupTimeoutMs`, and
/// exits non-zero naming `database.startupTimeoutMs` when it never does.
pub async fn startup_waits_for_the_database() -> Outcome {
    let cluster = Cluster::new(free_port(), "acc-r71");
    let rx = Receiver::start().await;
    let yaml = base_config(&cluster.url(), &rx.url());
    let (relay, ()) = tokio::join!(Relay::start(&yaml), async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        cluster.script_async("start").await;
    });
    eventually("ready once the database is up", 60, || async {
        relay.get("/health/ready").await.0 == 200
    })
    .await;
    let never = "server:\n  httpPort: {port}\ndatabase:\n  url: postgres://postgres@127.0.0.1:1/none\n  startupTimeoutMs: 1500\n";
    let t0 = Instant::now();
    let (code, out) = run_to_exit(never, "", &["run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("database.startupTimeoutMs"), "{out}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "gave up after {:?}",
        t0.elapsed()
    );
    Ok(())
}

/// Row 72: SIGTERM with a slow webhook in flight: that request still gets 202 and its row;
/// new requests during the whole drain get 503 `{"error":"QueueBox is shutting down"}`; an
/// outbox publish in flight when the background loops stop (a receiver answering after
/// 1.5 s, within `outbox.shutdownTimeoutMs`) finishes: the row is sent, delivered once, before
/// the process exits.
pub async fn sigterm_finishes_requests_in_flight_and_refuses_new_ones() -> Outcome {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (url, store) = empty_db("acc_r72").await;
    let rx = Receiver::start().await;
    rx.behaviour.lock().unwrap().first_delay = Some(Duration::from_millis(1500));
    let yaml = base_config(&url, &rx.url()).replacen(
        "  drainTimeoutMs: 2000\n",
        "  drainTimeoutMs: 8000\n",
        1,
    ) + ROUTE_ALL
        + "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyPath: $.id\n";
    let mut relay = Relay::start(&yaml).await;
    let body = r#"{"id":"slow-1"}"#;
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", relay.port))
        .await
        .unwrap();
    let head = format!(
        "POST /inbox/s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        body.len(),
        &body[..5]
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.term();
    let t0 = Instant::now();
    for probe_at in [Duration::from_millis(300), Duration::from_millis(2500)] {
        tokio::time::sleep(probe_at.saturating_sub(t0.elapsed())).await;
        let (s, b) = match reqwest::Client::new()
            .post(relay.url("/inbox/s"))
            .header("content-type", "application/json")
            .body(r#"{"id":"new"}"#)
            .send()
            .await
        {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => panic!("a new request {probe_at:?} into the drain was not answered: {e}"),
        };
        assert_eq!(
            (s, b.as_str()),
            (503, r#"{"error":"QueueBox is shutting down"}"#),
            "{probe_at:?} into the drain"
        );
    }
    // An outbox row whose publish is in flight when the drain ends and the loops stop.
    let published = insert(&store, "t.in-flight", None).await;
    eventually("the publish in flight", 10, || async {
        rx.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    conn.write_all(&body.as_bytes()[5..]).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = conn.read(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(
        answer.starts_with("HTTP/1.1 202"),
        "the request in flight: {answer}"
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'slow-1'"
        )
        .await,
        1
    );
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'new'"
        )
        .await,
        0
    );
    let status = tokio::time::timeout(Duration::from_secs(20), relay.child.wait())
        .await
        .expect("exits after the drain")
        .unwrap();
    assert!(status.success(), "a clean exit: {status:?}");
    assert_eq!(
        outbox_row(&store, published).await.0,
        "sent",
        "the publish in flight at shutdown finished and was marked sent before the exit"
    );
    assert_eq!(rx.to("/hooks").len(), 1, "delivered once");
    Ok(())
}

/// The statement named `name` in proto-docs/dead-letter.md, with its one placeholder as `$1`.
fn documented_sql(name: &str) -> String {
    let doc = std::fs::read_to_string(repo_root().join("proto-docs/dead-letter.md")).unwrap();
    let start = format!("```sql name={name}\n");
    let at = doc
        .find(&start)
        .unwrap_or_else(|| panic!("dead-letter.md has no {name}"))
        + start.len();
    let end = doc[at..].find("```").unwrap();
    let sql = doc[at..at + end].trim().trim_end_matches(';').to_string();
    [":message_id", ":topic", ":limit"]
        .iter()
        .fold(sql, |s, p| s.replace(p, "$1"))
}

/// Row 62: the documented requeue of one dead row updates exactly that row, which is then
/// delivered; on a row that is not dead it changes nothing. The listing, requeue-by-topic and
/// discard statements of the same page run as written too.
pub async fn the_documented_requeue_sql_brings_a_dead_row_back() -> Outcome {
    let (_relay, rx, store) = start("acc_r62", ROUTE_ALL).await;
    rx.script("/hooks", &[500]);
    let dead: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t.dead', '{}', 0) RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    wait_state(&store, dead, "dead", 20).await;
    let per_topic: Vec<(String, i64)> = sqlx::query_as(&documented_sql("outbox-dead-by-topic"))
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(per_topic, [("t.dead".to_string(), 1)]);
    let newest = sqlx::query(&documented_sql("outbox-newest-dead"))
        .bind(10i64)
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(newest.len(), 1);
    let one = sqlx::query(&documented_sql("outbox-show-one"))
        .bind(dead)
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    rx.script("/hooks", &[200]);
    let requeue = documented_sql("outbox-requeue-one");
    let n = sqlx::query(&requeue)
        .bind(dead)
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(n.rows_affected(), 1);
    wait_state(&store, dead, "sent", 20).await;
    let again = sqlx::query(&requeue)
        .bind(dead)
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(
        again.rows_affected(),
        0,
        "a row that is not dead is not touched"
    );
    let discard = documented_sql("outbox-discard-one");
    let n = sqlx::query(&discard)
        .bind(dead)
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(n.rows_affected(), 0, "a sent row is not discarded");
    // By topic, then discarded.
    rx.script("/hooks", &[500]);
    let d2: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t.more', '{}', 0) RETURNING id",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    wait_state(&store, d2, "dead", 20).await;
    let n = sqlx::query(&documented_sql("outbox-requeue-topic"))
        .bind("t.more")
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(n.rows_affected(), 1);
    wait_state(&store, d2, "dead", 20).await;
    let n = sqlx::query(&discard)
        .bind(d2)
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(n.rows_affected(), 1);
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM outbox").await, 1);
    // The inbox requeue is valid SQL and touches nothing that is not a dead row.
    let n = sqlx::query(&documented_sql("inbox-requeue-one"))
        .bind(uuid::Uuid::new_v4())
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(n.rows_affected(), 0);
    Ok(())
}

/// Row 73 (needs `QUEUEBOX_TEST_MSSQL_URL`; written without a SQL Server to run it on, so
/// unproved until it runs on one): two replicas on SQL Server forward and deliver 100
/// webhooks, each exactly once. The row's other half (lock contention surfaces as a
/// retryable error) is the SQL Server store contract suite's, not checked here.
pub async fn two_replicas_on_sqlserver_deliver_each_row_once() -> Outcome {
    let Ok(mssql) = std::env::var("QUEUEBOX_TEST_MSSQL_URL") else {
        return Err(NotRun(
            "QUEUEBOX_TEST_MSSQL_URL is not set (SQL Server)".into(),
        ));
    };
    let rx = Receiver::start().await;
    // The server's database is shared with other runs: this run's rows carry its own source.
    let source = unique_name("r73");
    let yaml = base_config(&format!("\"{mssql}\""), &rx.url()).replacen(
        "database:\n",
        "database:\n  type: sqlserver\n",
        1,
    ) + &format!(
        "routes:\n  - topicPattern: '{source}'\n    destination: rx\nsources:\n  {source}:\n    path: /{source}\n    idempotencyKeyPath: $.id\n    topic: {source}\n"
    );
    let a = Relay::start(&yaml).await;
    let _b = Relay::start(&yaml).await;
    for i in 0..100 {
        let (s, b) = a
            .post(
                &format!("/inbox/{source}"),
                &format!(r#"{{"id":"{source}-{i}"}}"#),
                &[],
            )
            .await;
        assert_eq!(s, 202, "{b}");
    }
    eventually("100 deliveries", 60, || async {
        rx.to("/hooks").len() >= 100
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut keys: Vec<String> = rx
        .to("/hooks")
        .iter()
        .filter_map(|d| d.h("x-idempotency-key").map(String::from))
        .collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!((n, keys.len()), (100, 100), "each webhook delivered once");
    Ok(())
}

fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}
