//! Retention: off by default; per table, deletes only terminal rows (outbox `sent`/`dead`,
//! inbox `processed`/`dead`, `cancelled` in both), at most `batchSize` per statement until
//! none remain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_config::{parse_duration, TableRetention};
use tokio_util::sync::CancellationToken;

use crate::liveness::Heartbeat;
use crate::relay_loop::sleep_or_stop;
use crate::state::AppState;

/// How often the loop looks whether a table's cleanup is due.
pub(crate) const TICK: Duration = Duration::from_millis(200);

/// The tables whose policy is not `DISABLED`; with none, the service does not run.
pub(crate) fn active_tables(
    r: &queuebox_config::RetentionConfig,
) -> Vec<(&'static str, &TableRetention)> {
    [("outbox", &r.outbox), ("inbox", &r.inbox)]
        .into_iter()
        .filter(|(_, t)| t.policy != "DISABLED")
        .collect()
}

pub async fn run(st: AppState, stop: CancellationToken, hb: Arc<Heartbeat>) {
    let tables = active_tables(&st.cfg.retention);
    let mut next: Vec<Instant> = tables.iter().map(|_| Instant::now()).collect();
    while !stop.is_cancelled() {
        for (i, (table, t)) in tables.iter().enumerate() {
            if Instant::now() < next[i] {
                continue;
            }
            let t0 = Instant::now();
            let mut total = 0u64;
            loop {
                if stop.is_cancelled() {
                    return;
                }
                hb.beat(Duration::ZERO);
                let age = t
                    .max_age
                    .as_deref()
                    .and_then(parse_duration)
                    .unwrap_or(Duration::MAX);
                let n = match (*table, t.policy.as_str()) {
                    ("outbox", "COUNT") => {
                        st.store
                            .delete_excess_outbox(t.max_count.unwrap_or(u64::MAX), t.batch_size)
                            .await
                    }
                    ("outbox", _) => st.store.delete_old_outbox(age, t.batch_size).await,
                    _ => st.store.delete_old_inbox(age, t.batch_size).await,
                };
                match n {
                    Ok(0) => break,
                    Ok(n) => total += n,
                    Err(e) => {
                        tracing::warn!(table, error = %e, "retention run failed");
                        break;
                    }
                }
            }
            st.metrics.add(
                "queuebox_cleanup_messages_deleted_total",
                &[("table", table)],
                total,
            );
            st.metrics.observe(
                "queuebox_cleanup_duration_seconds",
                &[("table", table)],
                t0.elapsed(),
            );
            st.metrics.set(
                "queuebox_cleanup_last_run_timestamp",
                &[("table", table)],
                chrono::Utc::now().timestamp() as f64,
            );
            if total > 0 {
                tracing::info!(table, deleted = total, "retention deleted terminal rows");
            }
            next[i] = Instant::now()
                + parse_duration(&t.cleanup_interval).unwrap_or(Duration::from_secs(3600));
        }
        hb.beat(TICK);
        sleep_or_stop(&stop, TICK).await;
    }
}
