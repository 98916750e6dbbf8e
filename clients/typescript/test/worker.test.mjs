// End-to-end tests of the Worker against a real PostgreSQL through the real native addon.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Dead, QueueBoxError, Retry, Worker } from "../dist/esm/index.js";
import { countState, enqueue, freshDatabase, states, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("worker");
  await env.db.execute("CREATE TABLE seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)");
});
const running = [];
after(async () => {
  // Stop whatever a failed test left running, so the process can exit.
  for (const r of running) r.ac.abort();
  await Promise.allSettled(running.map((r) => r.done));
  await env?.drop();
});

const quiet = { warn() {} };

/** Starts `worker.run(handler)` and returns a stop function resolving when run has returned. */
function start(worker, handler) {
  const ac = new AbortController();
  const done = worker.run(handler, { signal: ac.signal });
  running.push({ ac, done });
  return async () => {
    ac.abort();
    await done;
  };
}

test("every row is handled exactly once and ends processed", async () => {
  const source = "once";
  const ids = await enqueue(env.db, source, 60);
  const seen = new Map();
  let running = 0;
  let maxRunning = 0;
  const w = new Worker({ databaseUrl: env.url, source, batchSize: 10, concurrency: 3, pollIntervalMs: 50, logger: quiet });
  const stop = start(w, async (m) => {
    running++;
    maxRunning = Math.max(maxRunning, running);
    seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    await sleep(2);
    running--;
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 60, 20000, "60 processed");
  await stop();
  assert.equal(seen.size, 60);
  for (const id of ids) assert.equal(seen.get(id), 1, `row ${id} handled ${seen.get(id)} times`);
  assert.ok(maxRunning <= 3, `at most concurrency handlers at once, saw ${maxRunning}`);
  const st = await states(env.db, source);
  for (const r of st.values()) {
    assert.equal(r.state, "processed");
    assert.equal(r.attempt, 0);
    assert.equal(r.claim_token, null);
  }
  assert.equal(w.stats().completed, 60);
});

test("two workers on one source never get the same message", async () => {
  const source = "two-workers";
  const ids = await enqueue(env.db, source, 80);
  const seen = new Map();
  const handler = async (m) => {
    seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    await sleep(1);
  };
  const a = new Worker({ databaseUrl: env.url, source, batchSize: 7, concurrency: 2, pollIntervalMs: 20, logger: quiet });
  const b = new Worker({ databaseUrl: env.url, source, batchSize: 7, concurrency: 2, pollIntervalMs: 20, logger: quiet });
  const stopA = start(a, handler);
  const stopB = start(b, handler);
  await waitFor(async () => (await countState(env.db, source, "processed")) === 80, 20000, "80 processed");
  await Promise.all([stopA(), stopB()]);
  assert.equal(seen.size, 80);
  for (const id of ids) assert.equal(seen.get(id), 1);
  assert.ok(a.stats().completed > 0 && b.stats().completed > 0, "both workers took rows");
  assert.equal(a.stats().completed + b.stats().completed, 80);
});

test("a renewal that finds the lease lost aborts the handler and completes nothing", async () => {
  const source = "renew-lost";
  const [id] = await enqueue(env.db, source, 1);
  let aborted = false;
  let late;
  const w = new Worker({ databaseUrl: env.url, source, leaseMs: 600, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async (m, tx, signal) => {
    await env.db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [m.id]);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    aborted = true;
    late = await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'late')", [m.id]).catch((e) => e);
  });
  await waitFor(() => aborted && late, 10000, "handler aborted");
  await stop();
  assert.ok(late instanceof QueueBoxError && ["cancelled", "already_finished"].includes(late.kind), String(late));
  assert.equal(w.stats().claimsLost, 1);
  assert.equal(w.stats().completed, 0);
  assert.equal((await states(env.db, source)).get(id).state, "processing");
  const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM seen WHERE inbox_id = $1::uuid", [id]);
  assert.equal(Number(rows[0].n), 0);
});

test("the handler gets every field of the message", async () => {
  const source = "fields";
  const { id } = await env.db.enqueue({
    source,
    idempotencyKey: "order-1",
    payload: { total: 12.5, items: [1, 2] },
    aggregateId: "cust-7",
    eventType: "order.created",
    headers: { "x-tenant": "acme" },
    correlationId: "corr-1",
  });
  let got;
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 50, logger: quiet });
  const stop = start(w, (m) => {
    got = m;
  });
  await waitFor(() => got, 10000, "delivery");
  await stop();
  assert.equal(got.id, id);
  assert.equal(got.source, source);
  assert.equal(got.idempotencyKey, "order-1");
  assert.deepEqual(got.payload, { total: 12.5, items: [1, 2] });
  assert.equal(got.aggregateId, "cust-7");
  assert.equal(got.eventType, "order.created");
  assert.deepEqual(got.headers, { "x-tenant": "acme" });
  assert.equal(got.correlationId, "corr-1");
  assert.equal(got.attempt, 0);
  assert.ok(got.createdAt instanceof Date && !Number.isNaN(got.createdAt.getTime()));
  assert.ok(!("claimToken" in got), "the claim token never reaches the handler");
});

test("a throwing handler is retried by the policy and dead at maxAttempts with last_error", async () => {
  const source = "retry-dead";
  const [id] = await enqueue(env.db, source, 1);
  const attempts = [];
  const w = new Worker({
    databaseUrl: env.url,
    source,
    pollIntervalMs: 20,
    retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 20, jitter: 0 },
    logger: quiet,
  });
  const stop = start(w, (m) => {
    attempts.push(m.attempt);
    throw new Error(`boom on attempt ${m.attempt}`);
  });
  await waitFor(async () => (await countState(env.db, source, "dead")) === 1, 15000, "dead");
  await stop();
  assert.deepEqual(attempts, [0, 1, 2], "maxAttempts + 1 deliveries");
  const r = (await states(env.db, source)).get(id);
  assert.equal(r.attempt, 2);
  assert.equal(r.last_error, "boom on attempt 2");
  assert.equal(r.claim_token, null);
});

test("Retry with a delay moves scheduled_at forward and increments attempt; Dead dead-letters at once", async () => {
  const source = "outcomes";
  const [rid, did] = await enqueue(env.db, source, 2);
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, (m) => {
    if (m.id === rid) throw new Retry("not yet", { delayMs: 60000 });
    throw new Dead("poison message");
  });
  await waitFor(async () => {
    const st = await states(env.db, source);
    return st.get(rid).attempt === 1 && st.get(did).state === "dead";
  }, 10000, "retry and dead");
  await stop();
  const st = await states(env.db, source);
  assert.equal(st.get(rid).state, "pending");
  assert.equal(st.get(rid).in_future, true);
  assert.equal(st.get(rid).last_error, "not yet");
  assert.equal(st.get(did).last_error, "poison message");
  assert.equal(st.get(did).attempt, 0);
});

test("a successful handler's business write commits together with the completion", async () => {
  const source = "tx-ok";
  const [id] = await enqueue(env.db, source, 1);
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async (m, tx) => {
    assert.equal(await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, $2)", [m.id, "handled"]), 1);
    const { rows } = await tx.query("SELECT note FROM seen WHERE inbox_id = $1::uuid", [m.id]);
    assert.deepEqual(rows, [{ note: "handled" }], "the handler reads its own write");
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
  await stop();
  const { rows } = await env.db.query("SELECT note FROM seen WHERE inbox_id = $1::uuid", [id]);
  assert.deepEqual(rows, [{ note: "handled" }]);
});

test("a failed business write leaves nothing: the handler's writes roll back and the row is retried", async () => {
  const source = "tx-fail";
  const [id] = await enqueue(env.db, source, 1);
  let calls = 0;
  let caught;
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, retry: { maxAttempts: 0 }, logger: quiet });
  const stop = start(w, async (m, tx) => {
    calls++;
    await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'first write')", [m.id]);
    try {
      await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, NULL)", [m.id]);
    } catch (e) {
      caught = e;
      throw e;
    }
  });
  await waitFor(async () => (await countState(env.db, source, "dead")) === 1, 10000, "dead");
  await stop();
  assert.equal(calls, 1);
  assert.ok(caught instanceof QueueBoxError && caught.kind === "database", String(caught));
  const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM seen WHERE inbox_id = $1::uuid", [id]);
  assert.equal(Number(rows[0].n), 0, "the first write was rolled back");
  assert.match((await states(env.db, source)).get(id).last_error, /null value|not-null/);
});

test("a completion whose claim was stolen rolls the business write back and marks nothing", async () => {
  const source = "stolen";
  const [id] = await enqueue(env.db, source, 1);
  let handled = false;
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async (m, tx) => {
    await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'stolen')", [m.id]);
    // Another worker takes the row: the fence no longer matches this claim's token.
    await env.db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [m.id]);
    handled = true;
  });
  await waitFor(() => handled && w.stats().claimsLost === 1, 10000, "claim lost");
  await stop();
  const r = (await states(env.db, source)).get(id);
  assert.equal(r.state, "processing", "not completed");
  const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM seen WHERE inbox_id = $1::uuid", [id]);
  assert.equal(Number(rows[0].n), 0);
  assert.equal(w.stats().completed, 0);
});

test("a handler longer than the lease keeps ownership through renewals", async () => {
  const source = "renew";
  const [id] = await enqueue(env.db, source, 1);
  let deliveries = 0;
  const w = new Worker({ databaseUrl: env.url, source, leaseMs: 600, pollIntervalMs: 20, logger: quiet });
  // A second worker would take the row if its lease expired.
  const rival = new Worker({ databaseUrl: env.url, source, leaseMs: 600, pollIntervalMs: 20, logger: quiet });
  const stopRival = start(rival, () => {
    deliveries++;
  });
  const stop = start(w, async (_m, _tx, signal) => {
    deliveries++;
    await sleep(2000);
    assert.equal(signal.aborted, false);
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
  await stop();
  await stopRival();
  assert.equal(deliveries, 1);
  assert.equal((await states(env.db, source)).get(id).attempt, 0);
});

test("graceful shutdown: buffered rows go back to pending, a handler outliving the grace is abandoned", async () => {
  const source = "shutdown";
  await enqueue(env.db, source, 5);
  let started;
  let sawAbort = false;
  const w = new Worker({ databaseUrl: env.url, source, batchSize: 5, concurrency: 1, leaseMs: 900, shutdownGraceMs: 300, pollIntervalMs: 20, logger: quiet });
  const ac = new AbortController();
  const done = w.run(
    async (m, tx, signal) => {
      started = m.id;
      await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'half done')", [m.id]);
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      sawAbort = true;
      // Still running after the grace: whatever it does now must not complete the row.
    },
    { signal: ac.signal },
  );
  running.push({ ac, done });
  await waitFor(() => started, 10000, "first delivery");
  ac.abort();
  await done;
  assert.equal(sawAbort, true, "the handler's signal aborted after the grace");
  const st = await states(env.db, source);
  const inFlight = st.get(started);
  assert.equal(inFlight.state, "processing", "in-flight row abandoned, not completed");
  assert.equal(inFlight.attempt, 0);
  const others = [...st.values()].filter((r) => r.id !== started);
  assert.equal(others.length, 4);
  for (const r of others) {
    assert.equal(r.state, "pending", "buffered rows released");
    assert.equal(r.attempt, 0, "no attempt spent");
    assert.equal(r.claim_token, null);
  }
  assert.equal(w.stats().released, 4);
  const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM seen WHERE inbox_id = $1::uuid", [started]);
  assert.equal(Number(rows[0].n), 0, "the half-done write rolled back");

  // The abandoned row is claimable by another worker once its lease has expired.
  const again = [];
  const next = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stopNext = start(next, (m) => {
    again.push(m);
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 5, 10000, "all 5 processed by the next worker");
  await stopNext();
  const redelivered = again.find((m) => m.id === started);
  assert.ok(redelivered, "the abandoned row was redelivered");
  assert.equal(redelivered.attempt, 0, "abandoning spends no attempt");
});

test("graceful shutdown lets a handler that finishes within the grace complete", async () => {
  const source = "shutdown-grace";
  await enqueue(env.db, source, 1);
  let started = false;
  const w = new Worker({ databaseUrl: env.url, source, shutdownGraceMs: 5000, pollIntervalMs: 20, logger: quiet });
  const ac = new AbortController();
  const done = w.run(
    async () => {
      started = true;
      await sleep(300);
    },
    { signal: ac.signal },
  );
  running.push({ ac, done });
  await waitFor(() => started, 10000, "delivery");
  ac.abort();
  await done;
  assert.equal(await countState(env.db, source, "processed"), 1);
});

test("an already aborted signal returns at once without claiming", async () => {
  const source = "pre-aborted";
  await enqueue(env.db, source, 1);
  const w = new Worker({ databaseUrl: env.url, source, logger: quiet });
  await w.run(() => assert.fail("must not run"), { signal: AbortSignal.abort() });
  assert.equal(await countState(env.db, source, "pending"), 1);
});

test("a missing schema rejects run with schema_missing", async () => {
  const { Database } = await import("../dist/esm/index.js");
  const name = `${env.name}_empty`;
  const admin = await Database.connect(process.env.QUEUEBOX_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:55432/queuebox");
  await admin.executeScript(`CREATE DATABASE ${name}`);
  try {
    const u = new URL(env.url);
    u.pathname = `/${name}`;
    const w = new Worker({ databaseUrl: u.toString(), source: "s", logger: quiet });
    await assert.rejects(w.run(() => {}), (e) => e instanceof QueueBoxError && e.kind === "schema_missing");
  } finally {
    await admin.executeScript(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.close();
  }
});
