// The CLI shared by the Node adapters (same contract as every adapter, see ../harness.py):
//   drain URL N CONC | latency URL RATE SECS CONC | enqueue URL N | work URL CONC SLEEP_MS LOG
// An adapter supplies { setup(url), enqueue(n), enqueueOne(payload), prepare?(conc), start(conc, handler),
// stop() }; handler(payload) is awaited per job. Drain: with PEERS_PREENQUEUED set the harness
// has inserted the rows (`enqueue`) and run VACUUM ANALYZE; prepare(conc) opens the adapter's
// connections, and only then does the clock start.
const fs = require('fs');

const nowMs = () => Number(process.hrtime.bigint() / 1000n) / 1000 + offset;
// Wall clock in ms with microsecond steps: hrtime anchored to Date.now() once.
const offset = Date.now() - Number(process.hrtime.bigint() / 1000n) / 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (v, q) => v[Math.round((v.length - 1) * q)];

async function main(adapter) {
  const [mode, url, ...a] = process.argv.slice(2);
  await adapter.setup(url);
  if (mode === 'enqueue') {
    await adapter.enqueue(Number(a[0]));
    await adapter.stop();
  } else if (mode === 'drain') {
    const n = Number(a[0]), conc = Number(a[1]);
    if (!process.env.PEERS_PREENQUEUED) await adapter.enqueue(n);
    if (adapter.prepare) await adapter.prepare(conc);
    let done = 0, finished;
    const all = new Promise((r) => (finished = r));
    const t0 = process.hrtime.bigint();
    let t1;
    await adapter.start(conc, async () => {
      if (++done === n) { t1 = process.hrtime.bigint(); finished(); }
    });
    await all;
    const secs = Number(t1 - t0) / 1e9;
    await adapter.stop();
    console.log(JSON.stringify({ rows_per_s: n / secs, seconds: secs, handled: done }));
  } else if (mode === 'latency') {
    const rate = Number(a[0]), secs = Number(a[1]), conc = Number(a[2]);
    const total = Math.floor(rate * secs);
    const lat = [];
    await adapter.start(conc, async (p) => { lat.push(nowMs() - p.t); });
    await sleep(1000);
    const t0 = nowMs();
    for (let i = 0; i < total; i++) {
      const wait = t0 + (i * 1000) / rate - nowMs();
      if (wait > 0) await sleep(wait);
      await adapter.enqueueOne({ n: i, t: nowMs() });
    }
    const offered = total / ((nowMs() - t0) / 1000);
    const deadline = Date.now() + 30000;
    while (lat.length < total && Date.now() < deadline) await sleep(20);
    await adapter.stop();
    const v = lat.slice().sort((x, y) => x - y);
    console.log(JSON.stringify({ n: v.length, expected: total, offered_per_s: offered, p50: pct(v, 0.5), p95: pct(v, 0.95), p99: pct(v, 0.99), max: v[v.length - 1] }));
  } else if (mode === 'work') {
    const conc = Number(a[0]), sleepMs = Number(a[1]);
    const fd = fs.openSync(a[2], 'a');
    await adapter.start(conc, async (p) => {
      fs.writeSync(fd, `S ${p.n} ${nowMs().toFixed(1)}\n`);
      await sleep(sleepMs);
      fs.writeSync(fd, `D ${p.n} ${nowMs().toFixed(1)}\n`);
    });
    await new Promise(() => {});
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.exit(0);
}

module.exports = { main };
