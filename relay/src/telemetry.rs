//! The relay's spans (`queuebox_core::otlp` makes and exports them), exported when
//! `tracing.otlp.endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) is set.
//!
//! | span | from → to | parent |
//! |---|---|---|
//! | `ingest` | a source received the message → the inbox row is stored | the received `traceparent` (none: a new trace) |
//! | `relay.forward` | a push row was claimed → its outbox row is written | the inbox row's trace |
//! | `outbox.publish` | one delivery attempt | the outbox row's trace |
//!
//! Each span's own context is what the next hop continues from: `ingest`'s is stored on the
//! inbox row, `relay.forward`'s on the outbox row, `outbox.publish`'s is the `traceparent`
//! the destination receives. The trace id stays the one the sender started.
//!
//! Off (the default) costs nothing: no exporter, no thread, no span object; [`span`] reads
//! one unset `OnceLock`, so the rows carry exactly the trace context that was received.

use std::sync::OnceLock;
use std::time::SystemTime;

use queuebox_config::OtlpConfig;
use queuebox_core::otlp::{Exporter, KeyValue, Span, SpanKind, Tracer};
use queuebox_core::trace::TraceContext;

/// The tracer, set once at start-up when an endpoint is configured; unset means tracing is off.
static TRACER: OnceLock<Tracer> = OnceLock::new();

/// Starts the OTLP exporter when `otlp.endpoint` is set (validated at configuration load);
/// `None`, with nothing started, when it is not. Blocking (see [`Exporter::start`]).
pub fn init(otlp: &OtlpConfig) -> anyhow::Result<Option<Exporter>> {
    let Some(endpoint) = &otlp.endpoint else {
        return Ok(None);
    };
    let exporter = Exporter::start(endpoint, &otlp.service_name)
        .map_err(|e| anyhow::anyhow!("tracing.otlp: the exporter could not be started: {e}"))?;
    let _ = TRACER.set(exporter.tracer().clone());
    Ok(Some(exporter))
}

/// Now, when tracing is on: the start of a span that begins before its parent is known.
pub fn span_start() -> Option<SystemTime> {
    TRACER.get().map(|_| SystemTime::now())
}

/// A relay span ([`Span::start`] with the relay's tracer, if any).
pub fn span(
    name: &'static str,
    kind: SpanKind,
    parent: impl FnOnce() -> Option<TraceContext>,
    start: Option<SystemTime>,
    attributes: impl FnOnce() -> Vec<KeyValue>,
) -> Span {
    Span::start(TRACER.get(), name, kind, parent, start, attributes)
}
