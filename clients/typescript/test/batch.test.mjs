// The batch crossing against a real PostgreSQL: tasks handed out and completed in
// batches keep each task's fence and the shutdown rules, and every row is handled once.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Worker } from "../dist/esm/index.js";
import { countState, enqueue, freshDatabase, states, waitFor } from "./helpers.mjs";

const native = createRequire(import.meta.url)("../dist/native/loader.cjs");

let env;
before(async () => {
  env = await freshDatabase("batch");
});
after(async () => {
  await env?.drop();
});

const quiet = { warn() {} };
const options = (source, extra = {}) => JSON.stringify({ source, pollIntervalMs: 20, ...extra });

test("nextBatch hands out several tasks with their messages in order; a claim lost in completeAll fails only that task", async () => {
  const source = "lost-in-batch";
  await enqueue(env.db, source, 8);
  const w = await native.connectWorker(env.url, options(source, { batchSize: 8, concurrency: 8 }));
  try {
    const first = await w.nextBatch(8);
    // The first claim may hand out fewer than it claimed; take the rest of the batch too.
    const tasks = [...first.tasks];
    const messages = JSON.parse(first.messagesJson);
    while (tasks.length < 8) {
      const more = await w.nextBatch(8 - tasks.length);
      tasks.push(...more.tasks);
      messages.push(...JSON.parse(more.messagesJson));
    }
    assert.ok(first.tasks.length > 1, `one crossing handed out ${first.tasks.length} task(s)`);
    tasks.forEach((t, i) => assert.equal(JSON.parse(t.messageJson()).id, messages[i].id, `message ${i} in task order`));
    const stolen = messages[3].id;
    await env.db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [stolen]);

    const results = await w.completeAll(tasks);
    assert.equal(results.length, 8);
    results.forEach((r, i) => {
      if (i === 3) assert.equal(r?.code, "claim_lost", "the stolen task");
      else assert.equal(r, null, `task ${i} completed`);
    });
    const st = await states(env.db, source);
    assert.equal(st.get(stolen).state, "processing", "the stolen row is not completed");
    assert.equal([...st.values()].filter((r) => r.state === "processed").length, 7);
    const stats = JSON.parse(w.statsJson());
    assert.equal(stats.completed, 7);
    assert.equal(stats.claimsLost, 1);
    // A task of a batch is finished once: completing it again says so.
    assert.equal((await w.completeAll([tasks[0]]))[0]?.code, "already_finished");
  } finally {
    await w.shutdown();
  }
});

test("shutdown with part of a batch handed out: running handlers complete, the rest goes back to pending, nothing is lost", async () => {
  const source = "partial-batch";
  const ids = await enqueue(env.db, source, 10);
  const seen = new Map();
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const handler = async (m) => {
    seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    await gate;
  };
  const w = new Worker({ databaseUrl: env.url, source, batchSize: 10, concurrency: 4, shutdownGraceMs: 10000, pollIntervalMs: 20, logger: quiet });
  const ac = new AbortController();
  const done = w.run(handler, { signal: ac.signal });
  await waitFor(() => seen.size === 4, 10000, "4 handlers running");
  ac.abort(); // shutdown: the 6 claimed rows not handed out are released now
  await waitFor(async () => (await countState(env.db, source, "pending")) === 6, 10000, "6 released");
  release(); // the 4 running handlers finish within the grace
  await done;
  assert.equal(await countState(env.db, source, "processed"), 4);
  for (const r of (await states(env.db, source)).values()) {
    if (r.state === "pending") assert.equal(r.attempt, 0, "a released row spent no attempt");
  }
  assert.equal(w.stats().released, 6);
  assert.equal(w.stats().completed, 4);

  // A second worker takes the released rows: every row handled once in all.
  const next = new Worker({ databaseUrl: env.url, source, batchSize: 10, concurrency: 4, pollIntervalMs: 20, logger: quiet });
  const ac2 = new AbortController();
  const done2 = next.run(handler, { signal: ac2.signal });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 10, 10000, "10 processed");
  ac2.abort();
  await done2;
  assert.equal(seen.size, 10);
  for (const id of ids) assert.equal(seen.get(id), 1, `row ${id} handled ${seen.get(id)} times`);
});

for (const concurrency of [1, 8, 32]) {
  test(`synchronous handlers at concurrency ${concurrency}, two workers: every row handled once and processed`, async () => {
    const source = `each-once-${concurrency}`;
    const n = 400;
    const ids = await enqueue(env.db, source, n);
    const seen = new Map();
    const handler = (m) => {
      seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    };
    const workers = [0, 1].map(() => new Worker({ databaseUrl: env.url, source, batchSize: 40, concurrency, pollIntervalMs: 20, logger: quiet }));
    const ac = new AbortController();
    const runs = workers.map((w) => w.run(handler, { signal: ac.signal }));
    await waitFor(async () => (await countState(env.db, source, "processed")) === n, 30000, `${n} processed`);
    ac.abort();
    await Promise.all(runs);
    assert.equal(seen.size, n);
    for (const id of ids) assert.equal(seen.get(id), 1, `row ${id} handled ${seen.get(id)} times`);
    assert.equal(workers[0].stats().completed + workers[1].stats().completed, n);
  });
}
