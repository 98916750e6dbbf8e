// Database.cancelInbox / cancelOutbox against a real PostgreSQL through the real native addon:
// cancelled rows are never handed to a real Worker, a second cancel cancels nothing, and a
// target that names no row is refused naming the missing field.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Database, InvalidInput, Worker } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("cancel");
});
after(async () => {
  await env?.drop();
});

async function statesOf(source) {
  const { rows } = await env.db.query(
    "SELECT idempotency_key || '=' || state || '/' || attempt AS s FROM inbox WHERE source = $1 ORDER BY idempotency_key",
    [source],
  );
  return rows.map((r) => r.s).join(",");
}

test("cancelled pull rows are never handed to a worker; a second cancel cancels nothing", async () => {
  const source = "cxl";
  for (const [k, aggregateId] of [["c1"], ["c2", "A"], ["c3", "A"], ["c4"], ["c5"]]) {
    await env.db.enqueue({ source, idempotencyKey: k, payload: {}, aggregateId });
  }
  assert.deepEqual(await env.db.cancelInbox({ source, key: "c1" }), { cancelled: 1, inFlight: 0, finished: 0, push: 0 });
  assert.deepEqual(await env.db.cancelInbox({ source, key: "c1" }), { cancelled: 0, inFlight: 0, finished: 1, push: 0 });
  assert.equal((await env.db.cancelInbox({ source, aggregate: "A" })).cancelled, 2);
  const { rows } = await env.db.query("SELECT id::text AS id FROM inbox WHERE idempotency_key = 'c4'");
  assert.equal((await env.db.cancelInbox({ id: rows[0].id })).cancelled, 1);

  const seen = [];
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 50, logger: { warn() {} } });
  const ac = new AbortController();
  const done = w.run(async (m) => void seen.push(m.idempotencyKey), { signal: ac.signal });
  try {
    await waitFor(async () => (await statesOf(source)).includes("c5=processed"), 15000, "c5 processed");
  } finally {
    ac.abort();
    await done;
  }
  assert.deepEqual(seen, ["c5"]);
  assert.equal(await statesOf(source), "c1=cancelled/0,c2=cancelled/0,c3=cancelled/0,c4=cancelled/0,c5=processed/0");
});

test("pending outbox rows of a key and topic are cancelled", async () => {
  await env.db.execute(
    "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES ('t','K','{}', now() + interval '1 hour'), ('u','K','{}', now())",
  );
  assert.deepEqual(await env.db.cancelOutbox({ topic: "t", key: "K" }), { cancelled: 1, inFlight: 0, finished: 0, push: 0 });
  const { rows } = await env.db.query("SELECT string_agg(topic || '=' || state, ',' ORDER BY topic) AS s FROM outbox");
  assert.equal(rows[0].s, "t=cancelled,u=pending");
});

test("a target that names no row is refused naming the missing field", async () => {
  for (const [call, named] of [
    [() => env.db.cancelInbox({ source: "cxl" }), "id, key or aggregate"],
    [() => env.db.cancelInbox({ key: "k" }), "source is required"],
    [() => env.db.cancelOutbox({ topic: "t" }), "id or key"],
    [() => env.db.cancelInbox({ id: "x", topic: "t" }), "`topic`"],
  ]) {
    await assert.rejects(call, (e) => e instanceof InvalidInput && e.message.includes(named), named);
  }
  assert.equal(typeof Database.prototype.cancelOutbox, "function");
});
