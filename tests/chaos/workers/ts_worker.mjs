// The chaos ledger's pull worker in TypeScript/JavaScript, on @alternayte/queuebox-inbox
// (clients/typescript, built by scripts/test.d/40-node.sh into clients/typescript/dist): the
// twin of tests/chaos/worker (Rust). One line per handler call on stdout — {"id", "key",
// "attempt"}, a tab, the payload as JSON.stringify writes it — then the row is completed.
// JavaScript reads every JSON number as a double, so this path's ledger compares numbers as
// doubles (the stored rows are still compared exactly). Stops on SIGTERM.
//
//   node tests/chaos/workers/ts_worker.mjs <database-url> <source> <lease-ms>
import { Worker } from "../../../clients/typescript/dist/esm/index.js";

const [url, source, leaseMs] = process.argv.slice(2);
const stop = new AbortController();
process.once("SIGTERM", () => stop.abort());

const worker = new Worker({ databaseUrl: url, source, batchSize: 20, concurrency: 4, leaseMs: Number(leaseMs), pollIntervalMs: 100, shutdownGraceMs: 2000 });
await worker.run(async (message) => {
  const meta = JSON.stringify({ id: message.id, key: message.idempotencyKey, attempt: message.attempt });
  // One write per line: a line the harness reads is a call that happened.
  process.stdout.write(`${meta}\t${JSON.stringify(message.payload)}\n`);
}, { signal: stop.signal });
