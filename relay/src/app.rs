//! Wiring: start-up (wait for the database, migrate, build publishers), the HTTP servers
//! (data port and optional management port), the background loops, and the ordered
//! graceful shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use queuebox_config::Config;
use queuebox_core::backend::{self, Database};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::destinations;
use crate::liveness::{self, Loops};
use crate::metrics::Metrics;
use crate::sources::Inbox;
use crate::state::AppState;

/// Connects the backend the database URL names ([`backend::connect`]: PostgreSQL, or SQL
/// Server in a build with the `sqlserver` feature) with backoff until
/// `database.startupTimeoutMs` runs out.
async fn connect(cfg: &Config) -> anyhow::Result<Arc<dyn Database>> {
    let deadline = Instant::now() + Duration::from_millis(cfg.database.startup_timeout_ms);
    let mut wait = Duration::from_millis(200);
    // Sessions named for pg_stat_activity, unless the URL (or PGAPPNAME) names them.
    let settings = crate::app_name::apply(cfg.database_settings(), &crate::app_name::relay_name());
    loop {
        match backend::connect(&settings).await {
            Ok(db) => return Ok(db),
            // A TLS failure (wrong CA, host name, client certificate) fails the same way on
            // every attempt: report it now rather than after startupTimeoutMs.
            Err(e) if e.is_transient() && Instant::now() + wait < deadline => {
                tracing::warn!(error = %e, "waiting for the database");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) if !e.is_transient() => anyhow::bail!("QueueBox could not open the database pool. Reason: {e}"),
            Err(e) => anyhow::bail!("QueueBox could not open the database pool within database.startupTimeoutMs ({} ms). Reason: {e}", cfg.database.startup_timeout_ms),
        }
    }
}

/// Runs the relay until SIGTERM / SIGINT.
pub async fn run(cfg: Config) -> anyhow::Result<()> {
    let cfg = Arc::new(cfg);
    // Before the database: a destination that may not be reached is a configuration mistake.
    destinations::address_guard::refuse_blocked(&cfg).await?;
    let db = connect(&cfg).await?;
    if cfg.database.migrate {
        let report = db.migrate().await.map_err(|e| {
            anyhow::anyhow!("QueueBox could not apply the database migrations. Reason: {e}")
        })?;
        for m in &report.applied {
            tracing::info!(migration = %m, "applied migration");
        }
    }
    db.check_schema()
        .await
        .map_err(|e| anyhow::anyhow!("QueueBox could not find its tables. Reason: {e}"))?;
    // No start-up check of destination timeouts against outbox.claimTimeoutMs: the outbox
    // relay renews its claims every claimTimeoutMs/3 while a publish runs.
    let metrics = Arc::new(Metrics::new());
    let publishers = Arc::new(destinations::build_all(&cfg, &metrics)?);
    let transforms = Arc::new(crate::transforms::Transforms::compile(&cfg)?);
    // Kept until the loops have finished their in-flight rows (the end of `run`).
    let owner_stop = CancellationToken::new();
    let (owner, owner_keeper) = crate::relay_owner::spawn(
        db.store(),
        db.relay_store(),
        metrics.clone(),
        owner_stop.clone(),
    );
    let st = AppState {
        inbox: Inbox {
            group: crate::sources::group::InsertGroup::start(
                db.clone(),
                metrics.clone(),
                Duration::from_millis(cfg.database.connection_timeout_ms),
            ),
            metrics: metrics.clone(),
            max_header_bytes: cfg.inbox.max_header_bytes,
            transforms: transforms.clone(),
            filters: Arc::new(crate::sources::filter::Filters::from_config(&cfg)),
            holds: Arc::new(crate::sources::hold::Holds::from_config(&cfg)),
        },
        transforms,
        cfg: cfg.clone(),
        store: db.relay_store(),
        db: db.clone(),
        metrics: metrics.clone(),
        publishers,
        draining: Arc::new(AtomicBool::new(false)),
        ingesting: Arc::default(),
        secrets: Arc::new(cfg.secrets()),
        loops: Loops::default(),
        route_keys: Arc::new(destinations::route_keys::RouteKeys::compile(&cfg)?),
        rate_limits: Arc::new(crate::sources::rate_limit::RateLimits::from_config(
            &cfg,
            Instant::now(),
        )),
        owner,
        paused: Arc::new(crate::paused::PausedView::new(
            db.relay_store(),
            cfg.clone(),
            metrics.clone(),
        )),
    };

    let stop = CancellationToken::new();
    let mut loops = Vec::new();
    let pool_wait = Duration::from_millis(cfg.database.connection_timeout_ms);
    // The paused set before the first claim, so a destination paused while this replica was
    // down gets nothing delivered in its first second; then once a second.
    if let Err(e) = st.paused.refresh().await {
        tracing::warn!(error = %e, "could not read the paused set at start");
    }
    loops.push(st.loops.spawn(
        "pause-watch",
        liveness::grace(crate::paused::REFRESH, pool_wait),
        |hb| crate::paused::run(st.paused.clone(), stop.clone(), hb),
    ));
    if cfg.outbox.enabled {
        let grace = liveness::grace(
            Duration::from_millis(cfg.outbox.poll_interval_ms),
            pool_wait,
        );
        loops.push(st.loops.spawn("outbox-poller", grace, |hb| {
            crate::outbox::run(st.clone(), stop.clone(), hb)
        }));
    } else {
        st.loops.disabled("outbox-poller");
    }
    if cfg.inbox.relay.enabled {
        let grace = liveness::grace(
            Duration::from_millis(cfg.inbox.relay.poll_interval_ms),
            pool_wait,
        );
        loops.push(st.loops.spawn("inbox-relay", grace, |hb| {
            crate::inbox_relay::run(st.clone(), stop.clone(), hb)
        }));
    } else {
        st.loops.disabled("inbox-relay");
    }
    if cfg.retention.enabled && !crate::retention::active_tables(&cfg.retention).is_empty() {
        let grace = liveness::grace(crate::retention::TICK, pool_wait);
        loops.push(st.loops.spawn("retention-service", grace, |hb| {
            crate::retention::run(st.clone(), stop.clone(), hb)
        }));
    } else {
        st.loops.disabled("retention-service");
    }
    // `schedules:`: the core's runner, the same as every worker's; the database's unique key
    // makes the relays and workers that run a schedule enqueue each tick once.
    let schedules: Vec<_> = cfg
        .schedules
        .iter()
        .enumerate()
        .filter(|(_, s)| s.enabled)
        .map(|(i, s)| s.to_schedule(&format!("schedules[{i}]")))
        .collect::<Result<_, _>>()?;
    if schedules.is_empty() {
        st.loops.disabled("schedules");
    } else {
        let (store, backend, stop) = (db.store(), db.backend(), stop.clone());
        loops.push(
            st.loops
                .spawn("schedules", Duration::from_secs(5), |hb| async move {
                    // The runner sleeps until each schedule's next tick, which may be
                    // days away: the heartbeat says its task is alive; a failed enqueue
                    // is logged and retried by the runner itself.
                    let runner = tokio::spawn(queuebox_core::schedule::run(
                        store,
                        backend,
                        schedules,
                        stop.clone(),
                    ));
                    while !stop.is_cancelled() {
                        hb.beat(Duration::from_secs(1));
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                    let _ = runner.await;
                }),
        );
    }
    let mut brokers = Vec::new();
    for source in cfg.sources.values() {
        if let Some(b) = crate::sources::build_broker(source) {
            let b = b?;
            brokers.push(tokio::spawn(b.run(
                st.inbox.clone(),
                source.clone(),
                stop.clone(),
            )));
        }
    }

    let ops = ops_router(st.clone());
    let data = if cfg.server.management_port.is_some() {
        Router::new()
    } else {
        ops.clone()
    };
    let data = data
        .fallback(crate::sources::http::ingest)
        .with_state(st.clone());
    let http_stop = CancellationToken::new();
    let bind = &cfg.server.bind_address;
    // `server.tls`: both ports speak HTTPS only; SIGHUP or a change to the files re-reads
    // the certificate.
    let tls = match &cfg.server.tls {
        Some(t) => {
            let tls = crate::listener_tls::ListenerTls::load(t)?;
            tls.clone().reload_on_sighup()?;
            tls.clone().reload_on_change();
            Some(tls)
        }
        None => None,
    };
    let scheme = if tls.is_some() { "HTTPS" } else { "HTTP" };
    let listener = tokio::net::TcpListener::bind((bind.as_str(), cfg.server.http_port)).await?;
    tracing::info!(addr = %listener.local_addr()?, "inbox {scheme} listening");
    let limits = Limits::from(&cfg.server);
    let mut servers = vec![serve(
        listener,
        data,
        limits,
        tls.clone(),
        http_stop.clone(),
    )];
    if let Some(port) = cfg.server.management_port {
        let l = tokio::net::TcpListener::bind((bind.as_str(), port)).await?;
        tracing::info!(addr = %l.local_addr()?, "management {scheme} listening");
        let mgmt = ops
            .fallback(|| async { StatusCode::NOT_FOUND })
            .with_state(st.clone());
        servers.push(serve(l, mgmt, limits, tls.clone(), http_stop.clone()));
    }
    tracing::info!("QueueBox started");

    shutdown_signal().await;
    tracing::info!("Shutting down QueueBox...");
    // 1. HTTP: new requests get 503 for as long as ingest requests are in flight (at most
    // drainTimeoutMs), so a client arriving mid-drain is told to retry instead of refused a
    // connection; then the servers stop and the last connections finish.
    st.draining.store(true, Ordering::SeqCst);
    let drain = Duration::from_millis(cfg.server.drain_timeout_ms);
    let drain_end = tokio::time::Instant::now() + drain;
    tokio::time::sleep(Duration::from_millis(100)).await;
    while st.ingesting.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < drain_end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    http_stop.cancel();
    for s in servers {
        if tokio::time::timeout(drain, s).await.is_err() {
            tracing::warn!("Shutdown step 'drain HTTP' timed out");
        }
    }
    // 2. Background loops stop claiming and finish their in-flight work.
    stop.cancel();
    let budget = Duration::from_millis(cfg.outbox.shutdown_timeout_ms);
    for l in loops.into_iter().chain(brokers.into_iter().map(|h| {
        tokio::spawn(async move {
            let _ = h.await;
        })
    })) {
        if tokio::time::timeout(budget, l).await.is_err() {
            tracing::warn!("Shutdown step 'background services' timed out; unfinished claims are reclaimed after their lease");
        }
    }
    for p in st.publishers.values() {
        p.close().await;
    }
    owner_stop.cancel();
    let _ = owner_keeper.await;
    st.db.close().await;
    tracing::info!("Shutdown complete");
    Ok(())
}

/// What a slow or idle client may hold of a listener (`server.requestHeaderTimeoutMs`,
/// `server.maxConnections`); the body bound is the ingest handler's.
#[derive(Clone, Copy)]
struct Limits {
    header_timeout: Duration,
    max_connections: usize,
}

impl From<&queuebox_config::ServerConfig> for Limits {
    fn from(s: &queuebox_config::ServerConfig) -> Self {
        Limits {
            header_timeout: Duration::from_millis(s.request_header_timeout_ms),
            max_connections: s.max_connections as usize,
        }
    }
}

/// Serves HTTP/1 on `listener` until `stop`, then lets open requests finish. hyper's own
/// connection loop instead of `axum::serve`, which cannot set a header read timeout: a
/// connection that does not deliver a request head within the timeout (a stalled client,
/// or an idle keep-alive) is closed, and at most `max_connections` are open at once (the
/// next accept waits for a permit, so extra clients wait in the listen backlog). With
/// `tls`, the TLS handshake must also finish within the header timeout, and a client that
/// speaks plain HTTP fails the handshake: there is no fallback to plain text.
fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    tls: Option<Arc<crate::listener_tls::ListenerTls>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    tokio::spawn(async move {
        let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        loop {
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                _ = stop.cancelled() => break,
            };
            let stream = tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "accepting an HTTP connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stop.cancelled() => break,
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let Some(acceptor) = tls.as_ref().map(|t| t.acceptor()) else {
                let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "HTTP connection closed with an error");
                    }
                    drop(permit);
                });
                continue;
            };
            let (http, watcher) = (http.clone(), graceful.watcher());
            tokio::spawn(async move {
                match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        if let Err(e) = watcher
                            .watch(http.serve_connection(TokioIo::new(stream), service))
                            .await
                        {
                            tracing::debug!(error = %e, "HTTPS connection closed with an error");
                        }
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                }
                drop(permit);
            });
        }
        drop(listener);
        graceful.shutdown().await;
    })
}

#[cfg(unix)]
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Windows has no SIGTERM: Ctrl+C, Ctrl+Break and closing its console end the relay
/// gracefully.
#[cfg(windows)]
async fn shutdown_signal() {
    use tokio::signal::windows;
    let mut brk = windows::ctrl_break().expect("Ctrl+Break handler");
    let mut close = windows::ctrl_close().expect("console close handler");
    tokio::select! {
        _ = brk.recv() => {}
        _ = close.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// `/metrics`, `/health/*`, `/` and (when enabled) `/admin/*`.
fn ops_router(st: AppState) -> Router<AppState> {
    let mut r = Router::new()
        .route("/", get(|| async { "QueueBox is running!" }))
        .route("/metrics", get(metrics))
        .route(
            "/health/live",
            get(|| async {
                Json(json!({"status": "healthy", "components": {"process": {"status": "up"}}}))
            }),
        )
        .route("/health/ready", get(ready))
        .route("/health", get(ready));
    if st.cfg.admin.enabled {
        r = r.merge(crate::admin::router(&st));
    }
    r
}

async fn metrics(State(st): State<AppState>) -> Response {
    let pool = st.db.pool_gauges();
    st.metrics.set(
        "queuebox_db_pool_connections",
        &[("state", "active")],
        pool.active as f64,
    );
    st.metrics.set(
        "queuebox_db_pool_connections",
        &[("state", "idle")],
        pool.idle as f64,
    );
    let health = st.db.pool_health();
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    st.metrics.set(
        "queuebox_db_pool_connect_failing",
        &[],
        flag(health.last_connect_error.is_some()),
    );
    st.metrics
        .set("queuebox_db_pool_starved", &[], flag(health.starved));
    // The store counts since start; the counter takes what is new since the last scrape.
    static COUNTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let before = COUNTED.fetch_max(health.acquire_failures, Ordering::SeqCst);
    st.metrics.add(
        "queuebox_db_pool_acquire_failures_total",
        &[],
        health.acquire_failures.saturating_sub(before),
    );
    (
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::TEXT_CONTENT_TYPE,
        )],
        st.metrics.render(),
    )
        .into_response()
}

/// 200 when the database answers, the schema is at this build's version and every
/// background loop is making progress (or is disabled), else 503. The database counts as
/// down also while its pool is starved (`PoolHealth::starved`: connecting fails and a
/// statement got no connection within the last 10 s, as when PostgreSQL's connection table
/// is full), with the server's refusal as `database.lastConnectError`: the replica cannot do
/// its work, whatever the probe's own statement got.
async fn ready(State(st): State<AppState>) -> Response {
    let check = async {
        let current = st.db.schema_version().await?;
        Ok::<_, queuebox_core::Error>(current >= st.db.latest_version())
    };
    let (answers, schema) = match tokio::time::timeout(Duration::from_secs(2), check).await {
        Ok(Ok(current)) => (true, current),
        _ => (false, false),
    };
    let pool = st.db.pool_health();
    let db = answers && !pool.starved;
    let mut publishers_up = true;
    for p in st.publishers.values() {
        publishers_up &= p.ready().await;
    }
    let up = |b: bool| json!({"status": if b { "up" } else { "down" }});
    // Broker sources and destinations (rabbitmq.<name>, kafka.<name>, nats.<name>).
    let broker_health = queuebox_brokers::Health::global();
    let brokers_up = broker_health.ready();
    let brokers_down: serde_json::Map<String, serde_json::Value> = broker_health
        .down()
        .into_iter()
        .map(|(c, why)| (c, json!(why)))
        .collect();
    // Each loop's own liveness: up, disabled (never fails readiness) or down.
    let loops = st.loops.statuses();
    let loops_up = loops.values().all(|s| s.ready());
    let all = db && schema && publishers_up && brokers_up && loops_up;
    let mut database = up(db);
    if let Some(e) = &pool.last_connect_error {
        database["lastConnectError"] = json!(e);
        database["poolStarved"] = json!(pool.starved);
    }
    let mut components = json!({
        "database": database,
        "migrations": up(schema),
        "destinations": up(publishers_up),
        "brokers": json!({"status": if brokers_up { "up" } else { "down" }, "down": brokers_down}),
    });
    for (name, s) in &loops {
        components[*name] = s.to_json();
    }
    // What is paused is said, never counted as down: a paused replica still accepts and
    // stores messages (an unready one would be taken out of its load balancer, refusing the
    // very work a pause keeps), and a pause is an operator's intent, not a fault.
    let body = json!({
        "status": if all { "healthy" } else { "unhealthy" },
        "components": components,
        "paused": st.paused.current(),
    });
    (
        if all {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(body),
    )
        .into_response()
}
