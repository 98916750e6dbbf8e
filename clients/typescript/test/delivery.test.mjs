// Publish → delivery end to end: a row published with node-postgres in the application's
// transaction reaches a real HTTP receiver through the real `queuebox` relay binary
// (QUEUEBOX_BIN; 40-node.sh builds it) with X-Message-Id = the id publish returned; a
// rolled-back publish is never delivered.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { publish } from "../dist/esm/index.js";
import { freshDatabase, waitFor } from "./helpers.mjs";

let env;
let pool;
before(async () => {
  env = await freshDatabase("delivery");
  pool = new pg.Pool({ connectionString: env.url, max: 2 });
  // pool.end() resolves before its idle clients' sockets close; the database drop at teardown
  // then terminates them, which a pool reports as an 'error' event (uncaught without this).
  pool.on("error", () => {});
});
after(async () => {
  await pool?.end();
  await env?.drop();
});

/** A port free on the loopback right now. */
async function freePort() {
  const s = createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

test("a committed publish is delivered with X-Message-Id = its id; a rolled-back one never", async () => {
  const bin = process.env.QUEUEBOX_BIN;
  if (!bin || !existsSync(bin)) throw new Error(`NOT RUN: the queuebox binary is not built (QUEUEBOX_BIN=${bin}; 40-node.sh builds it)`);
  const got = [];
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      got.push({ id: req.headers["x-message-id"], key: req.headers["x-message-key"], topic: req.headers["x-topic"], body });
      res.writeHead(200).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const rxPort = receiver.address().port;
  const dir = mkdtempSync(join(tmpdir(), "qb-node-delivery-"));
  const config = join(dir, "queuebox.yaml");
  writeFileSync(
    config,
    `server:\n  httpPort: ${await freePort()}\n  bindAddress: 127.0.0.1\n  drainTimeoutMs: 2000\n` +
      `database:\n  url: ${env.url}\n  startupTimeoutMs: 60000\n` +
      `outbox:\n  pollIntervalMs: 20\n  retryBaseDelayMs: 50\n  claimTimeoutMs: 5000\n  maxAttempts: 2\n  shutdownTimeoutMs: 3000\n` +
      `destinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:${rxPort}\n    path: /hooks\n    timeoutMs: 3000\n` +
      `routes:\n  - topicPattern: '**'\n    destination: rx\n`,
  );
  const log = join(dir, "relay.log");
  const childEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("QUEUEBOX_")));
  const relay = spawn(bin, ["--config", config, "run"], { env: { ...childEnv, RUST_LOG: "warn" }, stdio: ["ignore", openSync(log, "w"), openSync(log, "a")] });
  let exited = false;
  relay.on("exit", () => (exited = true));
  try {
    const inTx = async (fn, commit) => {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        const r = await fn(c);
        await c.query(commit ? "COMMIT" : "ROLLBACK");
        return r;
      } finally {
        c.release();
      }
    };
    const rolledBack = await inTx((c) => publish(c, "orders.rolled-back", { n: 1 }), false);
    const committed = await inTx((c) => publish(c, "orders.created", { n: 2 }, { key: "c-7" }), true);
    const started = Date.now();
    await waitFor(() => exited || got.length > 0, 30000, "the committed row delivered");
    assert.equal(exited, false, `the relay exited: ${readFileSync(log, "utf8")}`);
    console.log(`# delivered ${Date.now() - started} ms after the commit (relay poll interval 20 ms; informational)`);
    await waitFor(async () => (await env.db.query("SELECT state FROM outbox WHERE id = $1::uuid", [committed])).rows[0]?.state === "sent", 10000, "the sent mark");
    await sleep(500); // a rolled-back row would be due as early as the committed one
    assert.equal(got.length, 1, `deliveries (the rolled-back publish ${rolledBack} must never be sent)`);
    assert.deepEqual([got[0].id, got[0].key, got[0].topic], [committed, "c-7", "orders.created"]);
    assert.deepEqual(JSON.parse(got[0].body), { n: 2 });
  } finally {
    relay.kill("SIGTERM");
    if (!exited) await new Promise((resolve) => relay.once("exit", resolve));
    await new Promise((resolve) => receiver.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
});
