// postgres.js (issue 40 item 3): completeTx / publish / enqueue on the sql of
// sql.begin(async (sql) => …), against a real PostgreSQL through the real native addon. The
// same behaviours as app-tx.test.mjs and enqueue.test.mjs run for pg, Knex and Drizzle; here
// one test per call is enough to show the driver is recognised and runs inside the
// application's transaction (commit and rollback both seen).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import postgres from "postgres";
import { completeTx, enqueue, enqueueMany, InvalidInput, publish, Worker } from "../dist/esm/index.js";
import { countState, enqueue as seed, freshDatabase, waitFor } from "./helpers.mjs";

let env;
let sql;
before(async () => {
  env = await freshDatabase("pgjs");
  await env.db.execute("CREATE TABLE orders_seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)");
  sql = postgres(env.url, { max: 4, onnotice: () => {} });
});
after(async () => {
  await sql?.end({ timeout: 1 });
  await env?.drop();
});

class Rollback extends Error {}

test("postgres.js: completeTx commits the business write and the completion together", async () => {
  const source = "pgjs-complete";
  const [id] = await seed(env.db, source, 1);
  const ac = new AbortController();
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } });
  let refused;
  const done = w.run(
    (m) =>
      sql.begin(async (tx) => {
        // The top-level sql commits each statement on its own: refused, naming db.
        refused = await completeTx(sql, m).catch((e) => e);
        await tx`INSERT INTO orders_seen (inbox_id, note) VALUES (${m.id}, 'handled')`;
        await completeTx(tx, m);
      }),
    { signal: ac.signal },
  );
  try {
    await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
  } finally {
    ac.abort();
    await done;
  }
  assert.ok(refused instanceof InvalidInput && /sql\.begin/.test(refused.message), String(refused));
  const { rows } = await env.db.query("SELECT note FROM orders_seen WHERE inbox_id = $1::uuid", [id]);
  assert.deepEqual(rows, [{ note: "handled" }]);
});

test("postgres.js: publish and enqueue write on commit and leave nothing on rollback", async () => {
  const committed = await sql.begin(async (tx) => ({
    outbox: await publish(tx, "pgjs.topic", { n: 1 }, { key: "k" }),
    job: await enqueue(tx, "pgjs-jobs", { n: 1 }, { idempotencyKey: "one", priority: 3 }),
  }));
  let rolledBack;
  await assert.rejects(
    sql.begin(async (tx) => {
      rolledBack = {
        outbox: await publish(tx, "pgjs.topic", { n: 2 }),
        job: await enqueue(tx, "pgjs-jobs", { n: 2 }, { idempotencyKey: "two" }),
      };
      throw new Rollback();
    }),
    Rollback,
  );
  const outbox = await env.db.query("SELECT id::text AS id, key FROM outbox WHERE topic = 'pgjs.topic'");
  assert.deepEqual(outbox.rows, [{ id: committed.outbox, key: "k" }]);
  const inbox = await env.db.query("SELECT id::text AS id, idempotency_key, priority FROM inbox WHERE source = 'pgjs-jobs'");
  assert.deepEqual(inbox.rows, [{ id: committed.job.id, idempotency_key: "one", priority: 3 }]);
  assert.equal(committed.job.duplicate, false);
  assert.ok(rolledBack.outbox && rolledBack.job.id, "the rolled-back calls ran");
  // A repeat of the committed key, many in one call: the stored id, duplicate = true.
  const again = await sql.begin((tx) => enqueueMany(tx, [{ source: "pgjs-jobs", payload: 3, idempotencyKey: "one" }, { source: "pgjs-jobs", payload: 4 }]));
  assert.deepEqual(again[0], { id: committed.job.id, duplicate: true });
  assert.equal(again[1].duplicate, false);
});
