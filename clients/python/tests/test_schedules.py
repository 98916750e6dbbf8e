"""Schedules in a Python worker's options: two workers run the same 200 ms schedule and
claim its rows; every tick is one row, handled once, none missing. A bad schedule is
refused naming its field in Python's words."""

import asyncio
from datetime import datetime

import pytest

from conftest import wait_for
from queuebox_inbox import ConfigError, Database, Worker


def test_two_workers_enqueue_each_tick_of_a_shared_schedule_once(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "py-ticks"
        schedule = {"name": "py-tick", "source": source, "every": 0.2, "payload": {"from": "python"}}
        keys = []

        async def handler(m, tx):
            keys.append(m.idempotency_key)

        stop = asyncio.Event()
        a = Worker(database_url, source, poll_interval=0.05, schedules=[schedule])
        b = Worker(database_url, source, poll_interval=0.05, schedules=[schedule])
        async with a, b:
            ts = [asyncio.ensure_future(w.run(handler, stop=stop)) for w in (a, b)]

            async def enough():
                return len(keys) >= 10

            await wait_for(enough, 30, "10 handled ticks")
            stop.set()
            await asyncio.gather(*ts)
        assert len(set(keys)) == len(keys), f"a row was handled twice: {keys}"
        rows = await db.query("SELECT idempotency_key FROM inbox WHERE source = $1", [source])
        ticks = sorted(
            datetime.fromisoformat(r["idempotency_key"].removeprefix("schedule:py-tick:").replace("Z", "+00:00"))
            for r in rows
        )
        ms = [int(t.timestamp() * 1000) for t in ticks]
        assert all(m % 200 == 0 for m in ms), ms
        assert (ms[-1] - ms[0]) // 200 + 1 == len(ms), f"ticks missing or doubled: {ms}"
        await db.close()

    asyncio.run(go())


def test_a_bad_schedule_is_refused_naming_its_field():
    with pytest.raises(ConfigError, match=r"schedules\[1\]\.time_zone"):
        Worker("postgres://x/y", "s", schedules=[
            {"name": "a", "source": "s", "every": 1, "payload": 1},
            {"name": "b", "source": "s", "cron": "0 9 * * *", "time_zone": "Mars/Olympus", "payload": 1},
        ])
    with pytest.raises(ConfigError, match=r"schedules\[0\]\.every"):
        Worker("postgres://x/y", "s", schedules=[{"name": "a", "source": "s", "every": 0.01, "payload": 1}])
