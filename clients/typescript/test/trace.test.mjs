// Issue 19: a handler gets the row's W3C trace context as message.trace (the row's own while
// tracing is off), to continue the trace in its own OpenTelemetry SDK.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
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
