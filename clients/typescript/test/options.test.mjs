import { test } from "node:test";
import assert from "node:assert/strict";
import { QueueBoxError, Worker } from "../dist/esm/index.js";

const url = "postgres://nobody@127.0.0.1:1/none";

test("missing options take the core's defaults", () => {
  const w = new Worker({ databaseUrl: url, source: "orders" });
  assert.deepEqual(w.options, {
    source: "orders",
    batchSize: 1024,
    concurrency: 1,
    leaseMs: 30000,
    pollIntervalMs: 1000,
    shutdownGraceMs: 30000,
    listen: true,
    retry: { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 300000, jitter: 0.2 },
  });
});

test("an unset batchSize is the core's, adapted to concurrency", () => {
  // The core computes it (a hand-out worker's: 32 × concurrency, 1024..10000); the wrapper
  // only reads it back.
  const batches = [1, 8, 32, 64, 400].map((concurrency) => new Worker({ databaseUrl: url, source: "s", concurrency }).options.batchSize);
  assert.deepEqual(batches, [1024, 1024, 256, 256, 800]);
  assert.equal(new Worker({ databaseUrl: url, source: "s", batchSize: 10, concurrency: 32 }).options.batchSize, 10);
});

test("given options are kept and maxConcurrency is an alias of concurrency", () => {
  const w = new Worker({ databaseUrl: url, source: "s", batchSize: 100, maxConcurrency: 4, leaseMs: 900, retry: { maxAttempts: 2 } });
  assert.equal(w.options.batchSize, 100);
  assert.equal(w.options.concurrency, 4);
  assert.equal(w.options.leaseMs, 900);
  assert.deepEqual(w.options.retry, { maxAttempts: 2, baseDelayMs: 1000, maxDelayMs: 300000, jitter: 0.2 });
});

test("invalid options fail with a config error naming the option", () => {
  const bad = [
    [{ source: "" }, "source"],
    [{ source: "s", batchSize: 0 }, "batchSize"],
    [{ source: "s", concurrency: 0 }, "concurrency"],
    [{ source: "s", leaseMs: 10 }, "leaseMs"],
    [{ source: "s", pollIntervalMs: 0 }, "pollIntervalMs"],
    [{ source: "s", retry: { jitter: 2 } }, "retry.jitter"],
    [{ source: "s", batchsize: 5 }, "batchsize"],
    [{ source: "s", otlpEndpoint: "collector:4318" }, "otlpEndpoint"],
  ];
  for (const [opts, path] of bad) {
    assert.throws(
      () => new Worker({ databaseUrl: url, ...opts }),
      (e) => e instanceof QueueBoxError && e.kind === "config" && e.message.includes(`\`${path}\``),
      JSON.stringify(opts),
    );
  }
  assert.throws(() => new Worker({ source: "s" }), (e) => e instanceof QueueBoxError && e.kind === "config");
});

test("an unreachable database rejects run with a connect error that hides the password", async () => {
  const w = new Worker({ databaseUrl: "postgres://app:s3cret-pw@127.0.0.1:1/none", source: "s" });
  await assert.rejects(w.run(() => {}), (e) => e instanceof QueueBoxError && e.kind === "connect" && !e.message.includes("s3cret-pw"));
});

test("a connected native worker shows the options resolveOptions shows", async () => {
  // Both are the core's effective options; neither names `handOut`, which the binding sets on
  // every worker and its users never do.
  const { default: native } = await import("../dist/esm/native.js");
  const { freshDatabase } = await import("./helpers.mjs");
  const env = await freshDatabase("options");
  try {
    const given = JSON.stringify({ source: "s", concurrency: 4, leaseMs: 900 });
    const worker = await native.connectWorker(env.url, given);
    try {
      const shown = JSON.parse(worker.optionsJson());
      assert.deepEqual(shown, JSON.parse(native.resolveOptions(given)));
      assert.equal(shown.handOut, undefined);
      assert.equal(shown.batchSize, 1024);
    } finally {
      await worker.shutdown();
    }
  } finally {
    await env.drop();
  }
});
