//! The whole push path, `POST /inbox/orders` → inbox row → inbox relay → outbox row → outbox
//! relay → HTTP receiver, against a naive equivalent in the same rounds: the bare INSERT
//! handler (a process of its own, [`super::serve_baseline`]) and a loop that selects pending
//! inbox rows, POSTs each to the receiver 16 at a time and marks it processed (no claim,
//! lease, fence, outbox row or retry). Each round posts [`PUSH_ROWS`] messages with fresh keys
//! from [`super::CLIENTS`] clients and times the first POST to the last delivery; the order of
//! the two rotates per round. `QB_RELAY_BENCH_PUSH=0` leaves the part out.

use super::*;

const PUSH_ROWS: u64 = 5000;

pub async fn compare(rx_port: u16, received: &AtomicU64, rounds: usize) -> serde_json::Value {
    let (mut relay, mut naive) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for k in 0..2 {
            if (round + k) % 2 == 0 {
                let r = relay_round(rx_port, received).await;
                eprintln!("push round {round}   relay: {r:7.0} rows/s");
                relay.push(r);
            } else {
                let r = naive_round(rx_port, received).await;
                eprintln!("push round {round}   naive: {r:7.0} rows/s");
                naive.push(r);
            }
        }
    }
    let per_round: Vec<f64> = relay.iter().zip(&naive).map(|(a, b)| a / b).collect();
    json!({
        "rows": PUSH_ROWS,
        "relayRowsPerSec": stats(&relay),
        "naiveRowsPerSec": stats(&naive),
        "relayOverNaive": {"ofMedians": median(&relay) / median(&naive), "perRound": stats(&per_round)},
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
    let port = free_port();
    let mut server = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("QB_RELAY_BENCH_BASELINE_SERVE", format!("{port} {db}"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forwarder = tokio::spawn(forward(store.clone(), rx_port, stop.clone()));
    let rate = timed(format!("http://127.0.0.1:{port}/inbox/orders"), received).await;
    stop.store(true, Ordering::Relaxed);
    forwarder.await.unwrap();
    server.kill().await.ok();
    drop_db(&db, store).await;
    rate
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
