// The application's own transaction: completeTx / publish / publishMany on the
// drivers users run, node-postgres (a PoolClient inside BEGIN … COMMIT), Knex
// (knex.transaction), Drizzle ORM on node-postgres (db.transaction) and Prisma
// (prisma.$transaction, in a Prisma project generated for this file: test/prisma-project.mjs),
// against a real PostgreSQL through the real native addon. Every behaviour runs once per
// driver.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import knexFactory from "knex";
import { drizzle } from "drizzle-orm/node-postgres";
import { sql as dsql } from "drizzle-orm";
import { ClaimLost, completeTx, InvalidInput, publish, publishMany, QueueBoxError, Worker } from "../dist/esm/index.js";
import { countState, enqueue, freshDatabase, states, waitFor } from "./helpers.mjs";
import { prismaProject } from "./prisma-project.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

let env;
let pool;
let knex;
let orm;
let project;
let prisma;
/** Statements Drizzle ran that touched the outbox (its logger sees each one). */
let drizzleOutboxStatements = 0;
before(async () => {
  env = await freshDatabase("apptx");
  await env.db.execute("CREATE TABLE orders_seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)");
  pool = new pg.Pool({ connectionString: env.url, max: 4 });
  // pool.end() resolves before its idle clients' sockets close; the database drop at teardown
  // then terminates them, which a pool reports as an 'error' event (uncaught without this).
  pool.on("error", () => {});
  knex = knexFactory({ client: "pg", connection: env.url, pool: { min: 0, max: 4 } });
  orm = drizzle(pool, { logger: { logQuery: (q) => (/outbox/i.test(q) ? drizzleOutboxStatements++ : 0) } });
  project = await prismaProject();
  prisma = new project.PrismaClient({ adapter: new project.PrismaPg({ connectionString: env.url, max: 4 }) });
});
const running = [];
after(async () => {
  for (const r of running) r.ac.abort();
  await Promise.allSettled(running.map((r) => r.done));
  await pool?.end();
  await knex?.destroy();
  await prisma?.$disconnect();
  project?.remove();
  await env?.drop();
});

const quiet = { warn() {} };

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
  { name: "pg", inTx: inPgTx, insert: (db, id, note) => db.query("INSERT INTO orders_seen (inbox_id, note) VALUES ($1, $2)", [id, note]) },
  { name: "knex", inTx: (fn) => knex.transaction(fn), insert: (db, id, note) => db("orders_seen").insert({ inbox_id: id, note }) },
  {
    name: "drizzle",
    inTx: (fn) => orm.transaction(fn),
    insert: (tx, id, note) => tx.execute(dsql`INSERT INTO orders_seen (inbox_id, note) VALUES (${id}, ${note})`),
  },
  {
    name: "prisma",
    // Interactive transactions end after 5 s by default; the lost-lease tests wait inside one
    // for a second worker.
    inTx: (fn) => prisma.$transaction(fn, { maxWait: 10000, timeout: 60000 }),
    insert: (tx, id, note) => tx.orderSeen.create({ data: { inboxId: id, note } }),
  },
];

function start(worker, handler) {
  const ac = new AbortController();
  const done = worker.run(handler, { signal: ac.signal });
  running.push({ ac, done });
  return async () => {
    ac.abort();
    await done;
  };
}

async function seenNotes(id) {
  const { rows } = await env.db.query("SELECT note FROM orders_seen WHERE inbox_id = $1::uuid", [id]);
  return rows.map((r) => r.note);
}

async function outboxRow(id) {
  const { rows } = await env.db.query(
    `SELECT id::text AS id, topic, key, aggregate_type, payload, headers, max_attempts, state, attempt,
            scheduled_at > now() + interval '50 seconds' AS delayed FROM outbox WHERE id = $1::uuid`,
    [id],
  );
  return rows[0];
}

for (const d of DRIVERS) {
  test(`${d.name}: completeTx commits the business write and the completion together`, async () => {
    const source = `${d.name}-ok`;
    const [id] = await enqueue(env.db, source, 1);
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
    const stop = start(w, (m) =>
      d.inTx(async (db) => {
        await d.insert(db, m.id, "handled");
        await completeTx(db, m);
      }),
    );
    await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
    await stop();
    const r = (await states(env.db, source)).get(id);
    assert.equal(r.attempt, 0);
    assert.equal(r.claim_token, null);
    assert.deepEqual(await seenNotes(id), ["handled"]);
  });

  test(`${d.name}: completeTx runs once per transaction: a second call is refused and the first completion commits`, async () => {
    const source = `${d.name}-twice`;
    const [id] = await enqueue(env.db, source, 1);
    let second;
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
    const stop = start(w, (m) =>
      d.inTx(async (db) => {
        await d.insert(db, m.id, "once");
        await completeTx(db, m);
        second = await completeTx(db, m).catch((e) => e);
      }),
    );
    await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
    await stop();
    assert.ok(second instanceof InvalidInput && /runs once per transaction/.test(second.message), String(second));
    assert.deepEqual(await seenNotes(id), ["once"]);
    assert.equal(w.stats().claimsLost, 0, "no lost claim was reported");
  });

  test(`${d.name}: after a rolled-back transaction the handler can complete in a new one`, async () => {
    const source = `${d.name}-again`;
    const [id] = await enqueue(env.db, source, 1);
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
    const stop = start(w, async (m) => {
      // The application's own retry of a transaction (a serialization failure, say).
      await d
        .inTx(async (db) => {
          await d.insert(db, m.id, "first try");
          await completeTx(db, m);
          throw new Error("serialization failure");
        })
        .catch(() => {});
      await d.inTx(async (db) => {
        await d.insert(db, m.id, "second try");
        await completeTx(db, m);
      });
    });
    await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed");
    await stop();
    assert.deepEqual(await seenNotes(id), ["second try"]);
    assert.equal((await states(env.db, source)).get(id).attempt, 0);
  });

  test(`${d.name}: a handler error after completeTx rolls both back and the row is retried with attempt and last_error`, async () => {
    const source = `${d.name}-retry`;
    const [id] = await enqueue(env.db, source, 1);
    const attempts = [];
    const w = new Worker({
      databaseUrl: env.url,
      source,
      pollIntervalMs: 20,
      retry: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 50, jitter: 0 },
      logger: quiet,
    });
    const stop = start(w, (m) =>
      d.inTx(async (db) => {
        attempts.push(m.attempt);
        await d.insert(db, m.id, `attempt ${m.attempt}`);
        await completeTx(db, m);
        if (m.attempt === 0) throw new Error("boom after completeTx");
      }),
    );
    await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed on the retry");
    await stop();
    assert.deepEqual(attempts, [0, 1], "the failed delivery was retried once");
    const r = (await states(env.db, source)).get(id);
    assert.equal(r.attempt, 1, "the failure spent one attempt");
    assert.equal(r.last_error, "boom after completeTx");
    assert.deepEqual(await seenNotes(id), ["attempt 1"], "the first attempt's write rolled back");
  });

  test(`${d.name}: a lost lease makes completeTx reject with ClaimLost and the business write disappears`, async () => {
    const source = `${d.name}-lost`;
    const [id] = await enqueue(env.db, source, 1);
    let caught;
    let rivalStop;
    const rivalSaw = [];
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
    const stop = start(w, async (m) => {
      try {
        await d.inTx(async (db) => {
          await d.insert(db, m.id, "lost");
          // The lease runs out and another worker takes the row and completes it.
          await env.db.execute("UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = $1::uuid", [m.id]);
          const rival = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
          rivalStop = start(rival, (m2) => {
            rivalSaw.push(m2.id);
          });
          await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "the rival's completion");
          await completeTx(db, m);
        });
      } catch (e) {
        caught = e;
        throw e;
      }
    });
    await waitFor(() => caught, 15000, "completeTx to fail");
    await stop();
    await rivalStop();
    assert.ok(caught instanceof ClaimLost, `ClaimLost, got ${caught}`);
    assert.equal(caught.kind, "claim_lost");
    assert.match(caught.message, new RegExp(id));
    assert.deepEqual(rivalSaw, [id]);
    assert.deepEqual(await seenNotes(id), [], "the business write rolled back");
    const r = (await states(env.db, source)).get(id);
    assert.equal(r.state, "processed");
    assert.equal(r.attempt, 0, "the lost claim spent no attempt");
    assert.equal(w.stats().completed, 0);
    assert.equal(w.stats().claimsLost, 1, "the lost claim is counted once (the failing handler's retry is not)");
  });

  test(`${d.name}: a renewal that finds the lease lost aborts the handler, a later completeTx is refused and the write rolls back`, async () => {
    const source = `${d.name}-renew-lost`;
    const [id] = await enqueue(env.db, source, 1);
    let refused;
    const w = new Worker({ databaseUrl: env.url, source, leaseMs: 600, pollIntervalMs: 20, logger: quiet });
    const stop = start(w, (m, _tx, signal) =>
      d.inTx(async (db) => {
        await d.insert(db, m.id, "too late");
        await env.db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [m.id]);
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        refused = await completeTx(db, m).catch((e) => e);
        throw refused;
      }),
    );
    await waitFor(() => refused, 10000, "the handler aborted");
    await stop();
    // Cancelled, or AlreadyFinished once the worker has abandoned the task: either way refused.
    assert.ok(refused instanceof QueueBoxError && ["cancelled", "already_finished"].includes(refused.kind), String(refused));
    assert.deepEqual(await seenNotes(id), [], "the business write rolled back");
    assert.equal((await states(env.db, source)).get(id).state, "processing", "abandoned, not completed");
    assert.equal(w.stats().completed, 0);
  });

  test(`${d.name}: a rolled-back publish leaves no row`, async () => {
    let id;
    await assert.rejects(
      d.inTx(async (db) => {
        id = await publish(db, `${d.name}.rolled-back`, { n: 1 });
        throw new Error("business rule says no");
      }),
      /business rule says no/,
    );
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(await outboxRow(id), undefined);
  });

  test(`${d.name}: a committed publish is a pending outbox row with the returned id and the options given`, async () => {
    const topic = `${d.name}.orders.created`;
    const id = await d.inTx((db) =>
      publish(db, topic, { total: 12.5, items: [1, 2] }, {
        key: "order-7",
        headers: { "x-tenant": "acme" },
        aggregateType: "order",
        maxAttempts: 9,
        delayMs: 60000,
      }),
    );
    const r = await outboxRow(id);
    assert.deepEqual(r, {
      id,
      topic,
      key: "order-7",
      aggregate_type: "order",
      payload: { total: 12.5, items: [1, 2] },
      headers: { "x-tenant": "acme" },
      max_attempts: 9,
      state: "pending",
      attempt: 0,
      delayed: true,
    });
    const at = new Date(Date.now() + 3600_000);
    const [a, b] = await d.inTx((db) =>
      publishMany(db, [
        { topic, payload: "plain", scheduledAt: at },
        { topic, payload: [1] },
      ]),
    );
    assert.equal((await outboxRow(a)).delayed, true);
    assert.equal((await outboxRow(b)).delayed, false);
    assert.equal((await outboxRow(b)).max_attempts, 5, "the default ceiling");
  });

  test(`${d.name}: publishMany of 10,000 rows is one statement`, async () => {
    const topic = `${d.name}.bulk`;
    const messages = Array.from({ length: 10000 }, (_, n) => ({ topic, payload: { n }, key: `k${n % 7}` }));
    let statements = 0;
    const started = Date.now();
    const ids = await d.inTx(async (db) => {
      if (d.name === "pg") {
        // The real client, counted: every statement publishMany runs goes through query.
        const counted = { query: (...args) => (statements++, db.query(...args)) };
        return publishMany(counted, messages);
      }
      if (d.name === "prisma") {
        // The real tx, counted the same way: its raw calls are all publishMany has.
        const counted = {
          $executeRawUnsafe: (...args) => (statements++, db.$executeRawUnsafe(...args)),
          $queryRawUnsafe: (...args) => (statements++, db.$queryRawUnsafe(...args)),
        };
        return publishMany(counted, messages);
      }
      if (d.name === "drizzle") {
        const before = drizzleOutboxStatements;
        try {
          return await publishMany(db, messages);
        } finally {
          statements = drizzleOutboxStatements - before;
        }
      }
      const count = (q) => (/outbox/i.test(q.sql) ? statements++ : 0);
      knex.on("query", count);
      try {
        return await publishMany(db, messages);
      } finally {
        knex.off("query", count);
      }
    });
    const ms = Date.now() - started;
    assert.equal(statements, 1);
    assert.equal(ids.length, 10000);
    assert.equal(new Set(ids).size, 10000);
    const { rows } = await env.db.query(
      `SELECT count(*)::int8 AS n FROM outbox o JOIN jsonb_array_elements_text($1::jsonb) WITH ORDINALITY AS u(id, i) ON o.id = u.id::uuid
        WHERE o.topic = $2 AND (o.payload->>'n')::int8 = u.i - 1 AND o.state = 'pending'`,
      [ids, topic],
    );
    assert.equal(Number(rows[0].n), 10000, "every id is its message's row, in order");
    console.log(`# ${d.name}: publishMany of 10,000 rows in one statement took ${ms} ms (informational, not a benchmark)`);
  });

  test(`${d.name}: bad input is refused naming the field, and nothing is written`, async () => {
    const topic = `${d.name}.bad`;
    const bad = async (f, re) => {
      await assert.rejects(d.inTx(f), (e) => {
        assert.ok(e instanceof InvalidInput, `InvalidInput, got ${e}`);
        assert.match(e.message, re);
        return true;
      });
    };
    await bad((db) => publish(db, "", {}), /\btopic\b/);
    await bad((db) => publish(db, topic, undefined), /\bpayload\b/);
    await bad((db) => publish(db, topic, {}, { maxAttempts: 0 }), /\bmaxAttempts\b/);
    await bad((db) => publish(db, topic, {}, { delayMs: 5, scheduledAt: new Date() }), /delayMs.*scheduledAt/);
    await bad((db) => publish(db, topic, {}, { headers: { "content-length": "5" } }), /headers\.content-length/);
    await bad((db) => publish(db, topic, {}, { delay: 5 }), /\bdelay\b/);
    await bad((db) => publish(db, topic, {}, { scheduledAt: new Date("nope") }), /scheduledAt/);
    const ok = { topic, payload: {} };
    await bad((db) => publishMany(db, [ok, ok, ok, { topic, payload: {}, headers: { "x-a": "line\nbreak" } }]), /messages\[3\]\.headers\.x-a/);
    const { rows } = await env.db.query("SELECT count(*)::int8 AS n FROM outbox WHERE topic = $1", [topic]);
    assert.equal(Number(rows[0].n), 0);
  });
}

test("publish on a pg Pool, the Knex instance, the Drizzle database or the PrismaClient commits at once (no transaction of the application's)", async () => {
  const a = await publish(pool, "autocommit.pool", { n: 1 });
  const [b] = await publishMany(knex, [{ topic: "autocommit.knex", payload: { n: 2 } }]);
  const c = await publish(orm, "autocommit.drizzle", { n: 3 });
  const d = await publish(prisma, "autocommit.prisma", { n: 4 });
  assert.equal((await outboxRow(a)).topic, "autocommit.pool");
  assert.equal((await outboxRow(b)).topic, "autocommit.knex");
  assert.equal((await outboxRow(c)).topic, "autocommit.drizzle");
  assert.equal((await outboxRow(d)).topic, "autocommit.prisma");
});

test("publish refuses an object that is no driver, naming db", async () => {
  await assert.rejects(publish({}, "t", {}), (e) => e instanceof InvalidInput && /\bdb\b/.test(e.message));
  await assert.rejects(publish(null, "t", {}), (e) => e instanceof InvalidInput && /\bdb\b/.test(e.message));
});

test("completeTx refuses what is not a transaction, and a message no handler received", async () => {
  const source = "refusals";
  await enqueue(env.db, source, 1);
  const errors = {};
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, async (m) => {
    errors.pool = await completeTx(pool, m).catch((e) => e);
    errors.knex = await completeTx(knex, m).catch((e) => e);
    errors.drizzle = await completeTx(orm, m).catch((e) => e);
    errors.prisma = await completeTx(prisma, m).catch((e) => e);
    errors.copy = await inPgTx((c) => completeTx(c, { ...m })).catch((e) => e);
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed by the worker");
  await stop();
  assert.ok(errors.pool instanceof InvalidInput && /db: a pg Pool/.test(errors.pool.message), String(errors.pool));
  assert.ok(errors.knex instanceof InvalidInput && /db: a Knex instance/.test(errors.knex.message), String(errors.knex));
  assert.ok(errors.drizzle instanceof InvalidInput && /db: a Drizzle database/.test(errors.drizzle.message), String(errors.drizzle));
  assert.ok(
    errors.prisma instanceof InvalidInput && /db: a PrismaClient .*prisma\.\$transaction\(async \(tx\)/.test(errors.prisma.message),
    String(errors.prisma),
  );
  assert.ok(errors.copy instanceof InvalidInput && /\bmessage\b/.test(errors.copy.message), String(errors.copy));
  assert.ok(errors.copy instanceof QueueBoxError);
});

test("shutdown: a handler in its own transaction that outlives the grace is refused by completeTx and its write rolls back", async () => {
  const source = "shutdown-app-tx";
  const [id] = await enqueue(env.db, source, 1);
  let started = false;
  let refused;
  const w = new Worker({ databaseUrl: env.url, source, shutdownGraceMs: 300, pollIntervalMs: 20, logger: quiet });
  const ac = new AbortController();
  const done = w.run(
    (m, _tx, signal) =>
      inPgTx(async (c) => {
        await c.query("INSERT INTO orders_seen (inbox_id, note) VALUES ($1, 'half done')", [m.id]);
        started = true;
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        refused = await completeTx(c, m).catch((e) => e);
        throw refused;
      }),
    { signal: ac.signal },
  );
  running.push({ ac, done });
  await waitFor(() => started, 10000, "the handler started");
  ac.abort();
  await done;
  await waitFor(() => refused, 5000, "completeTx after the grace");
  assert.ok(refused instanceof QueueBoxError && ["cancelled", "already_finished"].includes(refused.kind), String(refused));
  assert.deepEqual(await seenNotes(id), [], "the half-done write rolled back");
  const r = (await states(env.db, source)).get(id);
  assert.deepEqual([r.state, r.attempt], ["processing", 0], "abandoned: no completion, no attempt spent");
});

test("completeTx with a message kept past its handler is refused and writes nothing", async () => {
  const source = "kept";
  const [id] = await enqueue(env.db, source, 1);
  let kept;
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: quiet });
  const stop = start(w, (m) => {
    kept = m; // the worker completes the row itself when the handler returns
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 1, 10000, "processed by the worker");
  await stop();
  const late = await inPgTx(async (c) => {
    await c.query("INSERT INTO orders_seen (inbox_id, note) VALUES ($1, 'late')", [kept.id]);
    await completeTx(c, kept);
  }).catch((e) => e);
  assert.ok(late instanceof QueueBoxError && late.kind === "already_finished", String(late));
  assert.deepEqual(await seenNotes(id), [], "the late transaction rolled back");
});

test("one task, one transaction: completeTx after tx.execute is refused, and tx.execute after completeTx", async () => {
  const source = "one-tx";
  const [first, second] = await enqueue(env.db, source, 2);
  const errors = {};
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, retry: { maxAttempts: 0 }, logger: quiet });
  const stop = start(w, async (m, tx) => {
    if (m.id === first) {
      await tx.execute("INSERT INTO orders_seen (inbox_id, note) VALUES ($1::uuid, 'wrapper tx')", [m.id]);
      errors.completeAfterExecute = await inPgTx((c) => completeTx(c, m)).catch((e) => e);
    } else {
      await inPgTx(async (c) => {
        await c.query("INSERT INTO orders_seen (inbox_id, note) VALUES ($1, 'app tx')", [m.id]);
        await completeTx(c, m);
        errors.executeAfterComplete = await tx.execute("SELECT 1").catch((e) => e);
      });
    }
  });
  await waitFor(async () => (await countState(env.db, source, "processed")) === 2, 10000, "both processed");
  await stop();
  assert.ok(errors.completeAfterExecute instanceof InvalidInput, String(errors.completeAfterExecute));
  assert.ok(errors.executeAfterComplete instanceof InvalidInput, String(errors.executeAfterComplete));
  // Each row was completed by the transaction it used, with its write.
  assert.deepEqual(await seenNotes(first), ["wrapper tx"]);
  assert.deepEqual(await seenNotes(second), ["app tx"]);
});

test("prisma: the tx of prisma.$transaction and the PrismaClient type-check where the functions take db", () => {
  // Against the types Prisma generated for the project's schema, as an application compiles.
  writeFileSync(
    join(project.dir, "check.mts"),
    `import { PrismaClient } from "./generated/prisma/index.js";
import { completeTx, enqueue, publish, type InboxMessage } from ${JSON.stringify(join(root, "dist", "esm", "index.js"))};
declare const prisma: PrismaClient;
declare const message: InboxMessage<{ total: number }>;
export async function handle(): Promise<void> {
  await prisma.$transaction(async (tx) => {
    await tx.orderSeen.create({ data: { inboxId: message.id, note: "typed" } });
    await completeTx(tx, message);
    await publish(tx, "orders.seen", { id: message.id });
    await enqueue(tx, "orders", { total: message.payload.total });
  });
  await publish(prisma, "orders.seen", {});
}
`,
  );
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const args = [
    tsc, "--noEmit", "--strict", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--target", "ES2022",
    "--types", "node", "--skipLibCheck", join(project.dir, "check.mts"),
  ];
  try {
    execFileSync(process.execPath, args, { stdio: "pipe", cwd: project.dir });
  } catch (e) {
    assert.fail(`the Prisma check does not type-check:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
});
