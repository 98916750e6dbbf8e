// A handler gets the row's W3C trace context as message.trace (the row's own while
// tracing is off, the core's handle span's with `otlpEndpoint`), to continue the trace in its
// own OpenTelemetry SDK.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Worker } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

let env;
before(async () => {
  env = await freshDatabase("trace");
});
after(async () => {
  await env?.drop();
});

test("the handler gets the row's trace context, none for a row without one", async (t) => {
  if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT) {
    t.skip("not run: OTEL_EXPORTER_OTLP_ENDPOINT is set for this process");
    return;
  }
  const source = "traced";
  await env.db.execute(
    "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)" +
      " VALUES ($1, 't1', '{}', 'pull', $2, 'congo=t61rcWkgMzE'), ($1, 't2', '{}', 'pull', NULL, NULL)",
    [source, TRACEPARENT],
  );
  const seen = new Map();
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } });
  const ac = new AbortController();
  const done = w.run(async (m) => void seen.set(m.idempotencyKey, m.trace), { signal: ac.signal });
  await waitFor(async () => seen.size === 2, 10000, "2 handled");
  ac.abort();
  await done;
  assert.deepEqual(seen.get("t1"), { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE" });
  assert.equal(seen.get("t2"), undefined);
});

test("with otlpEndpoint the handler gets the handle span's context and the span is exported", async () => {
  let posts = 0;
  const collector = createServer((req, res) => {
    if (req.url === "/v1/traces" && req.headers["content-type"] === "application/x-protobuf") posts++;
    req.resume();
    req.on("end", () => res.end());
  });
  await new Promise((resolve) => collector.listen(0, "127.0.0.1", resolve));
  try {
    const source = "spanned";
    await env.db.execute(
      "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent) VALUES ($1, 't1', '{}', 'pull', $2)",
      [source, TRACEPARENT],
    );
    let got;
    const otlpEndpoint = `http://127.0.0.1:${collector.address().port}`;
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, otlpEndpoint, logger: { warn() {} } });
    const ac = new AbortController();
    const done = w.run(async (m) => void (got = m.trace), { signal: ac.signal });
    await waitFor(async () => got !== undefined, 10000, "the row is handled");
    ac.abort();
    await done;
    const [, traceId, spanId] = got.traceparent.split("-");
    assert.equal(traceId, "4bf92f3577b34da6a3ce929d0e0e4736", "the row's trace");
    assert.notEqual(spanId, "00f067aa0ba902b7", "the handle span's id, not the row's own");
    // The worker's exporter sends the handle span when the worker stops.
    await waitFor(async () => posts > 0, 10000, "the handle span reaches the collector");
  } finally {
    collector.close();
  }
});
