// How many rows a TypeScript worker holds, seen in the database. The worker takes
// batches into its own loop (the core's hand-out worker) and reports its handlers' times, so
// its adaptive batch is large (1024) but slow handlers still hold about their slots, while
// fast handlers get the deep pipeline the loop needs.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from "../dist/esm/index.js";
import { countState, enqueue, freshDatabase } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("prefetch");
});
after(async () => {
  await env?.drop();
});

/** Drains `rows` rows with handlers that sleep `handlerMs`, sampling the rows in `processing`. */
async function drainSampling(source, rows, concurrency, handlerMs) {
  await enqueue(env.db, source, rows);
  const w = new Worker({ databaseUrl: env.url, source, concurrency, pollIntervalMs: 50, leaseMs: 10000, shutdownGraceMs: 5000 });
  const abort = new AbortController();
  const running = w.run(async () => {
    if (handlerMs) await sleep(handlerMs);
  }, { signal: abort.signal });
  const start = Date.now();
  const samples = [];
  while ((await countState(env.db, source, "processed")) < rows) {
    assert.ok(Date.now() - start < 100_000, `drain too slow: ${JSON.stringify(samples.slice(-5))}`);
    samples.push([Date.now() - start, await countState(env.db, source, "processing")]);
    await sleep(5);
  }
  abort.abort();
  await running;
  return { samples, batch: w.options.batchSize };
}

test("slow handlers hold about their slots, not the batch", async () => {
  const { samples, batch } = await drainSampling("prefetch-slow", 60, 4, 200);
  assert.equal(batch, 1024);
  const seen = JSON.stringify(samples);
  // Before any handler has finished: at most max(10, 2 × 4).
  assert.ok(Math.max(...samples.filter(([t]) => t < 200).map(([, n]) => n)) <= 10, seen);
  // Measured: 4 running and one or two waiting; 8 allows slow claims, +4 the finished rows
  // whose batched completion runs beside the next claim.
  const settled = samples.filter(([t]) => t > 500).map(([, n]) => n).sort((a, b) => a - b);
  assert.ok(settled.length >= 20, seen);
  assert.ok(settled[Math.floor((settled.length * 9) / 10)] <= 8, seen);
  assert.ok(settled[settled.length - 1] <= 12, seen);
  assert.ok(settled[Math.floor(settled.length / 2)] >= 4, `the 4 handlers were kept busy: ${seen}`);
});

test("fast handlers run ahead far beyond their slots", async () => {
  const { samples, batch } = await drainSampling("prefetch-fast", 3000, 4, 0);
  const most = Math.max(...samples.map(([, n]) => n));
  assert.ok(most >= 64, `a no-op worker holds far beyond 2 × 4 rows: held ${most}`);
  assert.ok(most <= 2 * batch, `never more than twice the batch: held ${most}`);
});
