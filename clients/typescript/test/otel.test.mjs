// Handler spans in the application's own OpenTelemetry tracer (the real SDK, spans kept by
// its in-memory exporter): none while the application registered no provider, a provider
// given to the worker, then the globally registered one. The parent is the row's
// traceparent. Each test file runs in a process of its own, so setting the global provider
// here touches no other file.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Worker } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

let env;
before(async () => {
  env = await freshDatabase("otel");
  // What the Node SDK installs: the active span follows the handler's awaits.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
after(async () => {
  await env?.drop();
});

/** A row with the trace context and one without it that fails (dead at once). */
async function rows(source) {
  await env.db.execute(
    "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)" +
      " VALUES ($1, 'ok', '{}', 'pull', $2, 'congo=t61rcWkgMzE'), ($1, 'boom', '{\"boom\": true}', 'pull', NULL, NULL)",
    [source, TRACEPARENT],
  );
}

/** Runs a worker on `source` until both rows are handled; returns the span active in each handler call. */
async function handle(source, options = {}) {
  await rows(source);
  const inner = new Map();
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, retry: { maxAttempts: 0 }, logger: { warn() {} }, ...options });
  const ac = new AbortController();
  const done = w.run(
    async (m) => {
      await new Promise((r) => setImmediate(r)); // the span stays active across an await
      inner.set(m.idempotencyKey, trace.getActiveSpan()?.spanContext());
      if (m.payload.boom) throw new Error("boom");
    },
    { signal: ac.signal },
  );
  await waitFor(async () => inner.size === 2, 10000, "2 handled");
  ac.abort();
  await done;
  return inner;
}

function sdk() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, provider };
}

function check(exporter, inner, source) {
  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, 2, "one span per handler call");
  const ok = spans.find((s) => s.spanContext().traceId === TRACE_ID);
  const boom = spans.find((s) => s !== ok);
  assert.ok(ok, "the row's trace continues in the handler's span");
  assert.equal(ok.name, `handle ${source}`);
  assert.equal(ok.kind, SpanKind.CONSUMER);
  assert.equal(ok.parentSpanContext?.spanId, "00f067aa0ba902b7", "the row's span is the parent");
  assert.equal(ok.spanContext().traceState?.serialize(), "congo=t61rcWkgMzE");
  assert.equal(ok.attributes["messaging.destination.name"], source);
  assert.equal(ok.attributes["queuebox.attempt"], 0);
  assert.deepEqual(inner.get("ok"), ok.spanContext(), "the span is active inside the handler");
  assert.equal(boom.status.code, SpanStatusCode.ERROR);
  assert.equal(boom.status.message, "boom");
  assert.equal(boom.parentSpanContext, undefined, "a row without trace context starts a trace");
}

test("no registered provider: handlers run without a span of their own", async () => {
  const inner = await handle("otel_none");
  assert.equal(inner.get("ok"), undefined);
  assert.equal(inner.get("boom"), undefined);
});

test("a tracerProvider given to the worker: one CONSUMER span per handler call under the row's trace", async () => {
  const { exporter, provider } = sdk();
  const inner = await handle("otel_given", { tracerProvider: provider });
  check(exporter, inner, "otel_given");
});

test("the provider the application registered globally is used", async () => {
  const { exporter, provider } = sdk();
  assert.ok(trace.setGlobalTracerProvider(provider), "registered");
  const inner = await handle("otel_global");
  check(exporter, inner, "otel_global");
});

test("a tracerProvider that is not one is refused, naming the option", () => {
  assert.throws(() => new Worker({ databaseUrl: env.url, source: "x", tracerProvider: {} }), /`tracerProvider`/);
});
