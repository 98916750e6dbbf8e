"""The prometheus_client collector: two real workers' core metrics, scraped
through the application's own registry next to its own metric."""

import asyncio
import secrets

from prometheus_client import CollectorRegistry, Counter, generate_latest

from conftest import count_state, enqueue, wait_for
from queuebox_inbox import Database, Worker
from queuebox_inbox.prometheus import QueueBoxCollector


def test_the_collector_serves_every_workers_metrics_in_the_apps_registry(database_url):
    registry = CollectorRegistry()
    Counter("app_orders", "the application's own metric", registry=registry).inc()
    sources = [f"prom_a_{secrets.token_hex(2)}", f"prom_b_{secrets.token_hex(2)}"]
    workers = [Worker(database_url, s, poll_interval=0.02) for s in sources]
    collector = QueueBoxCollector(workers[0], registry=registry)
    collector.add(workers[1])
    assert registry.get_sample_value("queuebox_worker_completed_total", {"source": sources[0]}) is None, "nothing before the workers run"

    async def go():
        db = await Database.connect(database_url)
        for n, s in zip((3, 2), sources):
            await enqueue(db, s, n)
        stop = asyncio.Event()

        async def noop(m, tx):
            pass

        async with workers[0], workers[1]:
            runs = [asyncio.ensure_future(w.run(noop, stop=stop)) for w in workers]

            async def done():
                return await count_state(db, sources[0], "processed") == 3 and await count_state(db, sources[1], "processed") == 2

            await wait_for(done, 20, "both sources processed")
            stop.set()
            await asyncio.gather(*runs)
            got = {s: registry.get_sample_value("queuebox_worker_completed_total", {"source": s}) for s in sources}
            hist = registry.get_sample_value("queuebox_worker_handler_duration_seconds_count", {"source": sources[0]})
            text = generate_latest(registry).decode()
        await db.close()
        return got, hist, text

    got, hist, text = asyncio.run(asyncio.wait_for(go(), 60))
    assert got == {sources[0]: 3.0, sources[1]: 2.0}
    assert hist == 3.0
    assert "app_orders_total 1.0" in text and "# TYPE queuebox_worker_handler_duration_seconds histogram" in text
