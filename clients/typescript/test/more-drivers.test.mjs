// postgres.js and Kysely: completeTx / publish / enqueue on the sql of
// sql.begin(async (sql) => …) and the trx of db.transaction().execute(…), against a real PostgreSQL through the real native addon. The
// same behaviours as app-tx.test.mjs and enqueue.test.mjs run for pg, Knex and Drizzle; here
// two tests per driver show it is recognised and runs inside the application's transaction
// (commit and rollback both seen).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import postgres from "postgres";
import { Kysely, PostgresDialect, sql as ksql } from "kysely";
import { completeTx, enqueue, enqueueMany, InvalidInput, publish, Worker } from "../dist/esm/index.js";
import { countState, enqueue as seed, freshDatabase, waitFor } from "./helpers.mjs";

let env;
let sql;
let kdb;
before(async () => {
  env = await freshDatabase("drivers");
  await env.db.execute("CREATE TABLE orders_seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)");
  sql = postgres(env.url, { max: 4, onnotice: () => {} });
  const pool = new pg.Pool({ connectionString: env.url, max: 4 });
  pool.on("error", () => {}); // the database drop at teardown terminates idle clients
  kdb = new Kysely({ dialect: new PostgresDialect({ pool }) });
});
after(async () => {
  await sql?.end({ timeout: 1 });
  await kdb?.destroy();
  await env?.drop();
});

class Rollback extends Error {}

const DRIVERS = [
  {
    name: "postgres.js",
    top: () => sql,
    inTx: (fn) => sql.begin(fn),
    insert: (tx, id) => tx`INSERT INTO orders_seen (inbox_id, note) VALUES (${id}, 'handled')`,
    refusal: /sql\.begin/,
  },
  {
    name: "kysely",
    top: () => kdb,
    inTx: (fn) => kdb.transaction().execute(fn),
    insert: (trx, id) => ksql`INSERT INTO orders_seen (inbox_id, note) VALUES (${id}, 'handled')`.execute(trx),
    refusal: /db\.transaction\(\)\.execute/,
  },
];

for (const d of DRIVERS) {

  test(`${d.name}: completeTx commits the business write and the completion together`, async () => {
    const source = `${d.name}-complete`;
    const [id] = await seed(env.db, source, 1);
    const ac = new AbortController();
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: { warn() {} } });
    let refused;
    const done = w.run(
      (m) =>
        d.inTx(async (tx) => {
          // The top-level handle commits each statement on its own: refused, naming db.
          refused = await completeTx(d.top(), m).catch((e) => e);
          await d.insert(tx, m.id);
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
    assert.ok(refused instanceof InvalidInput && d.refusal.test(refused.message), String(refused));
    const { rows } = await env.db.query("SELECT note FROM orders_seen WHERE inbox_id = $1::uuid", [id]);
    assert.deepEqual(rows, [{ note: "handled" }]);
  });

  test(`${d.name}: publish and enqueue write on commit and leave nothing on rollback`, async () => {
    const topic = `${d.name}.topic`;
    const source = `${d.name}-jobs`;
    const committed = await d.inTx(async (tx) => ({
      outbox: await publish(tx, topic, { n: 1 }, { key: "k" }),
      job: await enqueue(tx, source, { n: 1 }, { idempotencyKey: "one", priority: 3 }),
    }));
    let rolledBack;
    await assert.rejects(
      d.inTx(async (tx) => {
        rolledBack = {
          outbox: await publish(tx, topic, { n: 2 }),
          job: await enqueue(tx, source, { n: 2 }, { idempotencyKey: "two" }),
        };
        throw new Rollback();
      }),
      Rollback,
    );
    const outbox = await env.db.query("SELECT id::text AS id, key FROM outbox WHERE topic = $1", [topic]);
    assert.deepEqual(outbox.rows, [{ id: committed.outbox, key: "k" }]);
    const inbox = await env.db.query("SELECT id::text AS id, idempotency_key, priority FROM inbox WHERE source = $1", [source]);
    assert.deepEqual(inbox.rows, [{ id: committed.job.id, idempotency_key: "one", priority: 3 }]);
    assert.equal(committed.job.duplicate, false);
    assert.ok(rolledBack.outbox && rolledBack.job.id, "the rolled-back calls ran");
    // A repeat of the committed key, many in one call: the stored id, duplicate = true.
    const again = await d.inTx((tx) => enqueueMany(tx, [{ source, payload: 3, idempotencyKey: "one" }, { source, payload: 4 }]));
    assert.deepEqual(again[0], { id: committed.job.id, duplicate: true });
    assert.equal(again[1].duplicate, false);
  });
}
