//! What the core benches share (`mod support;` in each): a fresh database with the migrations,
//! environment knobs, medians, and a drain of N rows by a worker with a no-op handler. Each
//! bench uses part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use queuebox_core::migrate;
use queuebox_core::store::postgres::PgStore;
use queuebox_core::{Outcome, Worker};
use sqlx::PgPool;

/// Drops and creates database `name` on the cluster of `admin`, runs the migrations; returns
/// its URL and a pool on it.
pub async fn fresh_database(admin: &str, name: &str) -> (String, PgPool) {
    let root = PgPool::connect(admin).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&root)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&root)
        .await
        .unwrap();
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    let store = PgStore::connect(&url, 4).await.unwrap();
    migrate::postgres::run(&store).await.unwrap();
    (url.clone(), PgPool::connect(&url).await.unwrap())
}

pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Runs `w` with a no-op handler until `rows` handlers have completed (counted in `done`);
/// returns the seconds it took.
pub async fn drain(w: &Worker, rows: usize, done: Arc<AtomicUsize>) -> f64 {
    let all = Arc::new(tokio::sync::Notify::new());
    let a = all.clone();
    let start = Instant::now();
    w.run(
        move |_task| {
            let (d, a) = (done.clone(), a.clone());
            async move {
                if d.fetch_add(1, Ordering::SeqCst) + 1 == rows {
                    a.notify_one();
                }
                Ok(Outcome::Complete)
            }
        },
        async move { all.notified().await },
    )
    .await
    .unwrap();
    start.elapsed().as_secs_f64()
}
