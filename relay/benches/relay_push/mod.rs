//! The whole push path, `POST /inbox/orders` → inbox row → inbox relay → outbox row → outbox
//! relay → HTTP receiver, against two others in the same rounds:
//! - naive: the bare INSERT handler (a process of its own, [`super::serve_baseline`]) and a
//!   loop that selects pending inbox rows, POSTs each to the receiver 16 at a time and marks
//!   it processed (no claim, lease, fence, outbox row or retry);
//! - ceiling: a process that stores nothing and POSTs each request's body straight on to the
//!   receiver before answering 202 ([`serve_ceiling`]): what this machine's HTTP stack allows
//!   for the path with no database at all, which no durable relay can beat.
//!
//! Each round posts [`PUSH_ROWS`] messages with fresh keys from [`super::CLIENTS`] clients and
//! times the first POST to the last delivery; the order of the three rotates per round.
//! `QB_RELAY_BENCH_PUSH=0` leaves the part out.

use super::*;

const PUSH_ROWS: u64 = 5000;

pub async fn compare(rx_port: u16, received: &AtomicU64, rounds: usize) -> serde_json::Value {
    let (mut relay, mut naive, mut ceiling) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        for k in 0..3 {
            let (name, rates, r) = match (round + k) % 3 {
                0 => ("relay", &mut relay, relay_round(rx_port, received).await),
                1 => ("naive", &mut naive, naive_round(rx_port, received).await),
                _ => (
                    "ceiling",
                    &mut ceiling,
                    ceiling_round(rx_port, received).await,
                ),
            };
            eprintln!("push round {round} {name:>7}: {r:7.0} rows/s");
            rates.push(r);
        }
    }
    // Per-round ratios (same round, close in time) as well as the ratio of the medians.
    let ratio = |a: &[f64], b: &[f64]| {
        let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        json!({"ofMedians": median(a) / median(b), "perRound": stats(&r)})
    };
    json!({
        "rows": PUSH_ROWS,
        "relayRowsPerSec": stats(&relay),
        "naiveRowsPerSec": stats(&naive),
        "ceilingRowsPerSec": stats(&ceiling),
        "relayOverNaive": ratio(&relay, &naive),
        "relayOverCeiling": ratio(&relay, &ceiling),
        "naiveOverCeiling": ratio(&naive, &ceiling),
    })
}

async fn relay_round(rx_port: u16, received: &AtomicU64) -> f64 {
    let (db, store) = fresh_db("push").await;
    let port = free_port();
    let cfg = relay_config(&db, port, rx_port, true, true);
    let mut relay = spawn_relay(cfg.path(), port).await;
    let rate = timed(format!("http://127.0.0.1:{port}/inbox/orders"), received).await;
    relay.kill().await.ok();
    drop_db(&db, store).await;
    rate
}

async fn naive_round(rx_port: u16, received: &AtomicU64) -> f64 {
    let (db, store) = fresh_db("pushnaive").await;
    let (mut server, port) = serve_here("QB_RELAY_BENCH_BASELINE_SERVE", &db).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forwarder = tokio::spawn(forward(store.clone(), rx_port, stop.clone()));
    let rate = timed(format!("http://127.0.0.1:{port}/inbox/orders"), received).await;
    stop.store(true, Ordering::Relaxed);
    forwarder.await.unwrap();
    server.kill().await.ok();
    drop_db(&db, store).await;
    rate
}

async fn ceiling_round(rx_port: u16, received: &AtomicU64) -> f64 {
    let (mut server, port) = serve_here("QB_RELAY_BENCH_CEILING_SERVE", &rx_port.to_string()).await;
    let rate = timed(format!("http://127.0.0.1:{port}/inbox/orders"), received).await;
    server.kill().await.ok();
    rate
}

/// The ceiling's server, on `QB_RELAY_BENCH_CEILING_SERVE=<port> <receiver port>`: each POST's
/// body goes on to the receiver at once, and the sender gets 202 once the receiver took it.
/// One process, like the relay, with the relay's HTTP client and server libraries.
pub async fn serve_ceiling(spec: &str) {
    let (port, receiver) = spec.split_once(' ').unwrap();
    let url = format!("http://127.0.0.1:{receiver}/");
    let client = reqwest::Client::new();
    let pass = move |body: Bytes| {
        let send = client
            .post(url.clone())
            .header("content-type", "application/json")
            .body(body)
            .send();
        async move {
            match send.await {
                Ok(r) if r.status().is_success() => StatusCode::ACCEPTED,
                _ => StatusCode::BAD_GATEWAY,
            }
        }
    };
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap()))
        .await
        .unwrap();
    axum::serve(
        l,
        axum::Router::new().route("/inbox/orders", axum::routing::post(pass)),
    )
    .await
    .unwrap();
}

/// The naive forwarder: pending inbox rows to the receiver until stopped.
async fn forward(store: PgStore, receiver: u16, stop: Arc<std::sync::atomic::AtomicBool>) {
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{receiver}/");
    while !stop.load(Ordering::Relaxed) {
        if naive_pass(&store, &client, &url, "inbox", "processed").await == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Posts PUSH_ROWS fresh keys from CLIENTS clients, then waits for the receiver to have
/// counted as many deliveries; rows/s from the first POST to the last delivery.
async fn timed(url: String, received: &AtomicU64) -> f64 {
    let before = received.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(0));
    let posts = (0..CLIENTS).map(|_| {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= PUSH_ROWS {
                    return;
                }
                let body = format!(r#"{{"id":"p{i}","type":"created","amount":12.5}}"#);
                let r = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 202, "a fresh key is accepted");
            }
        })
    });
    for p in futures::future::join_all(posts).await {
        p.unwrap();
    }
    while received.load(Ordering::Relaxed) - before < PUSH_ROWS {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the push path did not deliver {PUSH_ROWS} rows in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    PUSH_ROWS as f64 / t0.elapsed().as_secs_f64()
}
