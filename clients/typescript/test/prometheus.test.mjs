// QueueBoxMetrics: two real workers' core metrics scraped through the application's own
// prom-client Registry, next to the application's own metric.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Counter, Registry } from "prom-client";
import { QueueBoxMetrics, Worker } from "../dist/esm/index.js";
import { WORKER_FAMILIES, parseFamilies } from "../dist/esm/prometheus.js";
import { countState, enqueue, freshDatabase, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("prometheus");
});
after(async () => {
  await env?.drop();
});

test("QueueBoxMetrics serves every worker's metrics in the application's prom-client registry", async () => {
  const registry = new Registry();
  new Counter({ name: "app_orders_total", help: "the application's own metric", registers: [registry] }).inc();
  const sources = ["prom_a", "prom_b"];
  const workers = sources.map((source) => new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } }));
  const metrics = new QueueBoxMetrics(registry, workers[0]);
  metrics.add(workers[1]);
  assert.ok(!(await registry.metrics()).includes('source="prom_a"'), "nothing before the workers run");
  await enqueue(env.db, sources[0], 3);
  await enqueue(env.db, sources[1], 2);
  const ac = new AbortController();
  const runs = workers.map((w) => w.run(async () => {}, { signal: ac.signal }));
  await waitFor(
    async () => (await countState(env.db, sources[0], "processed")) === 3 && (await countState(env.db, sources[1], "processed")) === 2,
    10000,
    "both sources processed",
  );
  ac.abort();
  await Promise.all(runs);

  const text = await registry.metrics();
  for (const line of [
    'queuebox_worker_completed_total{source="prom_a"} 3\n',
    'queuebox_worker_completed_total{source="prom_b"} 2\n',
    'queuebox_worker_handler_duration_seconds_count{source="prom_a"} 3\n',
    'queuebox_worker_handler_duration_seconds_bucket{source="prom_a",le="+Inf"} 3\n',
    "# TYPE queuebox_worker_handler_duration_seconds histogram\n",
    "# TYPE queuebox_worker_completed_total counter\n",
    "# HELP queuebox_worker_completed_total Rows completed (processed).\n",
    "app_orders_total 1\n",
  ]) {
    assert.ok(text.includes(line), `${JSON.stringify(line)} in\n${text}`);
  }
  const json = await registry.getMetricsAsJSON();
  const completed = json.find((m) => m.name === "queuebox_worker_completed_total");
  assert.deepEqual(
    completed.values.map((v) => [v.labels.source, v.value]).sort(),
    [["prom_a", 3], ["prom_b", 2]],
  );
  // Every family the core encodes is registered (a family added to the core and not to
  // WORKER_FAMILIES would be missing from the application's /metrics).
  const registered = new Set(WORKER_FAMILIES.map(([name]) => name));
  for (const name of parseFamilies(workers[0].metrics()).keys()) assert.ok(registered.has(name), `${name} is registered`);
});

test("QueueBoxMetrics refuses what is not a registry or a worker, naming it", () => {
  assert.throws(() => new QueueBoxMetrics({}), /registry must be a prom-client Registry/);
  assert.throws(() => new QueueBoxMetrics(new Registry(), {}), /worker must be a Worker/);
});
