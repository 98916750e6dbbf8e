//! The outbox relay's retry gaps, measured from outside: the real `queuebox` binary, a real
//! PostgreSQL and an HTTP receiver that always answers 500 and records when each delivery
//! arrived. The relay must follow the server formula of proto-docs/states.md#outbox (`exp = base ×
//! 2^attempt`, plus 0–25 % jitter, never above 60 s), not the pull workers' ±20 % policy.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::*;

/// When each delivery of each outbox row (`X-Message-Id`) arrived; every answer is 500.
#[derive(Clone, Default)]
struct FailingReceiver {
    arrivals: Arc<Mutex<HashMap<String, Vec<Instant>>>>,
}

impl FailingReceiver {
    async fn start() -> (FailingReceiver, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let r = FailingReceiver::default();
        let app = axum::Router::new().fallback(fail).with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, url)
    }

    fn arrivals(&self, id: uuid::Uuid) -> Vec<Instant> {
        self.arrivals
            .lock()
            .unwrap()
            .get(&id.to_string())
            .cloned()
            .unwrap_or_default()
    }
}

async fn fail(State(r): State<FailingReceiver>, headers: HeaderMap) -> StatusCode {
    let now = Instant::now();
    let id = headers
        .get("x-message-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    r.arrivals.lock().unwrap().entry(id).or_default().push(now);
    StatusCode::INTERNAL_SERVER_ERROR
}

const BASE_MS: u64 = 200;
const MAX_ATTEMPTS: i32 = 4;
/// Poll interval (20 ms), claim, publish and the retry write on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_outbox_deliveries_wait_base_times_two_to_the_attempt_plus_at_most_a_quarter() {
    let (url, store) = fresh_db("backoff").await;
    let (rx, rx_url) = FailingReceiver::start().await;
    let config = base_config(&url, &rx_url);
    assert!(
        config.contains("retryBaseDelayMs: 50"),
        "the base config changed; set the base below another way"
    );
    let config = config.replace(
        "retryBaseDelayMs: 50",
        &format!("retryBaseDelayMs: {BASE_MS}"),
    ) + "routes:\n  - topicPattern: '**'\n    destination: rx\n";
    let _relay = Relay::start(&config).await;

    // Four rows fail side by side: 16 gaps, each with its own jitter sample.
    let mut ids = Vec::new();
    for n in 0..4 {
        let id: uuid::Uuid = sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload, max_attempts) VALUES ($1, '{}', $2) RETURNING id",
        )
        .bind(format!("t.backoff{n}"))
        .bind(MAX_ATTEMPTS)
        .fetch_one(store.pool())
        .await
        .unwrap();
        ids.push(id);
    }
    eventually("every row dead", 15, || async {
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'dead'").await
            == ids.len() as i64
    })
    .await;

    let mut report = Vec::new();
    for id in &ids {
        let times = rx.arrivals(*id);
        assert_eq!(
            times.len(),
            MAX_ATTEMPTS as usize + 1,
            "max_attempts {MAX_ATTEMPTS} gives {} deliveries",
            MAX_ATTEMPTS + 1
        );
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        for (n, gap) in gaps.iter().enumerate() {
            let exp = Duration::from_millis(BASE_MS << n);
            // Never earlier than base × 2^n (the ±20 % client policy goes as low as 0.8×) ...
            assert!(
                *gap >= exp,
                "row {id}: gap {n} was {gap:?}, below base × 2^{n} = {exp:?} (gaps {gaps:?})"
            );
            // ... and never later than +25 % jitter plus the loop's own latency.
            assert!(
                *gap <= exp.mul_f64(1.25) + SLACK,
                "row {id}: gap {n} was {gap:?}, above {exp:?} × 1.25 + {SLACK:?} (gaps {gaps:?})"
            );
        }
        report.push(gaps.iter().map(|g| g.as_millis()).collect::<Vec<_>>());
        let (state, attempt, error): (String, i32, Option<String>) =
            sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
                .bind(id)
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!((state.as_str(), attempt), ("dead", MAX_ATTEMPTS));
        assert!(
            error.as_deref().unwrap_or_default().starts_with("HTTP 500"),
            "last_error: {error:?}"
        );
    }
    println!(
        "measured gaps (ms) per row, expected [{BASE_MS}, {}, {}, {}] +0–25 %: {report:?}",
        BASE_MS * 2,
        BASE_MS * 4,
        BASE_MS * 8
    );
}
