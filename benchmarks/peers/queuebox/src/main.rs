//! QueueBox adapter of benchmarks/peers/run.sh: the Rust core `Worker::run` with default
//! options but `concurrency` (so the batch is the core's adaptive one, `WorkerOptions::batch`).
//! Same CLI as every other adapter (see benchmarks/peers/harness.py):
//!   drain URL N CONC | latency URL RATE SECS CONC | enqueue URL N | work URL CONC SLEEP_MS LOG
//! and `batch CONC`, which prints the batch a worker of CONC handlers uses, and
//! `ceiling URL N`, the bare-SQL ceiling's batch x clients sweep (see `ceiling`).
//! Drain: with PEERS_PREENQUEUED set (the harness inserts the rows with `enqueue` and runs
//! VACUUM ANALYZE first, for every system alike) the rows are not inserted again; the clock
//! starts once the worker is connected.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use queuebox_core::store::postgres::PgStore;
use queuebox_core::{migrate, Outcome, Worker, WorkerOptions};
use serde_json::json;
use sqlx::PgPool;

const SOURCE: &str = "bench";

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0
}

async fn setup(url: &str) -> PgPool {
    let store = PgStore::connect(url, 2).await.expect("connect");
    migrate::postgres::run(&store).await.expect("migrate");
    PgPool::connect(url).await.expect("pool")
}

async fn enqueue(pool: &PgPool, n: i64) {
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption)
         SELECT $1, 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $2) g",
    )
    .bind(SOURCE)
    .bind(n)
    .execute(pool)
    .await
    .expect("enqueue");
}

fn options(conc: u32) -> WorkerOptions {
    // QB_BATCH sets an explicit batch (the harness's queuebox-rust-b* systems, which run every
    // language at the same batch); unset, the batch is the core's adaptive default.
    let batch = std::env::var("QB_BATCH").ok().and_then(|v| v.parse().ok());
    WorkerOptions { batch_size: batch, concurrency: conc, ..WorkerOptions::new(SOURCE) }
}

async fn worker(url: &str, conc: u32) -> Worker {
    Worker::connect(url, options(conc)).await.expect("worker")
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a[1] == "batch" {
        println!("{}", options(a[2].parse().unwrap()).batch());
        return;
    }
    let url = a[2].clone();
    let pool = setup(&url).await;
    match a[1].as_str() {
        "enqueue" => enqueue(&pool, a[3].parse().unwrap()).await,
        "drain" => {
            let n: usize = a[3].parse().unwrap();
            let conc: u32 = a[4].parse().unwrap();
            if std::env::var_os("PEERS_PREENQUEUED").is_none() {
                enqueue(&pool, n as i64).await;
            }
            let w = worker(&url, conc).await;
            let done = Arc::new(AtomicUsize::new(0));
            let all = Arc::new(tokio::sync::Notify::new());
            let (d, al) = (done.clone(), all.clone());
            let start = Instant::now();
            let t_done = Arc::new(Mutex::new(None));
            let td = t_done.clone();
            w.run(
                move |_task| {
                    let (d, al, td) = (d.clone(), al.clone(), td.clone());
                    async move {
                        if d.fetch_add(1, Ordering::SeqCst) + 1 == n {
                            *td.lock().unwrap() = Some(Instant::now());
                            al.notify_one();
                        }
                        Ok(Outcome::Complete)
                    }
                },
                async move { all.notified().await },
            )
            .await
            .unwrap();
            let secs = (t_done.lock().unwrap().unwrap() - start).as_secs_f64();
            let processed: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state = 'processed'").fetch_one(&pool).await.unwrap();
            let st = w.stats();
            // QB_METRICS=1 prints the worker's histogram sums and counts (claim and handler
            // time) to stderr, for investigations; run.sh never sets it.
            if std::env::var("QB_METRICS").is_ok() {
                let text = w.metrics_text();
                for l in text.lines().filter(|l| l.contains("_sum") || l.contains("_count")) {
                    eprintln!("{l}");
                }
            }
            println!("{}", json!({"rows_per_s": n as f64 / secs, "seconds": secs, "handled": done.load(Ordering::SeqCst),
                "completed_in_db": processed, "claims": st.claims, "batch": w.options().batch()}));
        }
        "latency" => {
            let rate: f64 = a[3].parse().unwrap();
            let secs: f64 = a[4].parse().unwrap();
            let conc: u32 = a[5].parse().unwrap();
            let total = (rate * secs) as usize;
            let w = Arc::new(worker(&url, conc).await);
            let lat: Arc<Mutex<Vec<f64>>> = Arc::default();
            let l2 = lat.clone();
            let stop = Arc::new(tokio::sync::Notify::new());
            let s2 = stop.clone();
            let w2 = w.clone();
            let run = tokio::spawn(async move {
                w2.run(
                    move |task| {
                        let l2 = l2.clone();
                        async move {
                            let t = task.message().payload["t"].as_f64().unwrap_or(0.0);
                            l2.lock().unwrap().push(now_ms() - t);
                            Ok(Outcome::Complete)
                        }
                    },
                    async move { s2.notified().await },
                )
                .await
            });
            tokio::time::sleep(Duration::from_secs(1)).await;
            let t0 = Instant::now();
            for i in 0..total {
                let due = t0 + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                sqlx::query("INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ($1, $2, $3, 'pull')")
                    .bind(SOURCE)
                    .bind(format!("l{i}"))
                    .bind(json!({"n": i, "t": now_ms()}))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            let offered = total as f64 / t0.elapsed().as_secs_f64();
            let deadline = Instant::now() + Duration::from_secs(30);
            while lat.lock().unwrap().len() < total && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.notify_waiters();
            run.await.unwrap().unwrap();
            let mut v = lat.lock().unwrap().clone();
            let n = v.len();
            println!("{}", json!({"n": n, "expected": total, "offered_per_s": offered, "p50": pct(&mut v, 0.5), "p95": pct(&mut v, 0.95), "p99": pct(&mut v, 0.99), "max": pct(&mut v, 1.0)}));
        }
        "work" => {
            let conc: u32 = a[3].parse().unwrap();
            let sleep_ms: u64 = a[4].parse().unwrap();
            let log = Arc::new(Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(&a[5]).unwrap()));
            let w = worker(&url, conc).await;
            w.run(
                move |task| {
                    let log = log.clone();
                    async move {
                        let n = task.message().payload["n"].as_i64().unwrap_or(-1);
                        writeln!(log.lock().unwrap(), "S {n} {:.1}", now_ms()).unwrap();
                        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
                        writeln!(log.lock().unwrap(), "D {n} {:.1}", now_ms()).unwrap();
                        Ok(Outcome::Complete)
                    }
                },
                std::future::pending::<()>(),
            )
            .await
            .unwrap();
        }
        "ceiling" => {
            let n: i64 = a[3].parse().unwrap();
            let list = |k: &str, d: &str| -> Vec<u32> {
                std::env::var(k).unwrap_or_else(|_| d.into()).split_whitespace().map(|v| v.parse().unwrap()).collect()
            };
            let mut sweep = Vec::new();
            for batch in list("CEILING_BATCHES", "64 256 1024") {
                for clients in list("CEILING_CLIENTS", "1 2 4 8 16 32") {
                    let (rate, secs) = ceiling(&pool, &url, n, batch, clients).await;
                    eprintln!("ceiling batch {batch} clients {clients}: {rate:.0} rows/s");
                    sweep.push(json!({"batch": batch, "clients": clients, "rows_per_s": rate, "seconds": secs}));
                }
            }
            let best = sweep.iter().max_by(|x, y| x["rows_per_s"].as_f64().partial_cmp(&y["rows_per_s"].as_f64()).unwrap()).unwrap().clone();
            println!("{}", json!({"rows_per_s": best["rows_per_s"], "best": {"batch": best["batch"], "clients": best["clients"]}, "sweep": sweep}));
        }
        m => panic!("unknown mode {m}"),
    }
}

/// The plain SKIP LOCKED claim of the ceiling: no lease, fence, owner or aggregate rule.
const CEILING_CLAIM: &str = "WITH c AS (
  UPDATE inbox SET state = 'processing'
   WHERE id IN (SELECT id FROM inbox
                 WHERE source = 'bench' AND consumption = 'pull' AND state = 'pending'
                 ORDER BY scheduled_at, sequence LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING id)
SELECT id FROM c";
const CEILING_COMPLETE: &str = "UPDATE inbox SET state = 'processed', processed_at = clock_timestamp() WHERE id = ANY($1)";

/// One point of the ceiling's sweep: `n` fresh rows (TRUNCATE, insert, VACUUM ANALYZE, as
/// the harness prepares every system's drain), drained by `clients` connections that each
/// claim `batch` rows and complete them with one statement, in autocommit, until a claim
/// comes back empty. Connections are opened and both statements prepared before the clock
/// starts; it stops at the last completion.
async fn ceiling(pool: &PgPool, url: &str, n: i64, batch: u32, clients: u32) -> (f64, f64) {
    use sqlx::{Connection, PgConnection};
    sqlx::query("TRUNCATE inbox").execute(pool).await.unwrap();
    enqueue(pool, n).await;
    sqlx::query("VACUUM ANALYZE").execute(pool).await.unwrap();
    let mut conns = Vec::new();
    for _ in 0..clients {
        let mut c = PgConnection::connect(url).await.expect("ceiling connect");
        sqlx::query(CEILING_CLAIM).bind(0i64).fetch_all(&mut c).await.unwrap();
        sqlx::query(CEILING_COMPLETE).bind(Vec::<sqlx::types::Uuid>::new()).execute(&mut c).await.unwrap();
        conns.push(c);
    }
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let mut last = start;
                loop {
                    let ids: Vec<sqlx::types::Uuid> =
                        sqlx::query_scalar(CEILING_CLAIM).bind(batch as i64).fetch_all(&mut c).await.unwrap();
                    if ids.is_empty() {
                        return last;
                    }
                    sqlx::query(CEILING_COMPLETE).bind(&ids).execute(&mut c).await.unwrap();
                    last = Instant::now();
                }
            })
        })
        .collect();
    let mut end = start;
    for t in tasks {
        end = end.max(t.await.unwrap());
    }
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state = 'processed'").fetch_one(pool).await.unwrap();
    assert_eq!(done, n, "ceiling: every row processed");
    let secs = (end - start).as_secs_f64();
    (n as f64 / secs, secs)
}
