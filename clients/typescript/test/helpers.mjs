// Test support: a fresh, migrated database per test file on the shared PostgreSQL server,
// reached through the real native addon (no mocks, no other driver).
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Database, migrate } from "../dist/esm/index.js";

export const ADMIN_URL = process.env.QUEUEBOX_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:55432/queuebox";

/**
 * Creates `qb_node_<suite>_<random>`, migrates it (unless `schema: false`), and returns its
 * URL and a pool on it.
 */
export async function freshDatabase(suite, { schema = true } = {}) {
  const name = `qb_node_${suite}_${randomBytes(4).toString("hex")}`;
  const admin = await Database.connect(ADMIN_URL, { maxConnections: 2 });
  await admin.executeScript(`CREATE DATABASE ${name}`);
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  const url = u.toString();
  if (schema) await migrate(url);
  const db = await Database.connect(url, { maxConnections: 4 });
  return {
    name,
    url,
    db,
    async drop() {
      await db.close();
      await admin.executeScript(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.close();
    },
  };
}

/** Enqueues `n` pull rows of `source` with keys `k0..k{n-1}`; returns their ids in order. */
export async function enqueue(db, source, n, extra = () => ({})) {
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = await db.enqueue({ source, idempotencyKey: `k${i}`, payload: { n: i }, ...extra(i) });
    ids.push(r.id);
  }
  return ids;
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor(check, timeoutMs = 15000, what = "condition") {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Row states of `source` keyed by id. */
export async function states(db, source) {
  const { rows } = await db.query(
    "SELECT id::text AS id, state, attempt, last_error, claim_token::text AS claim_token, scheduled_at > now() AS in_future FROM inbox WHERE source = $1",
    [source],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

export async function countState(db, source, state) {
  const { rows } = await db.query("SELECT count(*)::int8 AS n FROM inbox WHERE source = $1 AND state = $2", [source, state]);
  return Number(rows[0].n);
}
