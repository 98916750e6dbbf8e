// Enqueue in the application's transaction: enqueue / enqueueMany on
// node-postgres (a PoolClient inside BEGIN … COMMIT), Knex (knex.transaction), Drizzle ORM
// (db.transaction) and Prisma (prisma.$transaction, in a Prisma project generated for this
// file: test/prisma-project.mjs), against a real PostgreSQL through the real native addon. The rows of
// every driver are then claimed by one real Worker, so a row that only looks stored but is
// not claimable fails here too.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import knexFactory from "knex";
import { drizzle } from "drizzle-orm/node-postgres";
import { enqueue, enqueueMany, InvalidInput, Worker } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";
import { prismaProject } from "./prisma-project.mjs";

let env;
let pool;
let knex;
let orm;
let project;
let prisma;
before(async () => {
  env = await freshDatabase("enqueue");
  pool = new pg.Pool({ connectionString: env.url, max: 4 });
  pool.on("error", () => {}); // the database drop at teardown terminates idle clients
  knex = knexFactory({ client: "pg", connection: env.url, pool: { min: 0, max: 4 } });
  orm = drizzle(pool);
  project = await prismaProject();
  prisma = new project.PrismaClient({ adapter: new project.PrismaPg({ connectionString: env.url, max: 4 }) });
});
after(async () => {
  await pool?.end();
  await knex?.destroy();
  await prisma?.$disconnect();
  project?.remove();
  await env?.drop();
});

/** `fn(client)` inside BEGIN … COMMIT on a pooled client; ROLLBACK when it throws. */
async function inPgTx(fn) {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const r = await fn(client);
    await client.query("COMMIT");
    return r;
  } catch (e) {
    await client.query("ROLLBACK");
    throw e;
  } finally {
    client.release();
  }
}

const DRIVERS = [
  { name: "pg", inTx: inPgTx },
  { name: "knex", inTx: (fn) => knex.transaction(fn) },
  { name: "drizzle", inTx: (fn) => orm.transaction(fn) },
  { name: "prisma", inTx: (fn) => prisma.$transaction(fn, { maxWait: 10000, timeout: 60000 }) },
];

class Rollback extends Error {}

async function rowsOf(source) {
  const { rows } = await env.db.query(
    `SELECT id::text AS id, idempotency_key, consumption, state, payload, headers, aggregate_id, event_type, correlation_id,
            priority, max_attempts, scheduled_at > now() + interval '50 seconds' AS delayed
       FROM inbox WHERE source = $1 ORDER BY sequence`,
    [source],
  );
  return rows;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

for (const d of DRIVERS) {
  test(`${d.name}: enqueue commits a pull row with every option; a worker handles it`, async () => {
    const source = `${d.name}-jobs`;
    const r = await d.inTx((db) =>
      enqueue(db, source, { total: 42 }, {
        idempotencyKey: "order-1",
        priority: 7,
        aggregateId: "customer-1",
        eventType: "order.placed",
        correlationId: "corr-1",
        headers: { "x-tenant": "t1" },
        maxAttempts: 9,
      }),
    );
    assert.match(r.id, UUID);
    assert.equal(r.duplicate, false);
    const [row] = await rowsOf(source);
    assert.deepEqual(
      { ...row },
      {
        id: r.id,
        idempotency_key: "order-1",
        consumption: "pull",
        state: "pending",
        payload: { total: 42 },
        headers: { "x-tenant": "t1" },
        aggregate_id: "customer-1",
        event_type: "order.placed",
        correlation_id: "corr-1",
        priority: 7,
        max_attempts: 9,
        delayed: false,
      },
    );

    const seen = [];
    const ac = new AbortController();
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } });
    const done = w.run((m) => void seen.push(m), { signal: ac.signal });
    await waitFor(() => seen.length === 1, 10000, "the worker to handle the enqueued row");
    ac.abort();
    await done;
    assert.equal(seen[0].id, r.id);
    assert.deepEqual(seen[0].payload, { total: 42 });
    assert.equal(seen[0].idempotencyKey, "order-1");
    assert.equal(seen[0].eventType, "order.placed");
    assert.equal(seen[0].correlationId, "corr-1");
    assert.equal(seen[0].headers["x-tenant"], "t1");
  });

  test(`${d.name}: a rolled-back transaction leaves no row`, async () => {
    const source = `${d.name}-rollback`;
    let id;
    await assert.rejects(
      d.inTx(async (db) => {
        ({ id } = await enqueue(db, source, { n: 1 }));
        throw new Rollback();
      }),
      Rollback,
    );
    assert.match(id, UUID, "the enqueue itself ran");
    assert.deepEqual(await rowsOf(source), []);
  });

  test(`${d.name}: a repeated idempotency key returns the first row's id with duplicate = true`, async () => {
    const source = `${d.name}-dup`;
    const first = await d.inTx((db) => enqueue(db, source, { v: 1 }, { idempotencyKey: "same" }));
    const again = await d.inTx((db) => enqueue(db, source, { v: 2 }, { idempotencyKey: " same " }));
    assert.deepEqual(first, { id: first.id, duplicate: false });
    assert.deepEqual(again, { id: first.id, duplicate: true });
    const rows = await rowsOf(source);
    assert.equal(rows.length, 1);
    assert.deepEqual(rows[0].payload, { v: 1 }, "the duplicate stored nothing");
  });

  test(`${d.name}: enqueueMany stores many rows in one call, in order, duplicates within the call named`, async () => {
    const source = `${d.name}-many`;
    const later = new Date(Date.now() + 3600_000);
    const out = await d.inTx((db) =>
      enqueueMany(db, [
        { source, payload: { i: 0 }, idempotencyKey: "a" },
        { source, payload: { i: 1 }, delayMs: 600_000 },
        { source, payload: { i: 2 }, idempotencyKey: "a" },
        { source, payload: { i: 3 }, scheduledAt: later, priority: -3 },
      ]),
    );
    assert.equal(out.length, 4);
    assert.deepEqual(out.map((o) => o.duplicate), [false, false, true, false]);
    assert.equal(out[2].id, out[0].id, "the repeat within the call is the first message's row");
    const rows = await rowsOf(source);
    assert.deepEqual(rows.map((r) => r.id), [out[0].id, out[1].id, out[3].id], "stored in the caller's order");
    assert.deepEqual(rows.map((r) => r.delayed), [false, true, true]);
    assert.equal(rows[2].priority, -3);
    assert.equal(rows[1].idempotency_key, out[1].id, "no key: the row's id is its key");
  });

  test(`${d.name}: a bad field is refused naming it, and nothing is stored`, async () => {
    const source = `${d.name}-bad`;
    const bad = (fn) =>
      d.inTx(fn).then(
        () => assert.fail("expected InvalidInput"),
        (e) => e,
      );
    let e = await bad((db) => enqueue(db, source, { n: 1 }, { priority: 40000 }));
    assert.ok(e instanceof InvalidInput, String(e));
    assert.match(e.message, /\bpriority\b/);
    assert.doesNotMatch(e.message, /messages\[0\]/, "a single enqueue names the field alone");
    e = await bad((db) => enqueue(db, source, { n: 1 }, { idempotencyKey: "   " }));
    assert.ok(e instanceof InvalidInput, String(e));
    assert.match(e.message, /\bidempotencyKey\b/, "the field has the name this API takes");
    e = await bad((db) =>
      enqueueMany(db, [
        { source, payload: 1 },
        { source, payload: 2, maxAttempts: 0 },
      ]),
    );
    assert.ok(e instanceof InvalidInput, String(e));
    assert.match(e.message, /messages\[1\]\.maxAttempts/);
    e = await bad((db) => enqueue(db, source, { n: 1 }, { delayMs: 5, scheduledAt: new Date() }));
    assert.ok(e instanceof InvalidInput, String(e));
    assert.match(e.message, /delayMs|scheduledAt/);
    e = await bad((db) => enqueue(db, source, { n: 1 }, { topic: "x" }));
    assert.ok(e instanceof InvalidInput, String(e));
    assert.match(e.message, /\btopic\b/, "a publish-only field is named");
    assert.deepEqual(await rowsOf(source), []);
  });
}

test("enqueue on something that is no driver is refused naming db", async () => {
  await assert.rejects(enqueue({}, "s", 1), (e) => e instanceof InvalidInput && /\bdb\b/.test(e.message));
});
