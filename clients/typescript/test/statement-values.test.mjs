// A handler's statements store exactly the values they were given, whatever kinds the same
// statement text ran with before, through the real worker and the real PostgreSQL.
//
// The core caches a prepared statement per connection; it used to bind a whole number as int8
// and a fraction as float8 under one cached statement, so 4.25 after 3 stored
// 4616471093031469056. Parameters go to the core as JSON text (src/params.ts): a `bigint` as
// its exact integer literal (JSON.stringify throws on one). Each stored `v::text` is compared
// with what PostgreSQL itself makes of the value's literal (`SELECT ($1::text)::numeric::text`),
// as core/tests/handler_statement_values.rs does.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Database, Dead, QueueBoxError, Worker } from "../dist/esm/index.js";
import { enqueue, freshDatabase, states, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("stmtvalues");
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

const BIG = 123456789012345678901234567890n;

// Per column: [the value sent, its JSON literal: what PostgreSQL should make of it].
const VALUES = {
  numeric: [
    [3, "3"],
    [4.25, "4.25"],
    [12.5, "12.5"],
    [7, "7"],
    [0.5, "0.5"],
    [null, "null"],
    [BIG, "123456789012345678901234567890"],
    [-9223372036854775808n, "-9223372036854775808"],
    [18446744073709551616n, "18446744073709551616"],
    [9007199254740993n, "9007199254740993"],
    [2500, "2500"],
  ],
  float8: [[3, "3"], [4.25, "4.25"], [0.1, "0.1"], [7, "7"], [null, "null"], [1e300, "1e300"], [-0.5, "-0.5"], [5n, "5"]],
  int8: [[3, "3"], [9223372036854775807n, "9223372036854775807"], [null, "null"], [-7, "-7"], [0, "0"], [9007199254740993n, "9007199254740993"]],
  text: [
    ["12.345", '"12.345"'],
    [3, "3"],
    [4.25, "4.25"],
    [true, "true"],
    [null, "null"],
    ["héllo", '"héllo"'],
    [BIG, "123456789012345678901234567890"],
    [[1, "a"], '[1, "a"]'],
    [{ a: 1.5 }, '{"a": 1.5}'],
  ],
  jsonb: [
    [{ a: 1 }, '{"a": 1}'],
    [[1, 2.5, "x"], '[1, 2.5, "x"]'],
    [null, "null"],
    [{ big: BIG }, '{"big": 123456789012345678901234567890}'],
    [[1n, { n: -5n, d: 0.25 }], '[1, {"n": -5, "d": 0.25}]'],
  ],
  bool: [[true, "true"], [false, "false"], [null, "null"]],
};

/** The query that makes PostgreSQL parse the literal as the value's own kind would be. */
function oracleSql(column, value) {
  if (typeof value === "object") return "SELECT ($1::text)::jsonb::text AS v";
  if (column === "text") return typeof value === "boolean" ? "SELECT ($1::text)::bool::text AS v" : "SELECT ($1::text)::numeric::text AS v";
  return `SELECT ($1::text)::${column}::text AS v`;
}

async function expected(tx, column, value, literal) {
  if (value === null) return null;
  if (typeof value === "string") return value;
  return (await tx.query(oracleSql(column, value), [literal])).rows[0].v;
}

const show = (v) => (typeof v === "bigint" ? `${v}n` : JSON.stringify(v));

test("one handler statement stores every kind of value exactly, in any order", async () => {
  const source = "node-statement-values";
  const [id] = await enqueue(env.db, source, 1);
  const wrong = [];
  const sentCounts = {};
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, retry: { maxAttempts: 0 }, logger: quiet });
  const stop = start(w, async (m, tx) => {
    for (const [column, forward] of Object.entries(VALUES)) {
      const sent = [...forward, ...[...forward].reverse()];
      await tx.execute(`CREATE TABLE t_${column} (n serial, v ${column})`);
      const inserted = [];
      // One text for every value: the statement the core prepares once on this connection.
      const insert = `INSERT INTO t_${column} (v) VALUES ($1)`;
      for (const [value, literal] of sent) {
        try {
          await tx.execute(insert, [value]);
          inserted.push([value, literal]);
        } catch (e) {
          wrong.push(`${column}: sent ${show(value)}: ${e.name}: ${e.message}`);
          if (e instanceof QueueBoxError) throw new Dead("a statement failed"); // the transaction is aborted
        }
      }
      const { rows } = await tx.query(`SELECT v::text AS v FROM t_${column} ORDER BY n`);
      for (const [i, [value, literal]] of inserted.entries()) {
        const want = await expected(tx, column, value, literal);
        if (rows[i]?.v !== want) wrong.push(`${column}: sent ${show(value)}, stored ${JSON.stringify(rows[i]?.v)}, expected ${JSON.stringify(want)}`);
      }
      sentCounts[column] = sent.length;
    }
  });
  await waitFor(async () => ["processed", "dead"].includes((await states(env.db, source)).get(id).state), 30000, "the message handled");
  await stop();
  assert.deepEqual(wrong, [], `values stored wrongly:\n${wrong.join("\n")}`);
  assert.equal((await states(env.db, source)).get(id).state, "processed");
  // Committed with the completion: every value is there.
  assert.deepEqual(Object.keys(sentCounts), Object.keys(VALUES));
  for (const [column, n] of Object.entries(sentCounts)) {
    const { rows } = await env.db.query(`SELECT count(*)::int8 AS n FROM t_${column}`);
    assert.equal(rows[0].n, n, column);
  }
});

test("Database.execute stores a fraction after an integer exactly", async () => {
  // Used one statement at a time, the pool reuses its idle connection: the statement
  // prepared there for the first values is the one the later ones find (before the fix,
  // 12.5 after 3 and 4.25 stored 4623226492472524800).
  const db = await Database.connect(env.url, { maxConnections: 1 });
  try {
    await db.execute("CREATE TABLE db_numeric (n serial, v numeric)");
    for (const v of [3, 4.25, 12.5, 7, 0.5]) await db.execute("INSERT INTO db_numeric (v) VALUES ($1)", [v]);
    let { rows } = await db.query("SELECT v::text AS v FROM db_numeric ORDER BY n");
    assert.deepEqual(rows.map((r) => r.v), ["3", "4.25", "12.5", "7", "0.5"]);
    for (const v of [BIG, 9]) await db.execute("INSERT INTO db_numeric (v) VALUES ($1)", [v]);
    ({ rows } = await db.query("SELECT v::text AS v FROM db_numeric ORDER BY n"));
    assert.deepEqual(rows.slice(5).map((r) => r.v), [String(BIG), "9"]);
  } finally {
    await db.close();
  }
});

test("a numeric read back through query is a number (the nearest double); v::text keeps every digit", async () => {
  const db = await Database.connect(env.url, { maxConnections: 1 });
  try {
    await db.execute("CREATE TABLE money (n serial, v numeric)");
    await db.execute(`INSERT INTO money (v) VALUES (4.25), (12.50), (${BIG}), (100), (0.1234567890123456789012345)`);
    const { rows } = await db.query("SELECT v, v::text AS t FROM money ORDER BY n");
    assert.deepEqual(rows.map((r) => r.v), [4.25, 12.5, 1.2345678901234568e29, 100, 0.12345678901234568]);
    assert.notEqual(BigInt(rows[2].v), BIG, "JSON.parse rounds an integer beyond 2^53");
    assert.equal(BigInt(rows[2].t), BIG);
    assert.deepEqual(rows.map((r) => r.t), ["4.25", "12.50", String(BIG), "100", "0.1234567890123456789012345"]);
  } finally {
    await db.close();
  }
});

test("a bigint patched with toJSON (a common workaround) still goes as its number", async () => {
  BigInt.prototype.toJSON = function () {
    return this.toString();
  };
  try {
    const { rows } = await env.db.query("SELECT pg_typeof($1)::text AS t, $1::text AS v, $2::jsonb::text AS j", [BIG, { big: BIG }]);
    assert.deepEqual(rows[0], { t: "numeric", v: String(BIG), j: `{"big": ${BIG}}` });
  } finally {
    delete BigInt.prototype.toJSON;
  }
});

test("a failing handler is a warning through the default logger, once per attempt", async () => {
  const source = "node-handler-fails";
  const [id] = await enqueue(env.db, source, 1);
  // No `logger` option: the default, console.warn, as an application that configured nothing.
  const calls = [];
  const warn = console.warn;
  console.warn = (...args) => calls.push(args);
  try {
    const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 20, jitter: 0 } });
    const stop = start(w, (m) => {
      throw new Error(`card declined on attempt ${m.attempt}`);
    });
    await waitFor(async () => (await states(env.db, source)).get(id).state === "dead", 15000, "dead after two retries");
    await stop();
    const failed = () => calls.filter(([text, fields]) => text === "queuebox: handler failed; retry scheduled" && fields?.source === source);
    await waitFor(() => failed().length >= 2, 10000, "two handler-failure warnings");
    await sleep(200); // and none more
    assert.deepEqual(
      failed().map(([, f]) => [f.message_id, f.attempt, f.error]),
      [
        [id, 1, "card declined on attempt 0"],
        [id, 2, "card declined on attempt 1"],
      ],
    );
  } finally {
    console.warn = warn;
  }
});

test("without a bigint, parameters are the text JSON.stringify writes", async () => {
  const { encodeParams } = await import("../dist/esm/params.js");
  const date = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
  const values = [[1, "a", null, true, 4.25], [undefined, () => 1, -0, 1e21], [{ a: undefined, b: [undefined], d: date, s: new String("x"), n: new Number(2) }], [{ toJSON: (k) => ({ key: k }) }], [[1, , 3]], []];
  for (const params of values) assert.equal(encodeParams(params), JSON.stringify(params));
  assert.equal(encodeParams([1n, [2n], { a: -3n }, Object(4n)]), '[1,[2],{"a":-3},4]');
  // NaN and infinities: JSON.stringify's null would store NULL where a number was meant.
  const { InvalidInput } = await import("../dist/esm/index.js");
  for (const [params, at] of [[[NaN], "$1"], [[1, { a: [0, Infinity] }], '$2["a"][1]'], [[-Infinity], "$1"]]) {
    assert.throws(() => encodeParams(params), (e) => e instanceof InvalidInput && e.message.includes(`parameter ${at} is`), at);
  }
  await assert.rejects(env.db.execute("SELECT $1::float8", [NaN]), InvalidInput);
  const loop = [];
  loop.push(loop);
  assert.throws(() => encodeParams([loop]), TypeError);
  await assert.rejects(env.db.execute("SELECT $1", [loop]), TypeError);
});
