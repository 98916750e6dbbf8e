// The Node side of benchmarks/enqueue/run.sh: QueueBox's TypeScript wrapper (enqueue /
// enqueueMany) and pg-boss (send for one row, insert for many, each given the transaction's
// client through its `db` option), both on one node-postgres Client.
//
//   node enqueue.js SYSTEM URL ROWS_PER_TX TXS     SYSTEM: queuebox-ts | pg-boss
//   node enqueue.js pg-boss-migrate URL            (pg-boss's schema and the "bench" queue)
//
// QB_TS_DIST: the wrapper's dist/cjs/index.js (run.sh builds a private copy); NODE_PATH
// finds pg and pg-boss (pinned in this directory's package-lock.json).
//
// Timer boundary, the same in every program of run.sh: the connection is open and two
// transactions of the same shape have run and rolled back before the clock starts; it stops
// when the last COMMIT has returned. Each transaction is BEGIN, one enqueue call, COMMIT.
const { Client } = require('pg');

async function main() {
  const [system, url, rowsArg, txsArg] = process.argv.slice(2);
  if (system === 'pg-boss-migrate') {
    const PgBoss = require('pg-boss');
    const boss = new PgBoss({ connectionString: url, max: 2 });
    await boss.start();
    await boss.createQueue('bench');
    await boss.stop({ graceful: false, wait: true });
    return;
  }
  const rows = Number(rowsArg), txs = Number(txsArg);
  if (!(rows >= 1 && txs >= 1)) throw new Error('usage: enqueue.js queuebox-ts|pg-boss URL ROWS_PER_TX TXS');
  const client = new Client({ connectionString: url });
  await client.connect();
  let fn;
  if (system === 'queuebox-ts') {
    const { enqueue, enqueueMany } = require(process.env.QB_TS_DIST);
    fn = async (first) => {
      if (rows === 1) return enqueue(client, 'bench', { n: first });
      const msgs = new Array(rows);
      for (let i = 0; i < rows; i++) msgs[i] = { source: 'bench', payload: { n: first + i } };
      return enqueueMany(client, msgs);
    };
  } else if (system === 'pg-boss') {
    const PgBoss = require('pg-boss');
    // No supervision, no cron, no migration: nothing of pg-boss runs beside the timed calls
    // (the schema is made by pg-boss-migrate). Its own pool is opened but not used: every
    // call gets the transaction's client through `db`.
    const boss = new PgBoss({ connectionString: url, max: 1, supervise: false, schedule: false, migrate: false });
    await boss.start();
    const db = { executeSql: (text, values) => client.query(text, values) };
    fn = async (first) => {
      if (rows === 1) return boss.send('bench', { n: first }, { db });
      const jobs = new Array(rows);
      for (let i = 0; i < rows; i++) jobs[i] = { name: 'bench', data: { n: first + i } };
      return boss.insert(jobs, { db });
    };
  } else {
    throw new Error(`unknown system ${system}`);
  }
  const one = async (first, commit) => {
    await client.query('BEGIN');
    try {
      await fn(first);
    } catch (e) {
      await client.query('ROLLBACK');
      throw e;
    }
    await client.query(commit ? 'COMMIT' : 'ROLLBACK');
  };
  for (let i = 0; i < 2; i++) await one(0, false);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < txs; i++) await one(i * rows + 1, true);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(JSON.stringify({ system, rows_per_tx: rows, txs, rows: rows * txs, seconds: secs, rows_per_s: (rows * txs) / secs }));
  process.exit(0);
}

main().catch((e) => { console.error('enqueue.js:', e); process.exit(1); });
