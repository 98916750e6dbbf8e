//! The pull worker of the chaos ledger: claims the pull rows of one source with
//! `queuebox_core::Worker` (the shared Rust core every language's client wraps) and prints one
//! line per handler call to stdout — `{"id", "key", "attempt"}`, a tab, then the payload as
//! serde_json writes it (JSON text never holds a raw tab) — before
//! completing the row. The harness (tests/chaos/paths.py, `NatsToPullWorker`) reads the lines
//! into its ledger and SIGKILLs this process at random moments: a handler call printed but
//! not completed before a kill is handled again once its lease expires, which the ledger
//! counts as a duplicate explained by that kill.
//!
//! `queuebox-chaos-worker <database-url> <source> <lease-ms>`; stops on SIGTERM or Ctrl-C.

use std::io::Write;
use std::time::Duration;

use queuebox_core::{Outcome, Task, Worker, WorkerOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, source, lease_ms] = args.as_slice() else {
        return Err("usage: queuebox-chaos-worker <database-url> <source> <lease-ms>".into());
    };
    let options = WorkerOptions {
        batch_size: Some(20),
        concurrency: 4,
        lease: Duration::from_millis(lease_ms.parse()?),
        poll_interval: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(2),
        ..WorkerOptions::new(source.as_str())
    };
    let worker = Worker::connect(url, options).await?;
    let handler = |task: Task| async move {
        let m = task.message();
        let meta = serde_json::json!({"id": m.id, "key": m.idempotency_key, "attempt": m.attempt});
        let line = format!("{meta}\t{}", m.payload);
        // One line, flushed at once: a line the harness reads is a call that happened.
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| format!("stdout: {e}"))?;
        Ok(Outcome::Complete)
    };
    let stop = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
    };
    worker.run(handler, stop).await?;
    Ok(())
}
