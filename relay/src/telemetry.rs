//! Traces: the relay's spans, exported over OTLP (HTTP, protobuf) when `tracing.otlp.endpoint`
//! (or `OTEL_EXPORTER_OTLP_ENDPOINT`) is set.
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
//! Off (the default) costs nothing: no exporter, no thread, no span object; [`RelaySpan::start`]
//! reads one unset `OnceLock` and returns an empty span whose methods do nothing, so the
//! rows carry exactly the trace context that was received.

use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use queuebox_config::OtlpConfig;
use queuebox_core::trace::TraceContext;

/// The tracer, set once at start-up when an endpoint is configured; unset means tracing is off.
static TRACER: OnceLock<Tracer> = OnceLock::new();

/// The running exporter; [`Exporter::shutdown`] sends the spans still buffered.
pub struct Exporter(SdkTracerProvider);

/// Starts the OTLP exporter when `otlp.endpoint` is set (validated at configuration load);
/// `None`, with nothing started, when it is not.
pub fn init(otlp: &OtlpConfig) -> anyhow::Result<Option<Exporter>> {
    let Some(endpoint) = &otlp.endpoint else {
        return Ok(None);
    };
    let traces_url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(&traces_url)
        .with_http_client(BlockingClient(
            reqwest::blocking::Client::builder()
                .timeout(std::time::Duration::from_secs(10))
                .build()?,
        ))
        .build()
        .map_err(|e| anyhow::anyhow!("tracing.otlp: the exporter could not be built: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder_empty()
                .with_service_name(otlp.service_name.clone())
                .build(),
        )
        .build();
    let _ = TRACER.set(provider.tracer("queuebox"));
    tracing::info!(endpoint = %traces_url, service = %otlp.service_name, "exporting traces over OTLP");
    Ok(Some(Exporter(provider)))
}

impl Exporter {
    /// Sends the buffered spans and stops the export thread (blocking: call off the runtime).
    pub fn shutdown(self) {
        if let Err(e) = self.0.shutdown() {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }
}

/// Now, when tracing is on: the start of a span that begins before its parent is known.
pub fn span_start() -> Option<SystemTime> {
    TRACER.get().map(|_| SystemTime::now())
}

/// One relay span, or nothing when tracing is off.
pub struct RelaySpan(Option<opentelemetry_sdk::trace::Span>);

impl RelaySpan {
    /// Starts span `name` as a child of `parent()` (a new trace without one). `parent` and
    /// `attributes` are only called when tracing is on; `start` backdates the span (ingest
    /// starts at receipt).
    pub fn start(
        name: &'static str,
        kind: SpanKind,
        parent: impl FnOnce() -> Option<TraceContext>,
        start: Option<SystemTime>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        let Some(tracer) = TRACER.get() else {
            return RelaySpan(None);
        };
        let parent_cx = match parent().as_ref().and_then(span_context) {
            Some(sc) => Context::new().with_remote_span_context(sc),
            None => Context::new(),
        };
        let mut builder = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes());
        if let Some(t) = start {
            builder = builder.with_start_time(t);
        }
        RelaySpan(Some(builder.start_with_context(tracer, &parent_cx)))
    }

    /// The span's own context as W3C values, for the next hop to continue from; `None` when
    /// tracing is off (the caller keeps the context it has).
    pub fn context(&self) -> Option<TraceContext> {
        let sc = self.0.as_ref()?.span_context();
        let state = sc.trace_state().header();
        Some(TraceContext {
            traceparent: format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            ),
            tracestate: (!state.is_empty()).then_some(state),
        })
    }

    /// Records the outcome (`outcome` attribute; an error status with `error`) and ends the span.
    pub fn end(mut self, outcome: &'static str, error: Option<&str>) {
        if let Some(span) = self.0.as_mut() {
            span.set_attribute(KeyValue::new("outcome", outcome));
            if let Some(e) = error {
                span.set_status(Status::error(e.to_string()));
            }
            span.end();
        }
    }
}

/// The remote span context of a validated W3C trace context.
fn span_context(t: &TraceContext) -> Option<SpanContext> {
    let p = &t.traceparent;
    let trace_id = TraceId::from_hex(&p[3..35]).ok()?;
    let span_id = SpanId::from_hex(&p[36..52]).ok()?;
    let flags = u8::from_str_radix(&p[53..55], 16).ok()?;
    let state = t
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        state,
    ))
}

/// The exporter's HTTP client: the relay's reqwest (rustls on ring) in its blocking form,
/// which suits the SDK's batch processor, a plain thread that blocks on each export.
#[derive(Debug)]
struct BlockingClient(reqwest::blocking::Client);

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for BlockingClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let response = self.0.execute(request.try_into()?)?;
        let mut out = opentelemetry_http::Response::builder().status(response.status());
        for (k, v) in response.headers() {
            out = out.header(k, v);
        }
        Ok(out.body(response.bytes()?)?)
    }
}
