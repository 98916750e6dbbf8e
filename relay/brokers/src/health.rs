//! Per-component health of broker clients (`rabbitmq.<source>`, `kafka.<destination>` …):
//! readiness reports a broker that is down, naming the component and the last error.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentHealth {
    pub up: bool,
    /// Why it is down (redacted), when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Shared, cheap to clone. A component is down until its client first connects.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<BTreeMap<String, ComponentHealth>>>,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide registry the relay's readiness reads.
    pub fn global() -> Health {
        static GLOBAL: std::sync::OnceLock<Health> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(Health::new).clone()
    }

    /// Registers `component` as down ("connecting") if it is not known yet.
    pub fn register(&self, component: &str) {
        self.inner
            .lock()
            .unwrap()
            .entry(component.to_string())
            .or_insert(ComponentHealth {
                up: false,
                error: Some("connecting".into()),
            });
    }

    pub fn set_up(&self, component: &str) {
        self.inner.lock().unwrap().insert(
            component.to_string(),
            ComponentHealth {
                up: true,
                error: None,
            },
        );
    }

    pub fn set_down(&self, component: &str, error: &str) {
        let error = queuebox_core::headers::redact_error(error, &[]);
        self.inner.lock().unwrap().insert(
            component.to_string(),
            ComponentHealth {
                up: false,
                error: Some(error),
            },
        );
    }

    /// True when every registered component is up.
    pub fn ready(&self) -> bool {
        self.inner.lock().unwrap().values().all(|c| c.up)
    }

    /// The components that are down, with why.
    pub fn down(&self) -> Vec<(String, String)> {
        self.inner
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, c)| !c.up)
            .map(|(k, c)| (k.clone(), c.error.clone().unwrap_or_default()))
            .collect()
    }

    pub fn snapshot(&self) -> BTreeMap<String, ComponentHealth> {
        self.inner.lock().unwrap().clone()
    }

    pub fn get(&self, component: &str) -> Option<ComponentHealth> {
        self.inner.lock().unwrap().get(component).cloned()
    }
}
