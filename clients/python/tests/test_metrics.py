"""A worker's metrics after it handled real rows: the native core counts and encodes them,
Worker.metrics() passes the Prometheus text on."""

import asyncio

from conftest import count_state, enqueue, wait_for
from queuebox_inbox import Database, Worker


def test_metrics_count_the_rows_the_handler_completed(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "metered"
        await enqueue(db, source, 3)

        async def handler(m, tx):
            pass

        stop = asyncio.Event()
        async with Worker(database_url, source, poll_interval=0.05) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))

            async def processed():
                return await count_state(db, source, "processed") == 3

            await wait_for(processed, 20, "3 processed")
            stop.set()
            await t
            text = w.metrics()
        for line in (
            'queuebox_worker_completed_total{source="metered"} 3\n',
            'queuebox_worker_claimed_total{source="metered"} 3\n',
            'queuebox_worker_handler_duration_seconds_count{source="metered"} 3\n',
            "# TYPE queuebox_worker_handler_duration_seconds histogram\n",
        ):
            assert line in text, f"{line!r} in\n{text}"
        await db.close()

    asyncio.run(asyncio.wait_for(go(), 60))
