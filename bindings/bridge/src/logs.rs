//! The core's `tracing` records, forwarded to the host language's logger. One layer for all
//! three bindings: each event becomes a [`Record`] (level, target, message, the other fields
//! as a JSON object) handed to the one [`Sink`] the binding installed with [`set_sink`]; the
//! C ABI calls a C function pointer with it, Node a threadsafe function, Python a queue a
//! Python thread drains.
//!
//! The level filter lives here, in Rust: the layer reports the sink's minimum level as its
//! `max_level_hint`, so `tracing`'s global level gate stops a disabled event in its macro
//! (one atomic comparison) before any field is formatted. Without a sink nothing is enabled.
//!
//! Records are forwarded on the thread that emits them (a runtime thread, or the caller's
//! thread in a blocking call). An event raised while this thread is already inside the sink
//! (the host's logger called back into QueueBox) is dropped rather than forwarded in a loop.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once, RwLock};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Severity of a record, numbered as the C ABI's `QbLogLevel` (lower is more severe; a
/// minimum level forwards it and everything more severe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LogLevel {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl LogLevel {
    /// The level numbered `n` (1 error .. 5 trace); `None` for anything else.
    pub fn from_number(n: u32) -> Option<LogLevel> {
        Some(match n {
            1 => LogLevel::Error,
            2 => LogLevel::Warn,
            3 => LogLevel::Info,
            4 => LogLevel::Debug,
            5 => LogLevel::Trace,
            _ => return None,
        })
    }

    /// The level named `name` (`error`, `warn`, `info`, `debug`, `trace`, any case).
    pub fn from_name(name: &str) -> Option<LogLevel> {
        Some(match name.to_ascii_lowercase().as_str() {
            "error" => LogLevel::Error,
            "warn" | "warning" => LogLevel::Warn,
            "info" => LogLevel::Info,
            "debug" => LogLevel::Debug,
            "trace" => LogLevel::Trace,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }

    fn of(level: &Level) -> LogLevel {
        match *level {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            Level::DEBUG => LogLevel::Debug,
            _ => LogLevel::Trace,
        }
    }

    fn filter(self) -> LevelFilter {
        match self {
            LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Trace => LevelFilter::TRACE,
        }
    }
}

/// One forwarded event.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub level: LogLevel,
    /// The emitting module, e.g. `queuebox_core::worker`.
    pub target: String,
    pub message: String,
    /// Every field but the message, e.g. `{"message_id": "…", "source": "orders"}`.
    pub fields: Map<String, Value>,
}

impl Record {
    /// The fields as JSON object text.
    pub fn fields_json(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }
}

/// Where records go. Called on the emitting thread; must not block for long.
pub type Sink = Arc<dyn Fn(&Record) + Send + Sync>;

/// 0 while no sink is installed; otherwise the minimum level's number.
static MIN_LEVEL: AtomicU8 = AtomicU8::new(0);
static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static INSTALL: Once = Once::new();
static INSTALL_ERROR: RwLock<Option<String>> = RwLock::new(None);

thread_local! {
    /// True while this thread runs the sink (see the module doc).
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// True while the current thread is inside the sink: a binding refuses [`set_sink`] there,
/// since replacing the sink waits for running calls of it to return.
pub fn in_sink() -> bool {
    IN_SINK.with(|c| c.get())
}

/// Installs `sink` for records at `min_level` and more severe, replacing any previous sink;
/// `None` removes it. When this returns, the previous sink is not running and is never
/// called again (a binding may free what it captured). Fails when another `tracing`
/// subscriber was made the process's global one before the first call, or when called from
/// inside the sink.
pub fn set_sink(sink: Option<Sink>, min_level: LogLevel) -> Result<(), String> {
    if in_sink() {
        return Err("the log callback cannot be changed from inside the log callback".into());
    }
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(ForwardLayer);
        if let Err(e) = tracing::subscriber::set_global_default(subscriber) {
            *INSTALL_ERROR.write().unwrap() = Some(format!(
                "cannot forward logs: another tracing subscriber is already installed ({e})"
            ));
        }
    });
    if let Some(e) = INSTALL_ERROR.read().unwrap().clone() {
        return Err(e);
    }
    let level = if sink.is_some() { min_level as u8 } else { 0 };
    // The write lock waits for calls of the previous sink to return.
    *SINK.write().unwrap_or_else(|p| p.into_inner()) = sink;
    MIN_LEVEL.store(level, Ordering::SeqCst);
    // Recompute `tracing`'s global max level from the layer's new hint.
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

fn enabled_at(level: &Level) -> bool {
    let min = MIN_LEVEL.load(Ordering::Relaxed);
    min != 0 && (LogLevel::of(level) as u8) <= min
}

/// The layer that hands events to the sink.
struct ForwardLayer;

impl<S: Subscriber> Layer<S> for ForwardLayer {
    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        enabled_at(metadata.level())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(
            LogLevel::from_number(MIN_LEVEL.load(Ordering::SeqCst) as u32)
                .map_or(LevelFilter::OFF, LogLevel::filter),
        )
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !enabled_at(event.metadata().level()) || in_sink() {
            return;
        }
        let guard = SINK.read().unwrap_or_else(|p| p.into_inner());
        let Some(sink) = guard.as_ref() else { return };
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        let record = Record {
            level: LogLevel::of(event.metadata().level()),
            target: event.metadata().target().to_string(),
            message: visitor.message,
            fields: visitor.fields,
        };
        IN_SINK.with(|c| c.set(true));
        // A panicking host logger must not unwind through the core's code.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(&record)));
        IN_SINK.with(|c| c.set(false));
    }
}

/// Collects an event's fields: `message` apart, the rest as JSON values.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
        } else {
            self.fields.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%x` fields arrive here already wrapped to print their Display text.
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}
