//! The Rust side of benchmarks/enqueue/run.sh: `queuebox_core::enqueue` (one row) and
//! `enqueue_many` (many rows, one statement) in a sqlx transaction on one connection.
//!
//!   queuebox-enqueue-bench URL ROWS_PER_TX TXS
//!   queuebox-enqueue-bench migrate URL        (the QueueBox schema, as an application runs it)
//!
//! Timer boundary, the same in every program of run.sh: the connection is open and two
//! transactions of the same shape have run and rolled back (statements prepared) before the
//! clock starts; it stops when the last COMMIT has returned. Each transaction is BEGIN, one
//! enqueue call, COMMIT.

use std::time::Instant;

use queuebox_core::store::postgres::PgStore;
use queuebox_core::{enqueue, enqueue_many, migrate, EnqueueMessage};
use serde_json::json;
use sqlx::{Connection, PgConnection};

async fn one(conn: &mut PgConnection, rows: usize, first: usize, commit: bool) {
    let mut tx = conn.begin().await.expect("begin");
    if rows == 1 {
        enqueue(
            &mut tx,
            &EnqueueMessage::new("bench", json!({ "n": first })),
        )
        .await
        .expect("enqueue");
    } else {
        let msgs: Vec<EnqueueMessage> = (0..rows)
            .map(|i| EnqueueMessage::new("bench", json!({ "n": first + i })))
            .collect();
        enqueue_many(&mut tx, &msgs).await.expect("enqueue_many");
    }
    if commit {
        tx.commit().await.expect("commit");
    } else {
        tx.rollback().await.expect("rollback");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("migrate") {
        let store = PgStore::connect(&args[1], 1).await.expect("connect");
        migrate::postgres::run(&store).await.expect("migrate");
        return;
    }
    let [url, rows, txs] = <[String; 3]>::try_from(args)
        .expect("usage: queuebox-enqueue-bench URL ROWS_PER_TX TXS | migrate URL");
    let rows: usize = rows.parse().expect("ROWS_PER_TX");
    let txs: usize = txs.parse().expect("TXS");
    let mut conn = PgConnection::connect(&url).await.expect("connect");
    for _ in 0..2 {
        one(&mut conn, rows, 0, false).await;
    }
    let t0 = Instant::now();
    for i in 0..txs {
        one(&mut conn, rows, i * rows + 1, true).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({ "system": "queuebox-rust", "rows_per_tx": rows, "txs": txs, "rows": rows * txs,
                "seconds": secs, "rows_per_s": (rows * txs) as f64 / secs })
    );
}
