// Typed payloads at run time: the worker's `validate` runs before the handler, its return
// value is `message.payload`, and a failed check dead-letters the row at once (one delivery,
// `invalid payload: …`) without running the handler; `Retry` thrown by it retries instead.
// One real worker on a real PostgreSQL. The type-level side is types.test.mjs.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, Retry, Worker } from "../dist/esm/index.js";
import { freshDatabase, states, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("validate");
});
after(async () => {
  await env?.drop();
});

test("validate: its result is the payload; a failure dead-letters at once without the handler; Retry retries", async () => {
  const source = "orders";
  const ok = await env.db.enqueue({ source, idempotencyKey: "ok", payload: { orderId: "o-1", total: "12.50" } });
  const bad = await env.db.enqueue({ source, idempotencyKey: "bad", payload: { orderId: 7 } });
  const later = await env.db.enqueue({ source, idempotencyKey: "later", payload: { orderId: "o-2", total: "1", wait: true } });
  let waited = 0;
  // In zod's shape: parse(unknown) => T, throwing on a bad value; converts total to a number.
  const parse = (p) => {
    if (typeof p?.orderId !== "string") throw new TypeError("orderId: expected string");
    if (p.wait && waited++ === 0) throw new Retry("not yet", { delayMs: 50 });
    return { orderId: p.orderId, total: Number(p.total) };
  };
  const handled = [];
  const ac = new AbortController();
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, validate: parse, logger: { warn() {} } });
  const done = w.run((m) => void handled.push([m.id, m.payload, m.attempt]), { signal: ac.signal });
  try {
    await waitFor(async () => {
      const s = await states(env.db, source);
      return s.get(ok.id).state === "processed" && s.get(bad.id).state === "dead" && s.get(later.id).state === "processed";
    }, 5000, "ok processed, bad dead, later processed");
  } finally {
    ac.abort();
    await done;
  }
  const s = await states(env.db, source);
  assert.deepEqual(
    handled.sort((a, b) => a[1].orderId.localeCompare(b[1].orderId)),
    [[ok.id, { orderId: "o-1", total: 12.5 }, 0], [later.id, { orderId: "o-2", total: 1 }, 1]],
    "the handler saw validate's result; never the bad row; the Retry cost one attempt",
  );
  assert.equal(s.get(bad.id).attempt, 0, "dead-lettered on its first delivery, no retries");
  assert.equal(s.get(bad.id).last_error, "invalid payload: orderId: expected string");
  assert.equal(s.get(later.id).last_error, "not yet");
});

test("validate must be a function, named when it is not", () => {
  assert.throws(
    () => new Worker({ databaseUrl: "postgres://x", source: "s", validate: { parse() {} } }),
    (e) => e instanceof ConfigError && /`validate`/.test(e.message),
  );
});
