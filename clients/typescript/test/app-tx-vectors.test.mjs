// The conformance vectors of the application-transaction statements
// (proto-docs/vectors/completion_statement.json, publish_statement.json) say exactly what a
// wrapper runs. vectors.test.mjs checks the core renders them; here each PostgreSQL case in
// a style this package's drivers use runs on the real driver (dollar → node-postgres,
// question → Knex) inside a transaction that is rolled back, and does what it says.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import knexFactory from "knex";
import { freshDatabase } from "./helpers.mjs";

const dir = join(dirname(fileURLToPath(import.meta.url)), "../../../proto-docs/vectors");
const cases = (kind) => JSON.parse(readFileSync(join(dir, `${kind}.json`), "utf8")).cases;

let env;
let pool;
let knex;
before(async () => {
  env = await freshDatabase("apptx_vectors");
  pool = new pg.Pool({ connectionString: env.url, max: 2 });
  // pool.end() resolves before its idle clients' sockets close; the database drop at teardown
  // then terminates them, which a pool reports as an 'error' event (uncaught without this).
  pool.on("error", () => {});
  knex = knexFactory({ client: "pg", connection: env.url, pool: { min: 0, max: 2 } });
});
after(async () => {
  await pool?.end();
  await knex?.destroy();
  await env?.drop();
});

/** Each driver: run a statement on a transaction of its own and hand it to `check`, then roll back. */
const DRIVERS = {
  dollar: {
    name: "node-postgres",
    async inRolledBackTx(fn) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await fn({
          run: async (sql, params) => (await client.query(sql, params)).rowCount,
          rows: async (sql, params) => (await client.query(sql, params)).rows,
        });
      } finally {
        await client.query("ROLLBACK");
        client.release();
      }
    },
  },
  question: {
    name: "Knex",
    async inRolledBackTx(fn) {
      const trx = await knex.transaction();
      try {
        await fn({
          run: async (sql, params) => (await trx.raw(sql, params)).rowCount,
          rows: async (sql, params) => (await trx.raw(sql, params)).rows,
        });
      } finally {
        await trx.rollback();
      }
    },
  },
};

test("every PostgreSQL completion vector in a pg or Knex style completes its claimed row on that driver", async () => {
  const ran = [];
  for (const c of cases("completion_statement")) {
    const driver = DRIVERS[c.input.placeholder];
    if (c.input.backend !== "postgres" || !driver) continue;
    await driver.inRolledBackTx(async (db) => {
      // The row the vector's id and token name, claimed with a live lease.
      await db.run(
        `INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, claim_token, claimed_at, lease_expires_at)
         VALUES (CAST(${c.input.placeholder === "dollar" ? "$1" : "?"} AS uuid), 'vectors', 'k', '{}', 'pull', 'processing',
                 CAST(${c.input.placeholder === "dollar" ? "$2" : "?"} AS uuid), now(), now() + interval '1 minute')`,
        [c.input.id, c.input.token],
      );
      assert.equal(await db.run(c.expected.sql, c.expected.params), 1, `${c.name} on ${driver.name}`);
      const [row] = await db.rows(`SELECT state, claim_token FROM inbox WHERE id = CAST(${c.input.placeholder === "dollar" ? "$1" : "?"} AS uuid)`, [c.input.id]);
      assert.deepEqual(row, { state: "processed", claim_token: null });
      // The same statement again: the fence no longer matches (the claim is gone).
      assert.equal(await db.run(c.expected.sql, c.expected.params), 0);
    });
    ran.push(`${c.name} (${driver.name})`);
  }
  assert.ok(ran.length >= 2, `a dollar and a question case ran: ${ran}`);
});

test("every PostgreSQL publish vector in a pg or Knex style inserts its rows with its ids on that driver", async () => {
  const ran = [];
  for (const c of cases("publish_statement")) {
    const driver = DRIVERS[c.input.placeholder];
    if (c.input.backend !== "postgres" || !driver || !c.expected.sql) continue;
    await driver.inRolledBackTx(async (db) => {
      assert.equal(await db.run(c.expected.sql, c.expected.params), c.expected.ids.length, c.name);
      const p = c.input.placeholder === "dollar" ? "$1" : "?";
      const rows = await db.rows(`SELECT id::text AS id, topic, payload, state FROM outbox WHERE id = ANY(CAST(${p} AS uuid[])) ORDER BY sequence`, [
        `{${c.expected.ids.join(",")}}`,
      ]);
      assert.deepEqual(
        rows.map((r) => [r.id, r.topic, r.payload, r.state]),
        c.input.messages.map((m, i) => [c.expected.ids[i], m.topic, m.payload, "pending"]),
        c.name,
      );
    });
    ran.push(`${c.name} (${driver.name})`);
  }
  assert.ok(ran.length >= 1, `at least one case ran: ${ran}`);
});
