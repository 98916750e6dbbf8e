// The core's log records reach the worker's `logger` option (src/logging.ts).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ConnectError, Dead, Worker } from "../dist/esm/index.js";
import { enqueue, freshDatabase, waitFor } from "./helpers.mjs";

let env;
before(async () => {
  env = await freshDatabase("logs");
});
after(async () => {
  await env?.drop();
});

/** A logger that keeps every record it gets, by level. */
function capturing() {
  const records = [];
  const at = (level) => (message, fields) => records.push({ level, message, fields });
  return {
    records,
    logger: { info: at("info"), warn: at("warn"), error: at("error") },
    find: (level, text) => records.find((r) => r.level === level && r.message.includes(text)),
  };
}

test("a worker whose database is unreachable says so at warn level through its logger", async () => {
  const c = capturing();
  const w = new Worker({ databaseUrl: "postgres://qb@127.0.0.1:1/down", source: "node-logs-down", logger: c.logger });
  await assert.rejects(w.run(() => {}), ConnectError);
  const r = await waitFor(() => c.find("warn", "database is unreachable"), 10000, "the warn record");
  assert.equal(r.fields.source, "node-logs-down");
  assert.equal(r.fields.target, "queuebox_core::worker");
  assert.match(r.fields.error, /127\.0\.0\.1:1/);
});

test("a dead-lettered message is logged with its id and source", async () => {
  const c = capturing();
  const source = "node-logs-dead";
  const [id] = await enqueue(env.db, source, 1);
  const w = new Worker({ databaseUrl: env.url, source, pollIntervalMs: 20, logger: c.logger });
  const ac = new AbortController();
  const done = w.run(() => {
    throw new Dead("poison pill");
  }, { signal: ac.signal });
  const r = await waitFor(() => c.find("warn", "dead-lettered"), 10000, "the dead-letter record");
  ac.abort();
  await done;
  assert.equal(r.fields.message_id, id);
  assert.equal(r.fields.source, source);
  assert.equal(r.fields.reason, "poison pill");
});
