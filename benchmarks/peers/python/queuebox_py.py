"""QueueBox Python wrapper adapter of benchmarks/peers/run.sh (clients/python over its native
extension, a release build): Worker.run with a no-op async handler, default options but
concurrency, so the batch is the users' default (the core's hand-out batch); QB_BATCH sets an
explicit batch_size (harness.py's queuebox-py-b* systems: the Rust worker's options).
Same CLI as the other adapters (see ../harness.py), drain and enqueue only:
    drain URL N CONC | enqueue URL N
The worker connects on `async with` (Worker.connect), before the drain's clock starts. Rows are
inserted with plain SQL through psql (QueueBox's inbox is written by the relay or by the
application's own INSERT)."""
import asyncio
import json
import os
import subprocess
import sys
import time

from queuebox_inbox import Worker, migrate

INSERT = """INSERT INTO inbox (source, idempotency_key, payload, consumption)
SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, {n}) g"""


async def main(mode, url, args):
    await migrate(url)
    if mode == "enqueue":
        subprocess.run(["psql", url, "-X", "-q", "-c", INSERT.format(n=int(args[0]))], check=True)
        return
    if mode != "drain":
        raise SystemExit(f"queuebox-py: mode {mode} not supported (drain, enqueue)")
    n, conc = int(args[0]), int(args[1])
    if not os.environ.get("PEERS_PREENQUEUED"):
        subprocess.run(["psql", url, "-X", "-q", "-c", INSERT.format(n=n)], check=True)
    batch = int(os.environ["QB_BATCH"]) if os.environ.get("QB_BATCH") else None
    stop = asyncio.Event()
    state = {"done": 0, "t1": None}

    async def handler(message, tx):
        state["done"] += 1
        if state["done"] == n:
            state["t1"] = time.perf_counter()
            stop.set()

    async with Worker(url, "bench", batch_size=batch, concurrency=conc) as w:
        t0 = time.perf_counter()
        await w.run(handler, stop=stop)
        secs = state["t1"] - t0
        print(json.dumps({"rows_per_s": n / secs, "seconds": secs, "handled": state["done"],
                          "batch": w.options.batch_size}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
