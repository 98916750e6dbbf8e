//! Repeated warnings of one kind, rate-limited: the first is logged in full, the ones that
//! follow are folded into one summary line per [`SUMMARY_INTERVAL`] with their count
//! (`… 1234 more in the last 10 s`), and every one is counted in
//! `queuebox_repeated_warnings_total{kind}`. A kind quiet for a whole interval starts over:
//! its next warning is logged in full again.
//!
//! For warnings a sender or an outage repeats per message (a database outage refuses every
//! ingest request: one WARN each flooded the log with thousands of identical lines).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use crate::metrics::Metrics;

/// How often a kind that keeps repeating gets its summary line.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// The warnings of one kind folded since its last line.
struct Folded {
    /// What the summary line says happened (the warning's own message).
    message: &'static str,
    count: u64,
}

static KINDS: LazyLock<Mutex<HashMap<&'static str, Folded>>> = LazyLock::new(Mutex::default);
static FLUSHER: OnceLock<()> = OnceLock::new();

/// Counts one warning of `kind` and says whether to log it now: `true` for the first of a
/// run, `false` for those folded into the next summary line. Call it in a Tokio runtime.
pub fn admit(metrics: &Metrics, kind: &'static str, message: &'static str) -> bool {
    metrics.inc("queuebox_repeated_warnings_total", &[("kind", kind)]);
    let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
    match kinds.get_mut(kind) {
        Some(f) => {
            f.count += 1;
            false
        }
        None => {
            kinds.insert(kind, Folded { message, count: 0 });
            FLUSHER.get_or_init(|| {
                tokio::spawn(flush_every_interval());
            });
            true
        }
    }
}

/// Every interval: a summary line for each kind with folded warnings; a kind without any
/// is forgotten, so its next warning is logged in full.
async fn flush_every_interval() {
    let mut tick = tokio::time::interval(SUMMARY_INTERVAL);
    tick.tick().await;
    loop {
        tick.tick().await;
        let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
        kinds.retain(|kind, f| {
            if f.count == 0 {
                return false;
            }
            tracing::warn!(
                kind = *kind,
                count = f.count,
                "{} ({} more in the last {} s; counted in queuebox_repeated_warnings_total)",
                f.message,
                f.count,
                SUMMARY_INTERVAL.as_secs()
            );
            f.count = 0;
            true
        });
    }
}
