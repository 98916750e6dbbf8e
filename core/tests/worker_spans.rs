//! The pull worker's `handle` tracing span on a real PostgreSQL: one per handled row, with
//! the row's source, id and attempt, current inside the handler, its outcome recorded; and,
//! with the `otel` feature and the application's tracing-opentelemetry layer on the real
//! OpenTelemetry SDK, exported as `handle <source>` (consumer) whose parent is the row's
//! traceparent.

mod support;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuebox_core::{Outcome, Worker, WorkerOptions};
use sqlx::PgPool;
use support::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The fields of one span as text.
#[derive(Default, Debug, Clone)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

/// Every `handle` span made while it is installed: its id and fields (as recorded so far).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(u64, Fields)>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "handle" {
            let mut f = Fields::default();
            attrs.record(&mut f);
            self.0.lock().unwrap().push((id.into_u64(), f));
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, f)) = self
            .0
            .lock()
            .unwrap()
            .iter_mut()
            .find(|(i, _)| *i == id.into_u64())
        {
            values.record(f);
        }
    }
}

/// A row with the trace context (`ok`, completed) and one without it (`boom`, whose handler
/// fails); runs a worker until both are handled. Returns the id of the span current in each
/// handler call, by idempotency key.
async fn handle_two(pool: &PgPool, url: &str, source: &str) -> BTreeMap<String, Option<u64>> {
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)
         VALUES ($1, 'ok', '{}', 'pull', $2, 'congo=t61rcWkgMzE'), ($1, 'boom', '{}', 'pull', NULL, NULL)",
    )
    .bind(source)
    .bind(TRACEPARENT)
    .execute(pool)
    .await
    .unwrap();
    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(20),
        ..WorkerOptions::new(source)
    };
    let worker = Worker::connect(url, opts).await.unwrap();
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let s = seen.clone();
    let handler = move |task: queuebox_core::Task| {
        let s = s.clone();
        async move {
            let key = task.message().idempotency_key.clone();
            let current = tracing::Span::current().id().map(|i| i.into_u64());
            s.lock().unwrap().insert(key.clone(), current);
            if key == "boom" {
                return Err("boom".into());
            }
            Ok(Outcome::Complete)
        }
    };
    let stop = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !(row_state(pool, "ok").await.0 == "processed"
            && row_state(pool, "boom").await.1 == 1)
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "both rows handled within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    worker.run(handler, stop).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    seen
}

/// The captured span of the handler call that saw span id `id`.
fn span_of(captured: &[(u64, Fields)], id: Option<u64>) -> Fields {
    let id = id.expect("a span is current inside the handler");
    captured
        .iter()
        .find(|(i, _)| *i == id)
        .expect("the current span is a `handle` span")
        .1
        .clone()
}

// The subscriber is the test thread's own (`set_default`), so the runtime runs on that
// thread too.
#[tokio::test(flavor = "current_thread")]
async fn each_handled_row_runs_in_a_handle_span_with_its_outcome() {
    let (store, url) = fresh_store("worker_spans").await;
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let seen = handle_two(store.pool(), &url, "spans").await;
    let captured = capture.0.lock().unwrap().clone();
    assert_eq!(captured.len(), 2, "one span per handled row: {captured:?}");
    let ok = span_of(&captured, seen["ok"]);
    let boom = span_of(&captured, seen["boom"]);
    assert_eq!(ok.0["source"], "spans");
    assert_eq!(ok.0["otel.name"], "handle spans");
    assert_eq!(ok.0["otel.kind"], "consumer");
    assert_eq!(ok.0["attempt"], "0");
    assert_eq!(ok.0["outcome"], "complete");
    assert!(!ok.0.contains_key("otel.status_code"), "{ok:?}");
    let (boom_id,): (uuid::Uuid,) =
        sqlx::query_as("SELECT id FROM inbox WHERE idempotency_key = 'boom'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(boom.0["message_id"], boom_id.to_string());
    assert_eq!(boom.0["outcome"], "failed");
    assert_eq!(boom.0["otel.status_code"], "ERROR");
}

#[tokio::test(flavor = "current_thread")]
#[cfg_attr(
    not(feature = "otel"),
    ignore = "NOT RUN: needs `--features otel` (scripts/test.d/10-rust.sh runs it so)"
)]
async fn with_otel_the_span_continues_the_rows_trace() {
    #[cfg(feature = "otel")]
    otel::run().await;
}

#[cfg(feature = "otel")]
mod otel {
    use super::*;
    use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

    const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";

    /// The SDK's spans as exported, kept in memory.
    #[derive(Debug, Clone, Default)]
    struct Exported(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Exported {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    pub async fn run() {
        let (store, url) = fresh_store("worker_spans_otel").await;
        let exported = Exported::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exported.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        handle_two(store.pool(), &url, "otel_spans").await;
        let spans = exported.0.lock().unwrap().clone();
        assert_eq!(spans.len(), 2, "one span per handled row: {spans:?}");
        let ok = spans
            .iter()
            .find(|s| s.span_context.trace_id().to_string() == TRACE_ID)
            .expect("a span in the row's trace");
        let boom = spans.iter().find(|s| !std::ptr::eq(*s, ok)).unwrap();
        assert_eq!(ok.name, "handle otel_spans");
        assert_eq!(ok.span_kind, SpanKind::Consumer);
        assert_eq!(
            ok.parent_span_id.to_string(),
            PARENT_SPAN_ID,
            "the row's span is the parent"
        );
        assert_eq!(ok.span_context.trace_state().header(), "congo=t61rcWkgMzE");
        assert!(
            matches!(boom.status, Status::Error { .. }),
            "{:?}",
            boom.status
        );
        assert_ne!(
            boom.span_context.trace_id().to_string(),
            TRACE_ID,
            "a row without trace context starts a trace"
        );
    }
}
