"""The client contract (proto-docs/client-contract.md, 19 items) that test_worker.py does not
already cover. Where the others are: 1-10 and 12 in test_worker.py; the application-owned
transaction's 2, 3, 4 in test_app_tx.py; 14 (the README examples run) in test_readme.py;
15 (no password in errors) in test_options_and_vectors.py; 13 (mapped table/column names) in
test_names.py. Not here: 19 (SQL Server's Msg 51000: no SQL Server in this suite; the core's
core/tests/client_contract.rs covers it, with PostgreSQL raising 51000)."""

import asyncio
import time

from conftest import ADMIN_URL, _create, _drop, enqueue, states, url_for, wait_for
from queuebox_inbox import Database, Dead, Retry, Worker


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _true(v):
    return v


def test_item_11_stale_tokens_change_nothing(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "stale"
        ids = await enqueue(db, source, 3)

        def token(m):
            return f"00000000-0000-0000-0000-00000000000{m.idempotency_key[1:]}"

        async def handler(m, tx):
            # Another worker took the claim over: the worker's token no longer matches.
            await db.execute("UPDATE inbox SET claim_token = $1::uuid WHERE id = $2::uuid", [token(m), m.id])
            if m.idempotency_key == "k1":
                raise Retry("retry with a stale token", delay=60)
            if m.idempotency_key == "k2":
                raise Dead("dead with a stale token")
            # k0: complete

        stop = asyncio.Event()
        async with Worker(database_url, source, poll_interval=0.02) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _true(w.stats().claims_lost == 3), 10, "three lost claims")
            stop.set()
            await t
            s = w.stats()
            assert (s.completed, s.retried, s.dead) == (0, 0, 0), "fenced-out outcomes do not count"
        st = await states(db, source)
        for i, rid in enumerate(ids):
            r = st[rid]
            assert (r["state"], r["attempt"], r["last_error"], r["claim_token"]) == ("processing", 0, None, f"00000000-0000-0000-0000-00000000000{i}")
        await db.close()

    run(go())


def test_item_16_no_polling_storm_on_an_empty_table():
    name = f"qb_py_idle_{int(time.time() * 1000) % 10**9}"
    asyncio.run(_create(name, schema=True))

    async def go():
        admin = await Database.connect(ADMIN_URL, max_connections=1)

        async def commits():
            await asyncio.sleep(1.1)  # live backends flush their counters at most once a second
            rows = await admin.query("SELECT xact_commit::int8 AS n FROM pg_stat_database WHERE datname = $1", [name])
            return int(rows[0]["n"])

        before = await commits()
        stop = asyncio.Event()
        async with Worker(url_for(name), "idle", poll_interval=0.2) as w:
            t = asyncio.ensure_future(w.run(lambda m, tx: None, stop=stop))
            await asyncio.sleep(3)
            stop.set()
            await t
        n = await commits() - before
        await admin.close()
        return n

    try:
        n = run(go())
    finally:
        asyncio.run(_drop(name))
    # 3 s / 200 ms = 15 claims plus the connection checks; a storm makes thousands.
    print(f"{n} transactions in 3 s with a 200 ms poll interval")
    assert 5 <= n <= 60, n


def test_item_17_never_more_than_a_batch_in_flight(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "batch"
        await enqueue(db, source, 15)
        running = {"now": 0, "max": 0, "held": 0}
        sampling = True

        async def sample():
            while sampling:
                rows = await db.query("SELECT count(*)::int8 AS n FROM inbox WHERE source = $1 AND state = 'processing'", [source])
                running["held"] = max(running["held"], int(rows[0]["n"]))

        async def handler(m, tx):
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
            await asyncio.sleep(0.04)
            running["now"] -= 1

        sampler = asyncio.ensure_future(sample())
        stop = asyncio.Event()
        async with Worker(database_url, source, batch_size=3, concurrency=3, poll_interval=0.02) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _true(w.stats().completed == 15), 15, "15 completed")
            stop.set()
            await t
        sampling = False
        await sampler
        await db.close()
        assert running["max"] == 3, "a full batch runs at once, never more"
        assert 1 <= running["held"] <= 3, running["held"]

    run(go())


def test_item_18_one_message_per_aggregate_in_flight_across_two_workers(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "aggregates"
        for n in range(1, 13):
            await db.enqueue(source, f"k{n}", {"n": n}, aggregate_id="a" if n % 2 == 0 else "b")
        in_flight = {"a": 0, "b": 0}
        order = {"a": [], "b": []}
        seen = {"overlapped": False, "violation": None}

        async def handler(m, tx):
            agg = m.aggregate_id
            in_flight[agg] += 1
            if in_flight[agg] > 1:
                seen["violation"] = f"two messages of aggregate {agg} in flight"
            if in_flight["a"] > 0 and in_flight["b"] > 0:
                seen["overlapped"] = True
            order[agg].append(m.payload["n"])
            await asyncio.sleep(0.04)
            in_flight[agg] -= 1

        stop = asyncio.Event()
        a = Worker(database_url, source, batch_size=4, concurrency=2, poll_interval=0.02)
        b = Worker(database_url, source, batch_size=4, concurrency=2, poll_interval=0.02)
        async with a, b:
            ts = [asyncio.ensure_future(w.run(handler, stop=stop)) for w in (a, b)]
            await wait_for(lambda: _true(a.stats().completed + b.stats().completed == 12), 20, "12 completed")
            stop.set()
            await asyncio.gather(*ts)
        await db.close()
        assert seen["violation"] is None
        assert seen["overlapped"], "different aggregates ran at the same time"
        assert order == {"a": [2, 4, 6, 8, 10, 12], "b": [1, 3, 5, 7, 9, 11]}, "each aggregate in arrival order"

    run(go())
