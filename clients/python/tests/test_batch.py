"""The batch crossing against a real PostgreSQL: tasks handed out and completed in
batches keep each task's fence and the shutdown rules, and every row is handled once."""

import asyncio
import json

import pytest

from conftest import count_state, enqueue, states, wait_for
from queuebox_inbox import Database, Worker, _native


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _eq(coro, value):
    return (await coro) == value


def test_next_batch_hands_out_tasks_in_message_order_and_a_claim_lost_in_complete_all_fails_only_that_task(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "lost-in-batch"
        await enqueue(db, source, 8)
        w = await _native.connect_worker(database_url, json.dumps({"source": source, "batchSize": 8, "concurrency": 8, "pollIntervalMs": 20}))
        try:
            first, messages_json, _ = await w.next_batch(8)
            tasks, messages = list(first), json.loads(messages_json)
            while len(tasks) < 8:
                more, more_json, _ = await w.next_batch(8 - len(tasks))
                tasks += more
                messages += json.loads(more_json)
            assert len(first) > 1, f"one crossing handed out {len(first)} task(s)"
            assert [json.loads(t.message_json())["id"] for t in tasks] == [m["id"] for m in messages]
            stolen = messages[3]["id"]
            await db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [stolen])

            results = await w.complete_all(tasks)
            assert len(results) == 8
            assert results[3] is not None and results[3][0] == "claim_lost"
            assert [r for i, r in enumerate(results) if i != 3] == [None] * 7
            st = await states(db, source)
            assert st[stolen]["state"] == "processing"
            assert sum(r["state"] == "processed" for r in st.values()) == 7
            stats = json.loads(w.stats_json())
            assert (stats["completed"], stats["claimsLost"]) == (7, 1)
            # A task of a batch is finished once: completing it again says so.
            assert (await w.complete_all([tasks[0]]))[0][0] == "already_finished"
        finally:
            await w.shutdown()
        await db.close()

    run(go())


def test_shutdown_with_part_of_a_batch_out_completes_the_running_and_releases_the_rest(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "partial-batch"
        ids = await enqueue(db, source, 10)
        seen = {}
        gate = asyncio.Event()

        async def handler(m, tx):
            seen[m.id] = seen.get(m.id, 0) + 1
            await gate.wait()

        stop = asyncio.Event()
        async with Worker(database_url, source, batch_size=10, concurrency=4, shutdown_grace=10, poll_interval=0.02) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _eq(asyncio.sleep(0, len(seen)), 4), 10, "4 handlers running")
            stop.set()  # shutdown: the 6 claimed rows not handed out are released now
            await wait_for(lambda: _eq(count_state(db, source, "pending"), 6), 10, "6 released")
            gate.set()  # the 4 running handlers finish within the grace
            await t
            assert (w.stats().released, w.stats().completed) == (6, 4)
        assert await count_state(db, source, "processed") == 4
        assert all(r["attempt"] == 0 for r in (await states(db, source)).values())

        # A second worker takes the released rows: every row handled once in all.
        stop2 = asyncio.Event()
        t2 = asyncio.ensure_future(Worker(database_url, source, batch_size=10, concurrency=4, poll_interval=0.02).run(handler, stop=stop2))
        await wait_for(lambda: _eq(count_state(db, source, "processed"), 10), 10, "10 processed")
        stop2.set()
        await t2
        assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}
        await db.close()

    run(go())


@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_two_workers_at_any_concurrency_handle_every_row_once(database_url, concurrency):
    async def go():
        db = await Database.connect(database_url)
        source = f"each-once-{concurrency}"
        n = 400
        ids = await enqueue(db, source, n)
        seen = {}

        def handler(m, tx):  # a plain function: run() calls it in the loop
            seen[m.id] = seen.get(m.id, 0) + 1

        stop = asyncio.Event()
        workers = [Worker(database_url, source, batch_size=40, concurrency=concurrency, poll_interval=0.02) for _ in range(2)]
        runs = [asyncio.ensure_future(w.run(handler, stop=stop)) for w in workers]
        await wait_for(lambda: _eq(count_state(db, source, "processed"), n), 30, f"{n} processed")
        stop.set()
        await asyncio.gather(*runs)
        assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}
        await db.close()

    run(go())


class _CountingNative:
    """The worker's native object with its complete_all calls counted (a pyclass instance
    takes no new attributes, so the worker is handed this stand-in after connect)."""

    def __init__(self, native):
        self._native = native
        self.complete_all_calls = []

    def complete_all(self, tasks):
        self.complete_all_calls.append(len(tasks))
        return self._native.complete_all(tasks)

    def __getattr__(self, name):
        return getattr(self._native, name)


def test_at_concurrency_one_successes_share_complete_all_calls_instead_of_one_per_row(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "shared-completions"
        n = 60
        await enqueue(db, source, n)

        async def handler(m, tx):
            return None

        stop = asyncio.Event()
        w = Worker(database_url, source, batch_size=60, concurrency=1, poll_interval=0.02)
        await w.connect()
        counting = _CountingNative(w._native)
        w._native = counting
        runs = asyncio.ensure_future(w.run(handler, stop=stop))
        await wait_for(lambda: _eq(count_state(db, source, "processed"), n), 30, f"{n} processed")
        stop.set()
        await runs
        calls = counting.complete_all_calls
        assert sum(calls) == n
        # One handler per event-loop turn: before the rows waited for each other, every row
        # was its own call. Now a call carries up to min(16, batch / 2) of them (or what
        # finished within the hold); slow turns on a loaded machine may send some early.
        assert len(calls) <= n // 4, f"{len(calls)} complete_all calls for {n} rows: {calls}"
        await db.close()

    run(go())


def test_renewal_beside_batched_completions_never_deadlocks_or_handles_a_row_twice(database_url, caplog):
    """A drain long enough for dozens of renewal rounds (lease 900 ms: one every 300 ms)
    while successes wait in the client and go back in batches. Renewal and the batched
    completion used to run side by side on overlapping rows; PostgreSQL aborted one as a
    deadlock and the aborted completion's rows came back after their lease (3 drains in 10
    failed so). The core now runs them one at a time per worker (Inner::row_writes)."""
    rows = 20000

    async def go():
        db = await Database.connect(database_url)
        source = "renew-beside-complete"
        await db.execute(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption) "
            "SELECT $1, 'k' || g, '{}'::jsonb, 'pull' FROM generate_series(1, $2::int) g",
            [source, rows],
        )
        # Fresh statistics, as the benchmarks take, so the drain's pace depends on renewal and
        # completion alone (claims on stale statistics were slow before d4629ed).
        await db.execute("ANALYZE inbox", [])
        seen = {}
        stop = asyncio.Event()

        async def handler(message, tx):
            seen[message.id] = seen.get(message.id, 0) + 1
            if len(seen) == rows:
                stop.set()

        async with Worker(database_url, source, concurrency=1, lease=0.9, poll_interval=0.02) as w:
            await w.run(handler, stop=stop)
            stats = w.stats()
        await wait_for(lambda: _eq(count_state(db, source, "processed"), rows), 15, "every row processed")
        return seen, stats

    with caplog.at_level("WARNING"):
        seen, stats = run(go())
    deadlocks = [r.getMessage() for r in caplog.records if "deadlock" in str(r.__dict__)]
    assert deadlocks == [], deadlocks[:3]
    assert (len(seen), sum(seen.values()), stats.claims_lost) == (rows, rows, 0)
