//! Spans exported over OTLP (HTTP, protobuf), shared by the relay (`ingest`, `relay.forward`,
//! `outbox.publish`) and the pull worker (`handle`): the OpenTelemetry API makes the spans,
//! the SDK's batch processor sends them from a thread of its own.
//!
//! A span continues from a row's validated W3C context ([`crate::trace::TraceContext`]) and
//! its own [`Span::context`] is what the next hop continues from, so the trace id stays the
//! one the sender started.
//!
//! Tracing off costs nothing: [`Span::start`] without a tracer makes no span object and
//! calls neither the parent nor the attribute closure; every method of the empty span does
//! nothing.

use std::time::{Duration, SystemTime};

pub use opentelemetry::trace::SpanKind;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::Context;
pub use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
pub use opentelemetry_sdk::trace::Tracer;

use crate::trace::TraceContext;

/// The standard variable naming the collector's base URL, honoured by the relay and the
/// pull worker when their own setting is absent.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Why `endpoint` cannot be an OTLP/HTTP collector's base URL, if it cannot.
pub fn check_endpoint(endpoint: &str) -> Result<(), String> {
    match url::Url::parse(endpoint) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => Err(format!(
            "scheme `{}` is not http or https (OTLP over HTTP)",
            u.scheme()
        )),
        Ok(u) if u.host_str().is_none_or(str::is_empty) => Err("has no host".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("`{endpoint}` is not a URL: {e}")),
    }
}

/// A running exporter: its tracer, and the provider that sends what is buffered on
/// [`Exporter::shutdown`].
pub struct Exporter {
    provider: SdkTracerProvider,
    tracer: Tracer,
}

impl Exporter {
    /// Starts exporting to `<endpoint>/v1/traces` (the base URL, as in
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`) with `service.name` = `service_name`. Blocking: it
    /// builds a blocking HTTP client, so call it off an async runtime's worker threads.
    pub fn start(endpoint: &str, service_name: &str) -> Result<Exporter, String> {
        check_endpoint(endpoint)?;
        let traces_url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(&traces_url)
            .with_http_client(BlockingClient(client))
            .build()
            .map_err(|e| e.to_string())?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder_empty()
                    .with_service_name(service_name.to_string())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("queuebox");
        tracing::info!(endpoint = %traces_url, service = %service_name, "exporting traces over OTLP");
        Ok(Exporter { provider, tracer })
    }

    pub fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// Sends the buffered spans and stops the export thread (blocking, like [`Self::start`]).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }
}

/// One span, or nothing when tracing is off.
pub struct Span(Option<opentelemetry_sdk::trace::Span>);

impl Span {
    /// Starts span `name` with `tracer` (none: tracing is off, nothing is made) as a child
    /// of `parent()` (a new trace without one). `start` backdates the span (the relay's
    /// ingest starts at receipt).
    pub fn start(
        tracer: Option<&Tracer>,
        name: &'static str,
        kind: SpanKind,
        parent: impl FnOnce() -> Option<TraceContext>,
        start: Option<SystemTime>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        let Some(tracer) = tracer else {
            return Span(None);
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
        Span(Some(builder.start_with_context(tracer, &parent_cx)))
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
pub(crate) fn span_context(t: &TraceContext) -> Option<SpanContext> {
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

/// The exporter's HTTP client: reqwest 0.12 (rustls on ring, as the rest of QueueBox) in its
/// blocking form, which suits the SDK's batch processor, a plain thread that blocks on each
/// export. (opentelemetry-otlp's own reqwest feature brings reqwest 0.13 with aws-lc-rs.)
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
