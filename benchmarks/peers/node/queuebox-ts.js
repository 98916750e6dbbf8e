// QueueBox TypeScript wrapper adapter: clients/typescript's Worker.run (over the napi addon
// from bindings/node, a release build; run.sh sets QUEUEBOX_NATIVE_PATH) with default options
// but concurrency, so the batch is the users' default (the core's hand-out batch); QB_BATCH
// sets an explicit batch (harness.py's queuebox-ts-b* systems: the Rust worker's options).
// The Worker has no public connect: it connects inside run(), so this adapter's clock alone
// includes opening the worker's connections. Rows are inserted with plain SQL through pg
// (QueueBox's inbox is written by the relay or by the application's own INSERT).
const path = require('path');
const { Pool } = require('pg');
const { Worker, migrate } = require(path.join(__dirname, '../../../clients/typescript/dist/cjs/index.js'));
const { main } = require('./common');

let url, pool, stop, running;
main({
  async setup(u) {
    url = u;
    await migrate(url);
    pool = new Pool({ connectionString: url, max: 2 });
  },
  async enqueue(n) {
    await pool.query(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
      SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $1::int) g`, [n]);
  },
  async enqueueOne(payload) {
    await pool.query(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
      VALUES ('bench', 'l' || $1::bigint, $2::jsonb, 'pull')`, [payload.n, JSON.stringify(payload)]);
  },
  async start(conc, handler) {
    const batch = process.env.QB_BATCH ? { batchSize: Number(process.env.QB_BATCH) } : {};
    const worker = new Worker({ databaseUrl: url, source: 'bench', concurrency: conc, ...batch });
    stop = new AbortController();
    running = worker.run(async (message) => { await handler(message.payload); }, { signal: stop.signal });
    running.catch((e) => { console.error('queuebox-ts:', e); process.exit(1); });
  },
  async stop() {
    if (stop) { stop.abort(); await running; }
    await pool.end();
  },
});
