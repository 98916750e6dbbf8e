// A worker's metrics after it handled real rows: the native core counts and encodes them,
// worker.metrics() passes the Prometheus text on.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "../dist/esm/index.js";
import { countState, enqueue, freshDatabase, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("metrics");
});
after(async () => {
  await env?.drop();
});

test("worker.metrics() counts the rows the handler completed, with the handler histogram", async () => {
  const source = "metered";
  await enqueue(env.db, source, 3);
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } });
  assert.equal(w.metrics(), undefined, "no metrics before the first run");
  const ac = new AbortController();
  const done = w.run(async () => {}, { signal: ac.signal });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 3, 10000, "3 processed");
  ac.abort();
  await done;
  const text = w.metrics();
  for (const line of [
    'queuebox_worker_completed_total{source="metered"} 3\n',
    'queuebox_worker_claimed_total{source="metered"} 3\n',
    'queuebox_worker_handler_duration_seconds_count{source="metered"} 3\n',
    "# TYPE queuebox_worker_handler_duration_seconds histogram\n",
  ]) {
    assert.ok(text.includes(line), `${line} in\n${text}`);
  }
});
