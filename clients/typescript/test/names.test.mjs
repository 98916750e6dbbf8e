// Contract item 13 (proto-docs/client-contract.md): mapped table and column names. A worker given the
// names of a schema of its own (core/tests/fixtures/own_schema.sql: tables shop."order" and
// shop."user", reserved-word columns) claims and completes there, completeTx on pg names the
// same table, and a misspelt mapping key is refused naming it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import pg from "pg";
import { ConfigError, Worker, completeTx } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

const fixtures = new URL("../../../core/tests/fixtures/", import.meta.url);
const names = JSON.parse(readFileSync(new URL("own_schema_names.json", fixtures), "utf8"));
let env;
let db;
let url;
before(async () => {
  env = await freshDatabase("names", { schema: false });
  ({ db, url } = env);
  await db.executeScript(readFileSync(new URL("own_schema.sql", fixtures), "utf8"));
});
after(async () => {
  await env?.drop();
});

const status = async (key) => (await db.query(`SELECT status FROM shop."user" WHERE "key" = $1`, [key])).rows[0]?.status;

test("item 13: a worker on a schema of its own claims, completes and hands out statements naming it", async () => {
  await db.execute(
    `INSERT INTO shop."user" ("from", "key", payload, consumption) VALUES ('named', 'n1', '{"n": 1}', 'pull'), ('named', 'n2', '{"n": 2}', 'pull')`,
  );
  const options = { databaseUrl: url, source: "named", pollIntervalMs: 20, logger: { warn() {} }, ...names };
  const seen = [];
  const ac = new AbortController();
  const done = new Worker(options).run((m) => {
    seen.push(m.idempotencyKey);
  }, { signal: ac.signal });
  await waitFor(async () => (await status("n1")) === "processed" && (await status("n2")) === "processed", 15000, "both processed");
  ac.abort();
  await done;
  assert.deepEqual(seen.sort(), ["n1", "n2"]);

  await db.execute(`INSERT INTO shop."user" ("from", "key", payload, consumption) VALUES ('named', 'n3', '{"n": 3}', 'pull')`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on("error", () => {});
  const ac2 = new AbortController();
  const done2 = new Worker(options).run(async (m) => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await completeTx(client, m);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK");
      throw e;
    } finally {
      client.release();
    }
  }, { signal: ac2.signal });
  await waitFor(async () => (await status("n3")) === "processed", 15000, "n3 completed in the application's transaction");
  ac2.abort();
  await done2;
  await pool.end();
});

test("item 13: a misspelt mapping key is refused, naming it", () => {
  assert.throws(
    () => new Worker({ databaseUrl: url, source: "named", columnMapping: { inbox: { sourse: "from" } } }),
    (e) => e instanceof ConfigError && /sourse/.test(e.message),
  );
});
