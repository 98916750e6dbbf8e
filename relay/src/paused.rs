//! Pause and resume at runtime (docs/operations.md, "Pausing"): the names checked before a
//! pause, and the relay's view of the paused set.
//!
//! The set is stored in the database (`queuebox_paused`, migration 15), so every replica and
//! every worker process obeys one set. The pull and push claims read the table themselves;
//! what this module adds is the outbox side, whose destinations and route globs only the
//! relay knows: once a second [`run`] reads the set, turns the paused destinations and topics
//! into the outbox claim's exclusion ([`RelayStore::exclude_outbox_topics`]), sets the
//! `queuebox_paused{kind,name}` gauge and keeps the list `/health/ready` shows. The
//! [`PausedView`] holds the store, configuration and metrics it needs, so the loop and the
//! admin API refresh it without the rest of the relay's state.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use queuebox_config::Config;
use queuebox_core::store::relay::{topics_pattern, PauseKind, Paused, RelayStore};
use tokio_util::sync::CancellationToken;

use crate::liveness::Heartbeat;
use crate::metrics::Metrics;

/// How often the relay reads the paused set: the bound on how late a pause of a destination
/// or topic reaches the outbox claim.
pub const REFRESH: Duration = Duration::from_secs(1);

/// The paused set as last read, and every `(kind, name)` the gauge has shown (a resumed one
/// goes to 0 rather than vanishing, so a dashboard sees the change).
pub struct PausedView {
    store: Arc<dyn RelayStore>,
    cfg: Arc<Config>,
    metrics: Arc<Metrics>,
    /// One [`Self::refresh`] at a time: the loop's read, older than an admin change's, must not
    /// set the outbox exclusion after the change's own refresh did (a paused destination
    /// would be claimed until the next second).
    refreshing: tokio::sync::Mutex<()>,
    current: RwLock<Vec<Paused>>,
    shown: RwLock<BTreeSet<(PauseKind, String)>>,
}

impl PausedView {
    /// Nothing read yet: [`Self::refresh`] before the first claim.
    pub fn new(store: Arc<dyn RelayStore>, cfg: Arc<Config>, metrics: Arc<Metrics>) -> Self {
        Self {
            store,
            cfg,
            metrics,
            refreshing: tokio::sync::Mutex::default(),
            current: RwLock::default(),
            shown: RwLock::default(),
        }
    }

    /// What is paused, as of the last read.
    pub fn current(&self) -> Vec<Paused> {
        self.current.read().expect("paused view").clone()
    }

    /// Reads the paused set once: the outbox claim's exclusion, the gauge and the view.
    pub async fn refresh(&self) -> queuebox_core::Result<()> {
        let _one = self.refreshing.lock().await;
        let list = self.store.list_paused().await?;
        self.store
            .exclude_outbox_topics(outbox_exclusion(&self.cfg, &list));
        let mut shown = self.shown.write().expect("paused view");
        for p in &list {
            shown.insert((p.kind, p.name.clone()));
        }
        for (kind, name) in shown.iter() {
            let on = list.iter().any(|p| p.kind == *kind && &p.name == name);
            self.metrics.set(
                "queuebox_paused",
                &[("kind", kind.as_str()), ("name", name)],
                if on { 1.0 } else { 0.0 },
            );
        }
        *self.current.write().expect("paused view") = list;
        Ok(())
    }
}

/// The outbox claim's exclusion for `list`: paused topics, and the topics whose first
/// matching route goes to a paused destination (the route the relay would deliver by).
pub fn outbox_exclusion(cfg: &Config, list: &[Paused]) -> Option<String> {
    let paused =
        |kind: PauseKind, name: &str| list.iter().any(|p| p.kind == kind && p.name == name);
    let topics: Vec<&str> = list
        .iter()
        .filter(|p| p.kind == PauseKind::Topic)
        .map(|p| p.name.as_str())
        .collect();
    let routes: Vec<(&str, bool)> = cfg
        .routes
        .iter()
        .map(|r| {
            (
                r.topic_pattern.as_str(),
                paused(PauseKind::Destination, &r.destination),
            )
        })
        .collect();
    topics_pattern(&topics, &routes)
}

const PAUSED_READ_FAILED: &str = "could not read the paused set; keeping the last one";

/// The loop: [`PausedView::refresh`] every [`REFRESH`]. A failed read keeps the last set
/// (the database being down stops the claims anyway) and is logged.
pub async fn run(view: Arc<PausedView>, stop: CancellationToken, hb: Arc<Heartbeat>) {
    while !stop.is_cancelled() {
        hb.beat(REFRESH * 2);
        if let Err(e) = view.refresh().await {
            // Every second during a database outage: the first in full, then a count per 10 s.
            if crate::warn_limit::admit(&view.metrics, "paused_read_failed", PAUSED_READ_FAILED) {
                tracing::warn!(error = %e, "{PAUSED_READ_FAILED}");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(REFRESH) => {}
        }
    }
}

/// Refuses a name that is not a source, destination or topic this system has, naming it.
/// A source is known to the relay's configuration, or by an inbox row (a pull source only
/// applications enqueue to); a destination is the configuration's; a topic must match a
/// route. Without a configuration (the CLI given only a database URL) a destination or a
/// topic cannot be checked, and is refused saying so.
pub async fn check_name(
    cfg: Option<&Config>,
    store: &dyn RelayStore,
    kind: PauseKind,
    name: &str,
) -> anyhow::Result<()> {
    if name.trim().is_empty() {
        anyhow::bail!("the {} name is empty", kind.as_str());
    }
    let known = match kind {
        PauseKind::Source => {
            cfg.is_some_and(|c| c.sources.contains_key(name)) || store.source_seen(name).await?
        }
        PauseKind::Destination => {
            let Some(cfg) = cfg else {
                anyhow::bail!(
                    "cannot check destination '{name}' without the relay's configuration (give --config)"
                );
            };
            if !cfg.destinations.contains_key(name) {
                let names: Vec<&str> = cfg.destinations.keys().map(String::as_str).collect();
                anyhow::bail!(
                    "unknown destination '{name}': the configuration's destinations are {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            }
            true
        }
        PauseKind::Topic => {
            let Some(cfg) = cfg else {
                anyhow::bail!(
                    "cannot check topic '{name}' without the relay's configuration (give --config)"
                );
            };
            if cfg.route_for(name).is_none() {
                anyhow::bail!("unknown topic '{name}': no route of the configuration matches it");
            }
            true
        }
    };
    if !known {
        anyhow::bail!(
            "unknown source '{name}': no source of that name in the configuration and no inbox row has it"
        );
    }
    Ok(())
}

/// Pause (`pause = true`) or resume `name`, after [`check_name`]: what the CLI and the admin
/// API both do. Returns whether anything changed (false: paused already, or not paused).
pub async fn set(
    cfg: Option<&Config>,
    store: &dyn RelayStore,
    kind: PauseKind,
    name: &str,
    pause: bool,
) -> anyhow::Result<bool> {
    let changed = if pause {
        check_name(cfg, store, kind, name).await?;
        store.pause(kind, name).await?
    } else {
        // A paused name resumes whatever the configuration says now (a destination removed
        // while paused must not stay paused for good); only a name that was not paused is
        // checked, so a typo is an error rather than "was not paused".
        let resumed = store.resume(kind, name).await?;
        if !resumed {
            check_name(cfg, store, kind, name).await?;
        }
        resumed
    };
    tracing::info!(
        kind = kind.as_str(),
        name,
        changed,
        "{}",
        if pause { "paused" } else { "resumed" }
    );
    Ok(changed)
}
