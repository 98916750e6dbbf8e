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
  // Complete only once the line is handed to the OS: when the pipe is full, Node queues a
  // write in memory and returns at once, and a SIGKILL then loses lines of rows already
  // completed (seen in a long run: 226 rows processed, their lines never read).
  const line = `${meta}\t${JSON.stringify(message.payload)}\n`;
  await new Promise((resolve, reject) => process.stdout.write(line, (err) => (err ? reject(err) : resolve())));
}, { signal: stop.signal });
