//! Rows 55–75: health, the management port, metrics, admin, configuration, start-up and
//! shutdown, the NOTIFY wake-up.

use std::time::{Duration, Instant};

use super::kit::*;
use super::Outcome;

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
        text.lines()
            .any(|l| l.starts_with(gauge) && l.trim().ends_with(" 0"))
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

/// Row 75 (the reference's change-data-capture wake-up is optional; QueueBox wakes the
/// outbox relay with LISTEN/NOTIFY instead): with a 10 s poll interval an inserted row is
/// delivered well within a second.
pub async fn an_insert_wakes_the_outbox_relay_before_the_poll_interval() -> Outcome {
    let (url, store) = empty_db("acc_r75").await;
    let rx = Receiver::start().await;
    let yaml = outbox_setting(base_config(&url, &rx.url()), "pollIntervalMs", "10000");
    let _relay = Relay::start(&format!("{yaml}{ROUTE_ALL}")).await;
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
    Ok(())
}
