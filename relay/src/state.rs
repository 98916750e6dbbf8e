//! [`AppState`]: what the HTTP handlers and the relay loops share, built once by
//! `app::run`. It sits below every module that uses it and imports none of them, so the
//! relay's modules form no circle through it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use queuebox_config::Config;
use queuebox_core::backend::Database;
use queuebox_core::store::relay::RelayStore;

use crate::destinations::{self, Publisher};
use crate::liveness::Loops;
use crate::metrics::Metrics;
use crate::sources::Inbox;

/// What every handler and loop shares.
#[derive(Clone)]
pub struct AppState {
    pub cfg: Arc<Config>,
    /// The connected backend (PostgreSQL or SQL Server): migrations, readiness, pool gauges.
    pub db: Arc<dyn Database>,
    /// The relay store of [`Self::db`]: the inbox relay, outbox relay, retention and admin.
    pub store: Arc<dyn RelayStore>,
    pub inbox: Inbox,
    pub metrics: Arc<Metrics>,
    pub publishers: Arc<BTreeMap<String, Arc<dyn Publisher>>>,
    /// Every transform and key expression, compiled once at start-up.
    pub transforms: Arc<crate::transforms::Transforms>,
    pub draining: Arc<AtomicBool>,
    /// Ingest requests being handled now: the shutdown drain waits for them.
    pub ingesting: Arc<std::sync::atomic::AtomicUsize>,
    pub secrets: Arc<Vec<String>>,
    /// The background loops' liveness, for `/health/ready`.
    pub loops: Loops,
    /// The routes' `routingKeyTemplate`s, compiled.
    pub route_keys: Arc<destinations::route_keys::RouteKeys>,
    /// The HTTP sources' `rateLimit` buckets.
    pub rate_limits: Arc<crate::sources::rate_limit::RateLimits>,
    /// The owner key the relay's claims record, so another relay can take over this one's
    /// rows within seconds of a crash (`relay_owner`).
    pub owner: Arc<crate::relay_owner::RelayOwner>,
    /// The paused set as last read (`paused`): readiness and the admin API show it.
    pub paused: Arc<crate::paused::PausedView>,
}
