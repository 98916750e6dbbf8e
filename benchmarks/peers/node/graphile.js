// graphile-worker adapter (defaults: LISTEN/NOTIFY, pollInterval 2 s; concurrency per run,
// maxPoolSize raised to concurrency + 2 so handlers never wait for a connection).
const { run, makeWorkerUtils } = require('graphile-worker');
const { main } = require('./common');

let url, utils, runner;
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
  async start(conc, handler) {
    runner = await run({
      connectionString: url, concurrency: conc, maxPoolSize: Math.max(10, conc + 2), noHandleSignals: true,
      logger: new (require('graphile-worker').Logger)(() => () => {}),
      taskList: { bench: async (payload) => { await handler(payload); } },
    });
  },
  async stop() { if (runner) await runner.stop(); await utils.release(); },
});
