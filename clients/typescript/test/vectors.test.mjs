// Runs every pure conformance vector of proto-docs/vectors/ through the native binding
// (the core's real functions) and compares the output with the expected JSON.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { evaluate, QueueBoxError } from "../dist/esm/index.js";

const dir = join(dirname(fileURLToPath(import.meta.url)), "../../../proto-docs/vectors");
// State transitions need a database and are run by the Rust store tests.
const DB_ONLY = new Set(["transitions"]);
const files = readdirSync(dir).filter((f) => f.endsWith(".json"));

test("the vector directory has the pure kinds", () => {
  const kinds = files.map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")).kind);
  for (const k of ["backoff", "idempotency_key", "redact", "completion_statement", "publish_statement"]) assert.ok(kinds.includes(k), `missing ${k} vectors`);
});

for (const f of files) {
  const file = JSON.parse(readFileSync(join(dir, f), "utf8"));
  if (DB_ONLY.has(file.kind)) continue;
  test(`vectors ${f}: every case matches through the native binding`, () => {
    assert.ok(file.cases.length > 0);
    const failures = [];
    for (const c of file.cases) {
      let got;
      try {
        got = evaluate(file.kind, c.input);
      } catch (e) {
        got = { thrown: String(e) };
      }
      try {
        assert.deepStrictEqual(got, c.expected);
      } catch {
        failures.push(`${c.name}: expected ${JSON.stringify(c.expected)}, got ${JSON.stringify(got)}`);
      }
    }
    assert.deepEqual(failures, []);
  });
}

test("an unknown vector kind is an invalid_input error", () => {
  assert.throws(() => evaluate("no_such_kind", {}), (e) => e instanceof QueueBoxError && e.kind === "invalid_input");
});

test("the CommonJS build, required by package name, loads the same addon", () => {
  const require = createRequire(import.meta.url);
  const cjs = require("@alternayte/queuebox-inbox");
  assert.equal(typeof cjs.Worker, "function");
  assert.deepEqual(cjs.evaluate("redact", { text: "postgres://u:pw@h/db down" }), evaluate("redact", { text: "postgres://u:pw@h/db down" }));
});
