// The client contract (proto-docs/client-contract.md, 19 items) that worker.test.mjs does not already
// cover. Where the others are: 1-7, 9, 10 and 12 (and 8, an abandoned row redelivered after
// its lease) in worker.test.mjs; the application-owned transaction's 2, 3, 4 in
// app-tx.test.mjs; 14 (the README examples build) in readme.test.mjs; 15 (no password in
// errors) in options.test.mjs; 13 (mapped table/column names) in names.test.mjs. Not here: 19
// (SQL Server's Msg 51000: no SQL Server in this suite; the core's
// core/tests/client_contract.rs covers it, with PostgreSQL raising 51000).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Dead, Retry, Worker } from "../dist/esm/index.js";
import { ADMIN_URL, enqueue, freshDatabase, states, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("contract");
});
const running = [];
after(async () => {
  for (const r of running) r.ac.abort();
  await Promise.allSettled(running.map((r) => r.done));
  await env?.drop();
});

const quiet = { warn() {} };

function start(worker, handler) {
  const ac = new AbortController();
  const done = worker.run(handler, { signal: ac.signal });
  running.push({ ac, done });
  return async () => {
    ac.abort();
    await done;
  };
}

test("item 11: stale tokens change nothing (complete, retry and dead of a taken-over claim match no row)", async () => {
  const source = "stale";
  const ids = await enqueue(env.db, source, 3);
  const token = (m) => `00000000-0000-0000-0000-00000000000${m.idempotencyKey.slice(1)}`;
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async (m) => {
    // Another worker took the claim over: the worker's token no longer matches.
    await env.db.execute("UPDATE inbox SET claim_token = $1::uuid WHERE id = $2::uuid", [token(m), m.id]);
    if (m.idempotencyKey === "k1") throw new Retry("retry with a stale token", { delayMs: 60000 });
    if (m.idempotencyKey === "k2") throw new Dead("dead with a stale token");
    // k0: complete
  });
  await waitFor(() => w.stats()?.claimsLost === 3, 10000, "three lost claims");
  await stop();
  const st = await states(env.db, source);
  ids.forEach((id, i) => {
    const r = st.get(id);
    assert.deepEqual([r.state, r.attempt, r.last_error, r.claim_token], ["processing", 0, null, `00000000-0000-0000-0000-00000000000${i}`]);
  });
  const s = w.stats();
  assert.deepEqual([s.completed, s.retried, s.dead], [0, 0, 0], "fenced-out outcomes do not count");
});

test("item 16: no polling storm on an empty table (about one claim per poll interval)", async () => {
  const idle = await freshDatabase("idle");
  const admin = (await import("../dist/esm/index.js")).Database;
  const stats = await admin.connect(ADMIN_URL, { maxConnections: 1 });
  const commits = async () => {
    await sleep(1100); // live backends flush their counters at most once a second
    const { rows } = await stats.query("SELECT xact_commit::int8 AS n FROM pg_stat_database WHERE datname = $1", [idle.name]);
    return Number(rows[0].n);
  };
  try {
    const before = await commits();
    const w = new Worker({ databaseUrl: idle.url, source: "idle", pollIntervalMs: 200, logger: quiet });
    const stop = start(w, () => {});
    await sleep(3000);
    await stop();
    const n = (await commits()) - before;
    // 3 s / 200 ms = 15 claims plus the connection checks; a storm makes thousands.
    console.log(`# ${n} transactions in 3 s with a 200 ms poll interval`);
    assert.ok(n >= 5 && n <= 60, `${n} transactions in 3 s`);
  } finally {
    await stats.close();
    await idle.drop();
  }
});

test("item 17: never more than a batch in flight (handlers running and rows held)", async () => {
  const source = "batch";
  await enqueue(env.db, source, 15);
  let now = 0;
  let maxRunning = 0;
  let maxHeld = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM inbox WHERE source = $1 AND state = 'processing'", [source]);
      maxHeld = Math.max(maxHeld, Number(rows[0].n));
    }
  })();
  const w = new Worker({ databaseUrl: env.url, source, batchSize: 3, concurrency: 3, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async () => {
    maxRunning = Math.max(maxRunning, ++now);
    await sleep(40);
    now--;
  });
  await waitFor(() => w.stats()?.completed === 15, 15000, "15 completed");
  await stop();
  sampling = false;
  await sampler;
  assert.equal(maxRunning, 3, "a full batch runs at once, never more");
  assert.ok(maxHeld >= 1 && maxHeld <= 3, `rows held in processing: ${maxHeld}`);
});

test("item 18: at most one message per aggregate in flight across two workers; aggregates overlap", async () => {
  const source = "aggregates";
  for (let n = 1; n <= 12; n++) {
    await env.db.enqueue({ source, idempotencyKey: `k${n}`, payload: { n }, aggregateId: n % 2 === 0 ? "a" : "b" });
  }
  const inFlight = { a: 0, b: 0 };
  const order = { a: [], b: [] };
  let overlapped = false;
  let violation;
  const handler = async (m) => {
    const agg = m.aggregateId;
    if (++inFlight[agg] > 1) violation = `two messages of aggregate ${agg} in flight`;
    if (inFlight.a > 0 && inFlight.b > 0) overlapped = true;
    order[agg].push(m.payload.n);
    await sleep(40);
    inFlight[agg]--;
  };
  const opts = { databaseUrl: env.url, source, batchSize: 4, concurrency: 2, pollIntervalMs: 20, logger: quiet };
  const a = new Worker(opts);
  const b = new Worker(opts);
  const stopA = start(a, handler);
  const stopB = start(b, handler);
  await waitFor(() => (a.stats()?.completed ?? 0) + (b.stats()?.completed ?? 0) === 12, 20000, "12 completed");
  await Promise.all([stopA(), stopB()]);
  assert.equal(violation, undefined);
  assert.ok(overlapped, "different aggregates ran at the same time");
  assert.deepEqual(order.a, [2, 4, 6, 8, 10, 12], "aggregate a in arrival order");
  assert.deepEqual(order.b, [1, 3, 5, 7, 9, 11], "aggregate b in arrival order");
});
