// Node client side of benchmarks/nodepy_bench.sh: Worker.run with a no-op handler over
// `rows` pull rows of `source`, timed from run() until every row is processed.
// Usage: node bench.mjs <database url> <source> <rows> <batch> <concurrency>
// (batch 0: unset, the core's adaptive batch).
// Prints one line: `rows_per_sec=<n> seconds=<s>`.
// QB_TS_CLIENT: another build of the client (the "before" rows of nodepy_bench.sh).
const { Worker } = await import(process.env.QB_TS_CLIENT ?? "../../clients/typescript/dist/esm/index.js");

const [url, source, rows, batch, conc] = process.argv.slice(2);
const total = Number(rows);
const w = new Worker({ databaseUrl: url, source, batchSize: Number(batch) || undefined, concurrency: Number(conc), pollIntervalMs: 50 });
const ac = new AbortController();
const started = process.hrtime.bigint();
const done = w.run(() => {}, { signal: ac.signal });
const timer = setInterval(() => {
  if ((w.stats()?.completed ?? 0) >= total) {
    clearInterval(timer);
    ac.abort();
  }
}, 5);
await done;
const secs = Number(process.hrtime.bigint() - started) / 1e9;
console.log(`rows_per_sec=${(total / secs).toFixed(1)} seconds=${secs.toFixed(3)}`);
