// Errors cross the native boundary typed: the addon sets `code` to the core's kind name and
// the client maps it to its classes (no message parsing). The kinds are the core's one table.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { AlreadyFinished, Cancelled, ClaimLost, ERROR_CLASSES, ERROR_KINDS, InvalidInput, QueueBoxError } from "../dist/esm/index.js";
import { call } from "../dist/esm/errors.js";
import { enqueue, freshDatabase, states } from "./helpers.mjs";

const native = createRequire(import.meta.url)("../dist/native/loader.cjs");
const table = join(dirname(fileURLToPath(import.meta.url)), "../../../proto-docs/error-kinds.json");

let env;
before(async () => {
  env = await freshDatabase("errors");
});
after(async () => {
  await env?.drop();
});

test("the error kinds and their classes are exactly the core's table", () => {
  const core = JSON.parse(readFileSync(table, "utf8")).kinds.map((k) => k.name);
  assert.deepEqual([...ERROR_KINDS], core, "ERROR_KINDS drifted from proto-docs/error-kinds.json");
  assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), [...core].sort(), "ERROR_CLASSES drifted from the core's table");
  for (const kind of core) {
    const e = new ERROR_CLASSES[kind]("m");
    assert.ok(e instanceof QueueBoxError && e.kind === kind, `${kind} maps to a class of its own kind`);
  }
});

test("the addon sets the kind as the error's code natively", () => {
  assert.throws(() => native.evaluate("no_such_kind", "{}"), (e) => e instanceof Error && e.code === "invalid_input");
});

test("an error of the addon becomes its typed class", async () => {
  await assert.rejects(call(native.connectWorker(env.url, "{not json")), (e) => e instanceof InvalidInput && e.kind === "invalid_input");
});

test("a lost lease surfaces as ClaimLost", async () => {
  const source = "lost-lease";
  const [id] = await enqueue(env.db, source, 1);
  const w = await call(native.connectWorker(env.url, JSON.stringify({ source, pollIntervalMs: 20 })));
  const task = await call(w.next());
  // Another worker owns the row now: the fenced completion matches nothing.
  await env.db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [id]);
  await assert.rejects(call(task.complete()), (e) => e instanceof ClaimLost && e.kind === "claim_lost");
  assert.equal((await states(env.db, source)).get(id).state, "processing");
  await w.shutdown();
});

test("a cancelled task may only be abandoned: every other finish is refused as Cancelled", async () => {
  const source = "cancel-only";
  await enqueue(env.db, source, 5);
  const w = await call(
    native.connectWorker(env.url, JSON.stringify({ source, batchSize: 5, concurrency: 5, pollIntervalMs: 20, shutdownGraceMs: 100 })),
  );
  const tasks = [];
  for (let i = 0; i < 5; i++) tasks.push(await call(w.next()));
  await call(tasks[0].execute("CREATE TABLE cancelled_write (x int)"));
  assert.equal(await w.shutdown(), 5, "the grace runs out with five running tasks");
  assert.ok(tasks.every((t) => t.isCancelled()));
  const finishes = [
    ["complete", () => tasks[0].complete()],
    ["fail", () => tasks[1].fail("boom")],
    ["retry", () => tasks[2].retry(1000, "later")],
    ["dead", () => tasks[3].dead("poison")],
    ["release", () => tasks[4].release()],
  ];
  for (const [name, finish] of finishes) {
    await assert.rejects(call(finish()), (e) => e instanceof Cancelled, `${name} on a cancelled task`);
  }
  for (const r of (await states(env.db, source)).values()) {
    assert.deepEqual([r.state, r.attempt], ["processing", 0], "nothing written");
  }
  const { rows } = await env.db.query("SELECT to_regclass('cancelled_write') IS NULL AS gone");
  assert.equal(rows[0].gone, true, "the cancelled task's writes rolled back");
  await tasks[0].abandon();
  await assert.rejects(call(tasks[0].complete()), (e) => e instanceof AlreadyFinished);
});
