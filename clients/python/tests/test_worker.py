"""End-to-end tests of the Worker against a real PostgreSQL through the real extension."""

import asyncio
import threading
import time

import pytest

from conftest import count_state, enqueue, states, wait_for
from queuebox_inbox import Database, Dead, QueueBoxError, Retry, RetryPolicy, Worker


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def seen_count(db, inbox_id):
    rows = await db.query("SELECT count(*)::int8 AS n FROM seen WHERE inbox_id = $1::uuid", [inbox_id])
    return int(rows[0]["n"])


def test_every_row_is_handled_exactly_once_and_ends_processed(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "once"
        ids = await enqueue(db, source, 60)
        seen = {}
        running = {"now": 0, "max": 0}

        async def handler(m, tx):
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
            seen[m.id] = seen.get(m.id, 0) + 1
            await asyncio.sleep(0.002)
            running["now"] -= 1

        stop = asyncio.Event()
        async with Worker(database_url, source, batch_size=10, concurrency=3, poll_interval=0.05) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _eq(count_state(db, source, "processed"), 60), 20, "60 processed")
            stop.set()
            await t
            assert w.stats().completed == 60
        assert sorted(seen) == sorted(ids)
        assert set(seen.values()) == {1}
        assert running["max"] <= 3
        for r in (await states(db, source)).values():
            assert (r["state"], r["attempt"], r["claim_token"]) == ("processed", 0, None)
        await db.close()

    run(go())


async def _eq(coro, value):
    return (await coro) == value


def test_two_workers_on_one_source_never_get_the_same_message(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "two-workers"
        ids = await enqueue(db, source, 80)
        seen = {}

        async def handler(m, tx):
            seen[m.id] = seen.get(m.id, 0) + 1
            await asyncio.sleep(0.001)

        stop = asyncio.Event()
        a = Worker(database_url, source, batch_size=7, concurrency=2, poll_interval=0.02)
        b = Worker(database_url, source, batch_size=7, concurrency=2, poll_interval=0.02)
        async with a, b:
            ts = [asyncio.ensure_future(w.run(handler, stop=stop)) for w in (a, b)]
            await wait_for(lambda: _eq(count_state(db, source, "processed"), 80), 20, "80 processed")
            stop.set()
            await asyncio.gather(*ts)
            assert a.stats().completed > 0 and b.stats().completed > 0
            assert a.stats().completed + b.stats().completed == 80
        assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}
        await db.close()

    run(go())


def test_a_renewal_that_finds_the_lease_lost_cancels_the_handler_and_completes_nothing(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "renew-lost"
        [rid] = await enqueue(db, source, 1)
        cancelled = []

        async def handler(m, tx):
            await db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [m.id])
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(m.id)
                raise
            await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'late')", [m.id])

        stop = asyncio.Event()
        w = Worker(database_url, source, lease=0.6, poll_interval=0.02)
        async with w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _true(bool(cancelled)), 10, "handler cancelled")
            stop.set()
            await t
            assert (w.stats().claims_lost, w.stats().completed) == (1, 0)
        assert (await states(db, source))[rid]["state"] == "processing"
        assert await seen_count(db, rid) == 0
        await db.close()

    run(go())


def test_the_handler_gets_every_field_of_the_message(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "fields"
        r = await db.enqueue(source, "order-1", {"total": 12.5, "items": [1, 2]}, aggregate_id="cust-7",
                             event_type="order.created", headers={"x-tenant": "acme"}, correlation_id="corr-1")
        got = []
        stop = asyncio.Event()

        async def handler(m, tx):
            got.append(m)
            stop.set()

        await Worker(database_url, source, poll_interval=0.05).run(handler, stop=stop)
        m = got[0]
        assert m.id == r["id"] and m.source == source and m.idempotency_key == "order-1"
        assert m.payload == {"total": 12.5, "items": [1, 2]}
        assert (m.aggregate_id, m.event_type, m.correlation_id, m.attempt) == ("cust-7", "order.created", "corr-1", 0)
        assert m.headers == {"x-tenant": "acme"}
        assert m.created_at.tzinfo is not None
        assert not hasattr(m, "claim_token")
        await db.close()

    run(go())


def test_a_raising_handler_is_retried_by_the_policy_and_dead_at_max_attempts(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "retry-dead"
        [rid] = await enqueue(db, source, 1)
        attempts = []

        async def handler(m, tx):
            attempts.append(m.attempt)
            raise ValueError(f"boom on attempt {m.attempt}")

        stop = asyncio.Event()
        w = Worker(database_url, source, poll_interval=0.02, retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02, jitter=0))
        t = asyncio.ensure_future(w.run(handler, stop=stop))
        await wait_for(lambda: _eq(count_state(db, source, "dead"), 1), 15, "dead")
        stop.set()
        await t
        assert attempts == [0, 1, 2]
        r = (await states(db, source))[rid]
        assert (r["attempt"], r["last_error"], r["claim_token"]) == (2, "boom on attempt 2", None)
        await db.close()

    run(go())


def test_retry_with_a_delay_and_dead_choose_the_outcome(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "outcomes"
        rid, did = await enqueue(db, source, 2)

        async def handler(m, tx):
            if m.id == rid:
                raise Retry("not yet", delay=60)
            raise Dead("poison message")

        async def both():
            st = await states(db, source)
            return st[rid]["attempt"] == 1 and st[did]["state"] == "dead"

        stop = asyncio.Event()
        t = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02).run(handler, stop=stop))
        await wait_for(both, 10, "retry and dead")
        stop.set()
        await t
        st = await states(db, source)
        assert (st[rid]["state"], st[rid]["in_future"], st[rid]["last_error"]) == ("pending", True, "not yet")
        assert (st[did]["last_error"], st[did]["attempt"]) == ("poison message", 0)
        await db.close()

    run(go())


def test_a_successful_business_write_commits_together_with_the_completion(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "tx-ok"
        [rid] = await enqueue(db, source, 1)

        async def handler(m, tx):
            assert await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, $2)", [m.id, "handled"]) == 1
            assert await tx.query("SELECT note FROM seen WHERE inbox_id = $1::uuid", [m.id]) == [{"note": "handled"}]

        stop = asyncio.Event()
        t = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02).run(handler, stop=stop))
        await wait_for(lambda: _eq(count_state(db, source, "processed"), 1), 10, "processed")
        stop.set()
        await t
        assert await db.query("SELECT note FROM seen WHERE inbox_id = $1::uuid", [rid]) == [{"note": "handled"}]
        await db.close()

    run(go())


def test_a_failed_business_write_leaves_nothing(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "tx-fail"
        [rid] = await enqueue(db, source, 1)
        caught = []

        async def handler(m, tx):
            await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'first write')", [m.id])
            try:
                await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, NULL)", [m.id])
            except QueueBoxError as e:
                caught.append(e)
                raise

        stop = asyncio.Event()
        t = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02, retry={"max_attempts": 0}).run(handler, stop=stop))
        await wait_for(lambda: _eq(count_state(db, source, "dead"), 1), 10, "dead")
        stop.set()
        await t
        assert len(caught) == 1 and caught[0].kind == "database"
        assert await seen_count(db, rid) == 0
        assert "null value" in (await states(db, source))[rid]["last_error"]
        await db.close()

    run(go())


def test_a_completion_whose_claim_was_stolen_rolls_back_and_marks_nothing(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "stolen"
        [rid] = await enqueue(db, source, 1)

        async def handler(m, tx):
            await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'stolen')", [m.id])
            await db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [m.id])

        stop = asyncio.Event()
        w = Worker(database_url, source, poll_interval=0.02)
        async with w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))

            async def lost():
                return w.stats().claims_lost == 1

            await wait_for(lost, 10, "claim lost")
            stop.set()
            await t
            assert w.stats().completed == 0
        assert (await states(db, source))[rid]["state"] == "processing"
        assert await seen_count(db, rid) == 0
        await db.close()

    run(go())


def test_a_handler_longer_than_the_lease_keeps_ownership_through_renewals(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "renew"
        await enqueue(db, source, 1)
        deliveries = []

        async def slow(m, tx):
            deliveries.append("slow")
            await asyncio.sleep(2)
            assert not tx.cancelled

        async def rival(m, tx):
            deliveries.append("rival")

        stop = asyncio.Event()
        t1 = asyncio.ensure_future(Worker(database_url, source, lease=0.6, poll_interval=0.02).run(slow, stop=stop))
        await wait_for(lambda: _true(bool(deliveries)), 10, "first delivery")
        t2 = asyncio.ensure_future(Worker(database_url, source, lease=0.6, poll_interval=0.02).run(rival, stop=stop))
        await wait_for(lambda: _eq(count_state(db, source, "processed"), 1), 10, "processed")
        stop.set()
        await asyncio.gather(t1, t2)
        assert deliveries == ["slow"]
        await db.close()

    run(go())


async def _true(v):
    return v


def test_graceful_shutdown_releases_buffered_rows_and_abandons_a_handler_outliving_the_grace(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "shutdown"
        await enqueue(db, source, 5)
        started, cancelled = [], []

        async def handler(m, tx):
            started.append(m.id)
            await tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'half done')", [m.id])
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(m.id)
                raise

        stop = asyncio.Event()
        w = Worker(database_url, source, batch_size=5, concurrency=1, lease=0.9, shutdown_grace=0.3, poll_interval=0.02)
        async with w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(lambda: _true(bool(started)), 10, "first delivery")
            stop.set()
            await t
            assert w.stats().released == 4
        assert cancelled == started
        st = await states(db, source)
        assert (st[started[0]]["state"], st[started[0]]["attempt"]) == ("processing", 0)
        others = [r for i, r in st.items() if i != started[0]]
        assert len(others) == 4
        assert all((r["state"], r["attempt"], r["claim_token"]) == ("pending", 0, None) for r in others)
        assert await seen_count(db, started[0]) == 0

        # The abandoned row is claimable by another worker once its lease has expired.
        again = []

        async def record(m, tx):
            again.append(m)

        stop2 = asyncio.Event()
        t2 = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02).run(record, stop=stop2))
        await wait_for(lambda: _eq(count_state(db, source, "processed"), 5), 10, "all 5 processed by the next worker")
        stop2.set()
        await t2
        redelivered = [m for m in again if m.id == started[0]]
        assert len(redelivered) == 1 and redelivered[0].attempt == 0
        await db.close()

    run(go())


def test_cancelling_run_shuts_down_gracefully_and_lets_a_handler_within_the_grace_complete(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "cancel-grace"
        await enqueue(db, source, 1)
        started = []

        async def handler(m, tx):
            started.append(m.id)
            await asyncio.sleep(0.3)

        t = asyncio.ensure_future(Worker(database_url, source, shutdown_grace=5, poll_interval=0.02).run(handler))
        await wait_for(lambda: _true(bool(started)), 10, "delivery")
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert await count_state(db, source, "processed") == 1
        await db.close()

    run(go())


def test_the_blocking_api_runs_plain_functions_on_threads_with_a_transaction(database_url):
    source = "blocking"

    async def setup():
        db = await Database.connect(database_url)
        ids = await enqueue(db, source, 8)
        await db.close()
        return ids

    ids = asyncio.run(setup())
    stop = threading.Event()
    handled = []
    threads = set()

    def handler(m, tx):
        threads.add(threading.get_ident())
        time.sleep(0.01)
        tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, 'blocking')", [m.id])
        handled.append(m.id)
        if len(handled) == 8:
            stop.set()

    Worker(database_url, source, concurrency=2, poll_interval=0.02).run_blocking(handler, stop=stop)
    assert sorted(handled) == sorted(ids)
    assert threading.get_ident() not in threads

    async def check():
        db = await Database.connect(database_url)
        assert await count_state(db, source, "processed") == 8
        rows = await db.query("SELECT count(*)::int8 AS n FROM seen WHERE note = 'blocking'")
        assert int(rows[0]["n"]) == 8
        await db.close()

    asyncio.run(check())


def test_a_missing_schema_raises_schema_missing(empty_database_url):
    async def go():
        async with Worker(empty_database_url, "s"):
            pass

    with pytest.raises(QueueBoxError) as e:
        asyncio.run(go())
    assert e.value.kind == "schema_missing"
