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

test("a bad schedule is refused naming the field as written here (`everyMs`, not the core's `every`)", () => {
  const refusal = (schedules) => {
    try {
      new Worker({ databaseUrl: env.url, source: "s", schedules });
    } catch (e) {
      assert.ok(e instanceof ConfigError, String(e));
      return e.message;
    }
    assert.fail(`accepted ${JSON.stringify(schedules)}`);
  };
  const ok = { name: "a", source: "s", everyMs: 1000, payload: {} };
  for (const [bad, field] of [
    [{ everyMs: 10 }, "everyMs"], // the core's own error names `every`
    [{ everyMs: 99 }, "everyMs"],
    [{ everyMs: 1.5 }, "everyMs"],
    [{ everyMs: -1000 }, "everyMs"],
    [{ everyMs: "1s" }, "everyMs"],
    [{ everyMs: Number.NaN }, "everyMs"], // JSON would send null: "set exactly one of" the schedule
    [{ everyMs: Infinity }, "everyMs"],
    [{ everyMs: 1000n }, "everyMs"], // JSON.stringify would throw a TypeError naming nothing
    [{ priority: Number.NaN }, "priority"], // JSON would send null: priority 0, silently
    [{ priority: 40000 }, "priority"],
    [{ everyMs: undefined, cron: "not a cron" }, "cron"],
    [{ everyMs: undefined, cron: "0 9 * * *", timeZone: "Mars/Olympus" }, "timeZone"],
    [{ timeZone: "UTC" }, "timeZone"],
    [{ missed: "all" }, "missed"],
    [{ headers: { h: 1 } }, "headers"],
    [{ source: "" }, "source"],
    [{ name: "" }, "name"],
    [{ every: 1000 }, "every"], // a key this API does not have is named as written, too
  ]) {
    // The second schedule is the bad one, so the index is checked as well.
    const message = refusal([ok, { ...ok, name: "b", ...bad }]);
    assert.ok(message.includes(`\`schedules[1].${field}\``), `${JSON.stringify(bad, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}: ${message}`);
  }
  assert.match(refusal([{ name: "a", source: "s", payload: {} }]), /`schedules\[0\]`: set exactly one of `cron` and `everyMs`/);
});
