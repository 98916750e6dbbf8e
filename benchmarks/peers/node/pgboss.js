// pg-boss adapter. pg-boss 10 has no concurrency option: CONC handlers are CONC work()
// subscriptions (its documented way). Each subscription fetches, runs its batch, completes it
// and then sleeps out the rest of pollingIntervalSeconds (no LISTEN; src/worker.js), so the
// defaults (batchSize 1, 2 s) cap a subscription at 0.5 jobs/s; we use the documented
// throughput knobs: batchSize 500 (one fetch and one complete() call per 500 jobs) and the
// minimum pollingIntervalSeconds 0.5. Pool max = max(10, concurrency + 2), all connected in
// prepare(), before the clock.
// PGBOSS_EXPIRE_S (the "pg-boss-expire30s" crash variant): jobs expire after that many seconds
// (default 15 min) and maintenance runs every 5 s (default 120 s), so a dead worker's jobs retry.
const PgBoss = require('pg-boss');
const { main } = require('./common');

let boss, url;
const Q = 'bench';
const expire = process.env.PGBOSS_EXPIRE_S ? { expireInSeconds: Number(process.env.PGBOSS_EXPIRE_S) } : {};
main({
  async setup(u) { url = u; },
  async boot(conc) {
    if (boss) return;
    const tuned = process.env.PGBOSS_EXPIRE_S ? { maintenanceIntervalSeconds: 5 } : {};
    boss = new PgBoss({ connectionString: url, max: Math.max(10, conc + 2), ...tuned });
    boss.on('error', (e) => console.error('pg-boss:', e.message));
    await boss.start();
    await boss.createQueue(Q);
  },
  async enqueue(n) {
    await this.boot(32);
    for (let i = 1; i <= n; i += 5000) {
      const jobs = [];
      for (let k = i; k < Math.min(i + 5000, n + 1); k++) jobs.push({ name: Q, data: { n: k }, ...expire });
      await boss.insert(jobs);
    }
  },
  async enqueueOne(payload) { await boss.send(Q, payload); },
  async prepare(conc) {
    await this.boot(conc);
    const p = boss.getDb().pool;
    const clients = await Promise.all(Array.from({ length: Math.max(10, conc + 2) }, () => p.connect()));
    clients.forEach((c) => c.release());
  },
  async start(conc, handler) {
    await this.boot(conc);
    for (let i = 0; i < conc; i++) await boss.work(Q, { batchSize: 500, pollingIntervalSeconds: 0.5 }, async (jobs) => { for (const j of jobs) await handler(j.data); });
  },
  async stop() { await boss.stop({ graceful: true, wait: true, timeout: 5000 }); },
});
