// Schedules in a TypeScript worker's options: a worker running a 200 ms schedule enqueues
// each tick as one row (the tick's time in its idempotency key) that its own handler
// receives once, none missing. A bad schedule is refused by the core, naming its field.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, Worker } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("schedules");
});
after(async () => {
  await env?.drop();
});

test("a 200 ms schedule enqueues each tick once and the worker's handler receives it", async () => {
  const source = "ts-ticks";
  const schedule = { name: "ts-tick", source, everyMs: 200, payload: { from: "typescript" } };
  const seen = [];
  const ac = new AbortController();
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 50, schedules: [schedule], logger: { warn() {} } });
  const done = w.run((m) => void seen.push([m.idempotencyKey, m.payload]), { signal: ac.signal });
  try {
    await waitFor(() => seen.length >= 5, 15000, "5 handled ticks");
  } finally {
    ac.abort();
    await done;
  }
  const keys = seen.map(([k]) => k);
  assert.equal(new Set(keys).size, keys.length, `a tick was handled twice: ${keys}`);
  for (const [, p] of seen) assert.deepEqual(p, { from: "typescript" });
  const { rows } = await env.db.query("SELECT idempotency_key FROM inbox WHERE source = $1", [source]);
  const ms = rows
    .map((r) => {
      assert.match(r.idempotency_key, /^schedule:ts-tick:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      return Date.parse(r.idempotency_key.slice("schedule:ts-tick:".length));
    })
    .sort((a, b) => a - b);
  assert.ok(ms.every((t) => t % 200 === 0), `ticks off the 200 ms grid: ${ms}`);
  assert.equal((ms.at(-1) - ms[0]) / 200 + 1, ms.length, `ticks missing or doubled: ${ms}`);
});

test("a bad schedule is refused, the core naming its field", () => {
  assert.throws(
    () => new Worker({ databaseUrl: env.url, source: "s", schedules: [{ name: "a", source: "s", cron: "not a cron" }] }),
    (e) => e instanceof ConfigError && e.message.includes("schedules[0].cron"),
  );
  assert.throws(
    () => new Worker({ databaseUrl: env.url, source: "s", schedules: [{ name: "a", source: "s", everyMs: 10 }] }),
    // The core names the interval `schedules[0].every` here (its JSON key is `everyMs`).
    (e) => e instanceof ConfigError && e.message.includes("schedules[0].every"),
  );
});
