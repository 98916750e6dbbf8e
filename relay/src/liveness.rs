//! Liveness of the background loops, for `/health/ready`: each loop owns a [`Heartbeat`]
//! and, before every step, says how long the step may take; a loop that overruns that
//! deadline (stuck on a lock, a hung call) or whose task ended (returned or panicked) is
//! `down`, and a loop the configuration turns off is `disabled`, which never fails readiness.
//!
//! The deadline of a step is its own bound (the sleep it is about to take, the publish
//! timeout of a message) plus a grace of three poll intervals and the pool's
//! `database.connectionTimeoutMs` + 1 s: a statement may legitimately wait that long for a
//! connection before it fails and the loop goes on.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One loop's heartbeat: the time by which it must beat again, and whether its task ended.
pub(crate) struct Heartbeat {
    origin: Instant,
    grace: Duration,
    /// Milliseconds after `origin` by which the next beat is due.
    due_ms: AtomicU64,
    ended: AtomicBool,
}

impl Heartbeat {
    fn new(grace: Duration) -> Self {
        let hb = Heartbeat {
            origin: Instant::now(),
            grace,
            due_ms: AtomicU64::new(0),
            ended: AtomicBool::new(false),
        };
        hb.beat(Duration::ZERO);
        hb
    }

    /// A heartbeat nobody watches, for tests of a loop.
    #[cfg(test)]
    pub(crate) fn unwatched() -> Self {
        Self::new(Duration::from_secs(3600))
    }

    /// The loop is alive and starts a step that may take up to `allowance` (plus the grace).
    pub fn beat(&self, allowance: Duration) {
        let due = self.origin.elapsed() + allowance + self.grace;
        self.due_ms.store(due.as_millis() as u64, Ordering::Relaxed);
    }

    fn status(&self) -> LoopStatus {
        if self.ended.load(Ordering::Relaxed) {
            return LoopStatus::Down("the loop's task ended".into());
        }
        let now = self.origin.elapsed().as_millis() as u64;
        let due = self.due_ms.load(Ordering::Relaxed);
        if now > due {
            LoopStatus::Down(format!(
                "no progress for {} ms past its deadline",
                now - due
            ))
        } else {
            LoopStatus::Up
        }
    }
}

/// The grace of a loop polling every `poll_interval` on a pool whose acquire timeout is
/// `connection_timeout`.
pub(crate) fn grace(poll_interval: Duration, connection_timeout: Duration) -> Duration {
    poll_interval * 3 + connection_timeout + Duration::from_secs(1)
}

/// What `/health/ready` reports for one loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LoopStatus {
    Up,
    Disabled,
    Down(String),
}

impl LoopStatus {
    /// True unless the loop is down.
    pub fn ready(&self) -> bool {
        !matches!(self, LoopStatus::Down(_))
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            LoopStatus::Up => serde_json::json!({"status": "up"}),
            LoopStatus::Disabled => serde_json::json!({"status": "disabled"}),
            LoopStatus::Down(why) => serde_json::json!({"status": "down", "reason": why}),
        }
    }
}

enum Slot {
    Disabled,
    Running(Arc<Heartbeat>),
}

/// The loops of this process by component name (`outbox-poller`, `inbox-relay`,
/// `retention-service`).
#[derive(Clone, Default)]
pub(crate) struct Loops(Arc<Mutex<BTreeMap<&'static str, Slot>>>);

impl Loops {
    /// Records `name` as turned off by the configuration.
    pub fn disabled(&self, name: &'static str) {
        self.0.lock().expect("loops").insert(name, Slot::Disabled);
    }

    /// Spawns the loop `run` builds from its heartbeat; when the task ends, however it
    /// ends, the loop counts as down.
    pub fn spawn<F>(
        &self,
        name: &'static str,
        grace: Duration,
        run: impl FnOnce(Arc<Heartbeat>) -> F,
    ) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let hb = Arc::new(Heartbeat::new(grace));
        self.0
            .lock()
            .expect("loops")
            .insert(name, Slot::Running(hb.clone()));
        let fut = run(hb.clone());
        tokio::spawn(async move {
            // Dropped when the future returns and when a panic unwinds it.
            let _ended = EndGuard(hb);
            fut.await;
        })
    }

    /// Every loop's status, by name.
    pub fn statuses(&self) -> BTreeMap<&'static str, LoopStatus> {
        self.0
            .lock()
            .expect("loops")
            .iter()
            .map(|(name, slot)| {
                let s = match slot {
                    Slot::Disabled => LoopStatus::Disabled,
                    Slot::Running(hb) => hb.status(),
                };
                (*name, s)
            })
            .collect()
    }
}

struct EndGuard(Arc<Heartbeat>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beat_past_its_deadline_is_down_and_a_fresh_one_is_up() {
        let hb = Heartbeat::new(Duration::from_millis(20));
        assert_eq!(hb.status(), LoopStatus::Up);
        std::thread::sleep(Duration::from_millis(40));
        assert!(!hb.status().ready());
        hb.beat(Duration::from_millis(100));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(
            hb.status(),
            LoopStatus::Up,
            "the step's own allowance counts"
        );
    }

    #[tokio::test]
    async fn a_loop_whose_task_panics_or_returns_is_down() {
        let loops = Loops::default();
        loops.disabled("off");
        let panicked = loops.spawn("panics", Duration::from_secs(60), |_| async {
            panic!("boom")
        });
        let returned = loops.spawn("returns", Duration::from_secs(60), |_| async {});
        let _ = panicked.await;
        let _ = returned.await;
        let s = loops.statuses();
        assert_eq!(s["off"], LoopStatus::Disabled);
        assert!(!s["panics"].ready() && !s["returns"].ready(), "{s:?}");
    }
}
