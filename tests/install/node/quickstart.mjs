// clients/typescript's README quick start, run in an empty npm project that installed
// @alternayte/queuebox-inbox (tests/install/node/run.sh):
//   node quickstart.mjs migrate URL   applies the schema
//   node quickstart.mjs work URL      handles one row of source "orders", then stops
import { createRequire } from "node:module";
import { Worker, Retry, migrate } from "@alternayte/queuebox-inbox";

const [mode, url] = process.argv.slice(2);
const require = createRequire(import.meta.url);
console.log("addon package:", require.resolve("@alternayte/queuebox-inbox-linux-x64-gnu"));
if (mode === "migrate") {
  console.log("migrated:", await migrate(url));
} else {
  const worker = new Worker({ databaseUrl: url, source: "orders", concurrency: 4 });
  const stop = new AbortController();
  const timeout = setTimeout(() => stop.abort(), 60_000);
  let handled = 0;
  await worker.run(async (message, tx, signal) => {
    if (signal.aborted) throw new Retry("shutting down");
    // Same transaction as the completion: both commit, or neither does.
    await tx.execute("INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)", [message.id, message.payload.total]);
    handled += 1;
    setTimeout(() => stop.abort(), 200); // one row is the whole test: then a graceful stop
  }, { signal: stop.signal });
  clearTimeout(timeout);
  if (handled !== 1) throw new Error(`handled ${handled} rows, expected 1`);
}
