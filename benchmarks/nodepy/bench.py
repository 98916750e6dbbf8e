"""Python client side of benchmarks/nodepy_bench.sh: Worker.run with a no-op async handler
over `rows` pull rows of `source`, timed from run() until every row is processed.
Usage: python bench.py <database url> <source> <rows> <batch> <concurrency>
(batch 0: unset, the core's adaptive batch).
Prints one line: `rows_per_sec=<n> seconds=<s>`."""

import asyncio
import sys
import time

from queuebox_inbox import Worker


async def main(url: str, source: str, rows: int, batch: int, conc: int) -> None:
    async def noop(message, tx):
        return None

    stop = asyncio.Event()
    async with Worker(url, source, batch_size=batch or None, concurrency=conc, poll_interval=0.05) as w:
        started = time.perf_counter()

        async def watch():
            while w.stats().completed < rows:
                await asyncio.sleep(0.005)
            stop.set()

        watcher = asyncio.ensure_future(watch())
        await w.run(noop, stop=stop)
        secs = time.perf_counter() - started
        watcher.cancel()
    print(f"rows_per_sec={rows / secs:.1f} seconds={secs:.3f}")


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], a[1], int(a[2]), int(a[3]), int(a[4])))
