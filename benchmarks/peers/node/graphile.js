// graphile-worker adapter. Defaults: LISTEN/NOTIFY, pollInterval 2 s, no local queue, no
// batched completion; concurrency per run and a pg pool of max(10, concurrency + 2) so
// handlers never wait for a connection. GRAPHILE_TUNED=1 ("graphile-worker-tuned") applies
// the settings of its performance page (worker.graphile.org/docs/performance, 0.17+):
// localQueue.size 500 (jobs fetched and locked in batches, served from memory) and
// completeJobBatchDelay / failJobBatchDelay 0 (completions batched into one statement).
// The pool is created and all of its connections opened in prepare(), before the clock.
const { Pool } = require('pg');
const { run, makeWorkerUtils, Logger } = require('graphile-worker');
const { main } = require('./common');

const TUNED = process.env.GRAPHILE_TUNED === '1';
let url, utils, runner, pool;
main({
  async setup(u) {
    url = u;
    utils = await makeWorkerUtils({ connectionString: url });
    await utils.migrate();
  },
  async enqueue(n) {
    // graphile_worker.add_jobs (its bulk insert) in chunks of 5000.
    for (let i = 1; i <= n; i += 5000) {
      await utils.withPgClient((c) => c.query(
        `SELECT count(*) FROM graphile_worker.add_jobs((SELECT array_agg(ROW('bench', json_build_object('n', g), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec) FROM generate_series($1::int, $2::int) g))`,
        [i, Math.min(i + 4999, n)]));
    }
  },
  async enqueueOne(payload) { await utils.addJob('bench', payload); },
  async prepare(conc) {
    const max = Math.max(10, conc + 2);
    pool = new Pool({ connectionString: url, max });
    const clients = await Promise.all(Array.from({ length: max }, () => pool.connect()));
    clients.forEach((c) => c.release());
  },
  async start(conc, handler) {
    if (!pool) await this.prepare(conc);
    const preset = TUNED ? { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } : undefined;
    runner = await run({
      pgPool: pool, concurrency: conc, noHandleSignals: true, preset,
      logger: new Logger(() => () => {}),
      taskList: { bench: async (payload) => { await handler(payload); } },
    });
  },
  async stop() {
    if (runner) await runner.stop();
    await utils.release();
    if (pool) await pool.end();
  },
});
