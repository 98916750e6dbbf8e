"""The application's own transaction: complete_in / publish / publish_many on the
drivers users run — psycopg 3 (Connection, AsyncConnection) and SQLAlchemy 2 (Session,
AsyncSession on psycopg and on asyncpg) — against a real PostgreSQL through the real extension. Every behaviour runs
once per driver; the blocking worker gets its own test with the blocking drivers."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, List

import psycopg
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from conftest import url_for  # noqa: F401  (the same server the suite uses)
from queuebox_inbox import (
    ClaimLost,
    InvalidInput,
    OutboxMessage,
    Worker,
    complete_in,
    publish,
    publish_many,
)


async def maybe(v: Any) -> Any:
    """The driver's result: awaited for an asyncio driver, as is for a blocking one."""
    return await v if inspect.isawaitable(v) else v


def alchemy_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


class Psycopg:
    name = "psycopg"

    def __init__(self, url: str) -> None:
        self.url = url

    async def in_tx(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        with psycopg.connect(self.url) as conn, conn.transaction():
            return await body(conn)

    def insert(self, db: Any, inbox_id: str, note: str) -> Any:
        return db.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, %s)", (inbox_id, note))

    async def close(self) -> None:
        pass


class PsycopgAsync(Psycopg):
    name = "psycopg-async"

    async def in_tx(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        async with await psycopg.AsyncConnection.connect(self.url) as conn:
            async with conn.transaction():
                return await body(conn)


class Alchemy:
    name = "sqlalchemy"

    def __init__(self, url: str) -> None:
        self.engine = create_engine(alchemy_url(url), pool_size=2)

    async def in_tx(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        with Session(self.engine) as session, session.begin():
            return await body(session)

    def insert(self, db: Any, inbox_id: str, note: str) -> Any:
        return db.execute(text("INSERT INTO orders_seen (inbox_id, note) VALUES (CAST(:id AS uuid), :note)"), {"id": inbox_id, "note": note})

    async def close(self) -> None:
        self.engine.dispose()


class AlchemyAsync(Alchemy):
    name = "sqlalchemy-async"

    def __init__(self, url: str) -> None:
        self.engine = create_async_engine(alchemy_url(url), pool_size=2)

    async def in_tx(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        async with AsyncSession(self.engine) as session:
            async with session.begin():
                return await body(session)

    async def close(self) -> None:
        await self.engine.dispose()


class AlchemyAsyncpg(AlchemyAsync):
    """AsyncSession on asyncpg, the other asyncio driver SQLAlchemy users pick."""

    name = "sqlalchemy-asyncpg"

    def __init__(self, url: str) -> None:
        self.engine = create_async_engine("postgresql+asyncpg://" + url.split("://", 1)[1], pool_size=2)


DRIVERS = [Psycopg, PsycopgAsync, Alchemy, AlchemyAsync, AlchemyAsyncpg]
ids = [d.name for d in DRIVERS]


@pytest.fixture(scope="module")
def url(database_url: str) -> str:
    with psycopg.connect(database_url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS orders_seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)")
    return database_url


def q(url: str, sql: str, *params: Any) -> List[Any]:
    """Rows of one statement on a connection of its own (the checks of the tests)."""
    with psycopg.connect(url, autocommit=True) as c:
        cur = c.execute(sql, params)
        return cur.fetchall() if cur.description else []


def enqueue(url: str, source: str, n: int = 1) -> List[str]:
    return [
        str(q(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES (%s, %s, '{}', 'pull') RETURNING id", source, f"k{i}")[0][0])
        for i in range(n)
    ]


def row(url: str, inbox_id: str) -> Any:
    return q(url, "SELECT state, attempt, last_error, claim_token FROM inbox WHERE id = %s::uuid", inbox_id)[0]


def notes(url: str, inbox_id: str) -> List[str]:
    return [r[0] for r in q(url, "SELECT note FROM orders_seen WHERE inbox_id = %s::uuid", inbox_id)]


def processed(url: str, source: str) -> int:
    return q(url, "SELECT count(*) FROM inbox WHERE source = %s AND state = 'processed'", source)[0][0]


async def run_until(url: str, source: str, handler: Any, until: Callable[[], bool], timeout: float = 15, **opts: Any) -> Any:
    """Runs a worker on ``source`` until ``until()``; returns its stats."""
    stop = asyncio.Event()
    async with Worker(url, source, poll_interval=0.02, **opts) as w:
        t = asyncio.ensure_future(w.run(handler, stop=stop))
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "timed out"
            assert not t.done(), f"the worker stopped: {t.exception()}"
            await asyncio.sleep(0.02)
        stop.set()
        await t
        return w.stats()


def go(driver_class: Any, url: str, test: Callable[[Any], Awaitable[None]]) -> None:
    async def main() -> None:
        d = driver_class(url)
        try:
            await test(d)
        finally:
            await d.close()

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_complete_in_commits_the_business_write_and_the_completion_together(driver, url):
    source = f"{driver.name}-ok"
    [rid] = enqueue(url, source)

    async def test(d):
        async def handler(m, tx):
            async def body(db):
                await maybe(d.insert(db, m.id, "handled"))
                await maybe(complete_in(db, m))

            await d.in_tx(body)

        await run_until(url, source, handler, lambda: processed(url, source) == 1)

    go(driver, url, test)
    assert row(url, rid) == ("processed", 0, None, None)
    assert notes(url, rid) == ["handled"]


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_complete_in_runs_once_per_transaction_a_second_call_is_refused_and_the_first_commits(driver, url):
    source = f"{driver.name}-twice"
    [rid] = enqueue(url, source)
    second = []

    async def test(d):
        async def handler(m, tx):
            async def body(db):
                await maybe(d.insert(db, m.id, "once"))
                await maybe(complete_in(db, m))
                with pytest.raises(InvalidInput, match="runs once per transaction") as e:
                    await maybe(complete_in(db, m))
                second.append(e.value)

            await d.in_tx(body)

        stats = await run_until(url, source, handler, lambda: processed(url, source) == 1)
        assert stats.claims_lost == 0, "no lost claim was reported"

    go(driver, url, test)
    assert len(second) == 1
    assert notes(url, rid) == ["once"]


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_after_a_rolled_back_transaction_the_handler_can_complete_in_a_new_one(driver, url):
    source = f"{driver.name}-again"
    [rid] = enqueue(url, source)

    async def test(d):
        async def handler(m, tx):
            # The application's own retry of a transaction (a serialization failure, say).
            async def first(db):
                await maybe(d.insert(db, m.id, "first try"))
                await maybe(complete_in(db, m))
                raise RuntimeError("serialization failure")

            async def second(db):
                await maybe(d.insert(db, m.id, "second try"))
                await maybe(complete_in(db, m))

            with pytest.raises(RuntimeError):
                await d.in_tx(first)
            await d.in_tx(second)

        await run_until(url, source, handler, lambda: processed(url, source) == 1)

    go(driver, url, test)
    assert notes(url, rid) == ["second try"]
    assert row(url, rid)[:2] == ("processed", 0)


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_a_handler_error_after_complete_in_rolls_both_back_and_the_row_is_retried(driver, url):
    source = f"{driver.name}-retry"
    [rid] = enqueue(url, source)
    attempts = []

    async def test(d):
        async def handler(m, tx):
            async def body(db):
                attempts.append(m.attempt)
                await maybe(d.insert(db, m.id, f"attempt {m.attempt}"))
                await maybe(complete_in(db, m))
                if m.attempt == 0:
                    raise RuntimeError("boom after complete_in")

            await d.in_tx(body)

        retry = {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.05, "jitter": 0}
        await run_until(url, source, handler, lambda: processed(url, source) == 1, retry=retry)

    go(driver, url, test)
    assert attempts == [0, 1], "the failed delivery was retried once"
    assert row(url, rid) == ("processed", 1, "boom after complete_in", None)
    assert notes(url, rid) == ["attempt 1"], "the first attempt's write rolled back"


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_a_lost_lease_raises_claim_lost_and_the_business_write_disappears(driver, url):
    source = f"{driver.name}-lost"
    [rid] = enqueue(url, source)
    caught = []
    rival_saw = []

    async def test(d):
        async def rival_handler(m, tx):
            rival_saw.append(m.id)

        async def handler(m, tx):
            async def body(db):
                await maybe(d.insert(db, m.id, "lost"))
                # The lease runs out and another worker takes the row and completes it.
                q(url, "UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = %s::uuid", m.id)
                await run_until(url, source, rival_handler, lambda: processed(url, source) == 1)
                await maybe(complete_in(db, m))

            try:
                await d.in_tx(body)
            except Exception as e:
                caught.append(e)
                raise

        stats = await run_until(url, source, handler, lambda: bool(caught))
        assert stats.completed == 0
        assert stats.claims_lost == 1, "the lost claim is counted once (the failing handler's retry is not)"

    go(driver, url, test)
    assert len(caught) == 1 and isinstance(caught[0], ClaimLost), caught
    assert caught[0].kind == "claim_lost" and rid in str(caught[0])
    assert rival_saw == [rid]
    assert notes(url, rid) == [], "the business write rolled back"
    assert row(url, rid)[:2] == ("processed", 0), "the rival's completion, no attempt spent"


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_a_renewal_that_finds_the_lease_lost_cancels_the_handler_and_its_transaction_rolls_back(driver, url):
    source = f"{driver.name}-renew-lost"
    [rid] = enqueue(url, source)
    cancelled = []

    async def test(d):
        async def handler(m, tx):
            async def body(db):
                await maybe(d.insert(db, m.id, "too late"))
                q(url, "UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = %s::uuid", m.id)
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.append(m.id)
                    raise
                await maybe(complete_in(db, m))

            await d.in_tx(body)

        stats = await run_until(url, source, handler, lambda: bool(cancelled), lease=0.6)
        assert (stats.completed, stats.claims_lost) == (0, 1)

    go(driver, url, test)
    assert cancelled == [rid]
    assert notes(url, rid) == [], "the business write rolled back"
    assert row(url, rid)[:2] == ("processing", 0), "abandoned, not completed"


def test_shutdown_cancels_a_handler_in_its_own_transaction_after_the_grace_and_its_write_rolls_back(url):
    source = "shutdown-app-tx"
    [rid] = enqueue(url, source)
    started, cancelled = [], []

    async def handler(m, tx):
        async with await psycopg.AsyncConnection.connect(url) as conn:
            async with conn.transaction():
                await conn.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, 'half done')", (m.id,))
                started.append(m.id)
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.append(m.id)
                    raise
                await complete_in(conn, m)

    async def main():
        stop = asyncio.Event()
        async with Worker(url, source, shutdown_grace=0.3, poll_interval=0.02) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            while not started:
                await asyncio.sleep(0.02)
            stop.set()
            await t

    asyncio.run(asyncio.wait_for(main(), 60))
    assert cancelled == [rid]
    assert notes(url, rid) == [], "the half-done write rolled back"
    assert row(url, rid)[:2] == ("processing", 0), "abandoned: no completion, no attempt spent"


def test_a_blocking_handler_whose_lease_was_lost_is_refused_by_complete_in(url):
    source = "blocking-renew-lost"
    [rid] = enqueue(url, source)
    refused = []
    stop = threading.Event()

    def handler(m, tx):
        with psycopg.connect(url) as conn, conn.transaction():
            conn.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, 'too late')", (m.id,))
            q(url, "UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = %s::uuid", m.id)
            while not tx.cancelled:
                time.sleep(0.02)
            try:
                complete_in(conn, m)
            except Exception as e:
                refused.append(e)
                stop.set()
                raise

    Worker(url, source, lease=0.6, poll_interval=0.02).run_blocking(handler, stop=stop)
    # Cancelled, or AlreadyFinished once the worker has abandoned the task: either way refused.
    assert len(refused) == 1 and refused[0].kind in ("cancelled", "already_finished"), refused
    assert notes(url, rid) == [], "the business write rolled back"
    assert row(url, rid)[:2] == ("processing", 0), "abandoned, not completed"


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_a_rolled_back_publish_leaves_no_row(driver, url):
    published = []

    async def test(d):
        async def body(db):
            published.append(await maybe(publish(db, f"{driver.name}.rolled-back", {"n": 1})))
            raise RuntimeError("business rule says no")

        with pytest.raises(RuntimeError, match="business rule says no"):
            await d.in_tx(body)

    go(driver, url, test)
    assert len(published[0]) == 36
    assert q(url, "SELECT count(*) FROM outbox WHERE id = %s::uuid", published[0]) == [(0,)]


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_a_committed_publish_is_a_pending_row_with_the_returned_id_and_the_options_given(driver, url):
    topic = f"{driver.name}.orders.created"
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    got = {}

    async def test(d):
        async def body(db):
            got["one"] = await maybe(
                publish(
                    db,
                    topic,
                    {"total": 12.5, "items": [1, 2]},
                    key="order-7",
                    headers={"x-tenant": "acme"},
                    aggregate_type="order",
                    max_attempts=9,
                    delay=timedelta(minutes=1),
                )
            )
            got["many"] = await maybe(publish_many(db, [OutboxMessage(topic, "plain", scheduled_at=at), {"topic": topic, "payload": [1]}]))

        await d.in_tx(body)

    go(driver, url, test)
    sql = (
        "SELECT topic, key, aggregate_type, payload, headers, max_attempts, state, attempt,"
        " scheduled_at > now() + interval '50 seconds' FROM outbox WHERE id = %s::uuid"
    )
    assert q(url, sql, got["one"]) == [(topic, "order-7", "order", {"total": 12.5, "items": [1, 2]}, {"x-tenant": "acme"}, 9, "pending", 0, True)]
    a, b = got["many"]
    assert q(url, sql, a)[0][3:] == ("plain", {}, 5, "pending", 0, True)
    assert q(url, sql, b)[0][3:] == ([1], {}, 5, "pending", 0, False)


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_publish_many_of_10000_rows_is_one_statement(driver, url):
    topic = f"{driver.name}.bulk"
    messages = [{"topic": topic, "payload": {"n": n}, "key": f"k{n % 7}"} for n in range(10000)]
    statements = []
    got = {}

    async def test(d):
        engine = getattr(d, "engine", None)
        sync_engine = getattr(engine, "sync_engine", engine)
        if sync_engine is not None:
            event.listen(sync_engine, "before_cursor_execute", lambda conn, cur, sql, *a: statements.append(sql) if "outbox" in sql else None)

        async def body(db):
            if sync_engine is None:
                # psycopg: the real connection, counted — every statement publish_many runs goes through execute.
                real = db.execute
                if inspect.iscoroutinefunction(real):

                    async def counted(sql, *a, **k):
                        statements.append(sql)
                        return await real(sql, *a, **k)

                else:

                    def counted(sql, *a, **k):
                        statements.append(sql)
                        return real(sql, *a, **k)

                db.execute = counted
            started = time.monotonic()
            got["ids"] = await maybe(publish_many(db, messages))
            got["ms"] = (time.monotonic() - started) * 1000

        await d.in_tx(body)

    go(driver, url, test)
    assert len(statements) == 1, statements[:3]
    ids_ = got["ids"]
    assert len(ids_) == 10000 and len(set(ids_)) == 10000
    n = q(
        url,
        "SELECT count(*) FROM outbox o JOIN jsonb_array_elements_text(%s::jsonb) WITH ORDINALITY AS u(id, i) ON o.id = u.id::uuid"
        " WHERE o.topic = %s AND (o.payload->>'n')::int8 = u.i - 1 AND o.state = 'pending'",
        json.dumps(ids_),
        topic,
    )
    assert n == [(10000,)], "every id is its message's row, in order"
    print(f"{driver.name}: publish_many of 10,000 rows in one statement took {got['ms']:.0f} ms (informational, not a benchmark)")


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(driver, url):
    topic = f"{driver.name}.bad"
    ok = {"topic": topic, "payload": {}}
    cases = [
        (lambda db: publish(db, "", {}), r"\btopic\b"),
        (lambda db: publish(db, topic, None), r"\bpayload\b"),
        (lambda db: publish(db, topic, {}, max_attempts=0), r"\bmax_attempts\b"),
        (lambda db: publish(db, topic, {}, delay=5, scheduled_at=datetime.now(timezone.utc)), r"`?delay`?.*scheduled_at"),
        (lambda db: publish(db, topic, {}, delay=-1), r"`delay`.*>= 0"),
        (lambda db: publish(db, topic, {}, delay="5s"), r"`delay`.*timedelta"),
        (lambda db: publish_many(db, [ok, {"topic": topic, "payload": {}, "delay": float("nan")}]), r"messages\[1\]\.delay"),
        (lambda db: publish(db, topic, {}, headers={"content-length": "5"}), r"headers\.content-length"),
        (lambda db: publish(db, topic, {}, scheduled_at=datetime(2030, 1, 1)), r"scheduled_at"),  # no timezone
        (lambda db: publish(db, topic, {"when": datetime.now}), r"payload"),
        (lambda db: publish(db, topic, datetime.now(timezone.utc)), r"payload is not JSON"),
        (lambda db: publish_many(db, [ok, ok, ok, {"topic": topic, "payload": {}, "headers": {"x-a": "line\nbreak"}}]), r"messages\[3\]\.headers\.x-a"),
        (lambda db: publish_many(db, [{"topic": topic, "payload": {}, "delay_s": 5}]), r"messages\[0\]\.delay_s\b"),
    ]

    async def test(d):
        for call, pattern in cases:

            async def body(db):
                await maybe(call(db))

            with pytest.raises(InvalidInput, match=pattern):
                await d.in_tx(body)

    go(driver, url, test)
    assert q(url, "SELECT count(*) FROM outbox WHERE topic = %s", topic) == [(0,)]


def test_publish_refuses_an_object_that_is_no_driver_naming_db():
    for db in (object(), None, "postgres://x"):
        with pytest.raises(InvalidInput, match=r"\bdb\b"):
            publish(db, "t", {})


def test_complete_in_refuses_an_autocommit_connection_and_a_message_no_handler_is_running_on(url):
    source = "refusals"
    enqueue(url, source)
    errors = {}

    async def handler(m, tx):
        with psycopg.connect(url, autocommit=True) as conn:
            with pytest.raises(InvalidInput, match=r"db: .*autocommit") as e:
                complete_in(conn, m)
            errors["autocommit"] = e.value
        with psycopg.connect(url) as conn:
            copy = type(m)(**{f: getattr(m, f) for f in m.__dataclass_fields__})
            with pytest.raises(InvalidInput, match=r"\bmessage\b") as e:
                complete_in(conn, copy)
            errors["copy"] = e.value

    asyncio.run(asyncio.wait_for(run_until(url, source, handler, lambda: processed(url, source) == 1), 60))
    assert set(errors) == {"autocommit", "copy"}


def test_one_task_one_transaction_complete_in_after_tx_execute_is_refused_and_tx_execute_after_complete_in(url):
    source = "one-tx"
    first, second = enqueue(url, source, 2)
    errors = {}

    async def handler(m, tx):
        if m.id == first:
            await tx.execute("INSERT INTO orders_seen (inbox_id, note) VALUES ($1::uuid, 'wrapper tx')", [m.id])
            with psycopg.connect(url) as conn, conn.transaction():
                with pytest.raises(InvalidInput) as e:
                    complete_in(conn, m)
                errors["complete_after_execute"] = e.value
        else:
            async with await psycopg.AsyncConnection.connect(url) as conn:
                async with conn.transaction():
                    await conn.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, 'app tx')", (m.id,))
                    await complete_in(conn, m)
                    with pytest.raises(InvalidInput) as e:
                        await tx.execute("SELECT 1")
                    errors["execute_after_complete"] = e.value

    asyncio.run(asyncio.wait_for(run_until(url, source, handler, lambda: processed(url, source) == 2, retry={"max_attempts": 0}), 60))
    assert set(errors) == {"complete_after_execute", "execute_after_complete"}
    # Each row was completed by the transaction it used, with its write.
    assert notes(url, first) == ["wrapper tx"] and notes(url, second) == ["app tx"]


def test_complete_in_with_a_message_kept_past_its_handler_is_refused_and_writes_nothing(url):
    source = "kept"
    [rid] = enqueue(url, source)
    kept = []

    async def handler(m, tx):
        kept.append(m)  # the worker completes the row itself when the handler returns

    asyncio.run(asyncio.wait_for(run_until(url, source, handler, lambda: processed(url, source) == 1), 60))
    with psycopg.connect(url) as conn:
        with pytest.raises(InvalidInput, match=r"\bmessage\b"):
            with conn.transaction():
                conn.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, 'late')", (rid,))
                complete_in(conn, kept[0])
    assert notes(url, rid) == [], "the late transaction rolled back"


def test_the_blocking_worker_completes_in_the_applications_blocking_transaction(url):
    """run_blocking: a plain handler on a worker thread with a psycopg cursor, SQLAlchemy's
    Session and SQLAlchemy's Connection (complete_in and publish run off the event loop)."""
    source = "blocking-app-tx"
    rids = enqueue(url, source, 6)
    engine = create_engine(alchemy_url(url), pool_size=2)
    stop = threading.Event()
    insert = "INSERT INTO orders_seen (inbox_id, note) VALUES (CAST(:id AS uuid), :note)"

    def handler(m, tx):
        kind = int(m.idempotency_key[1:]) % 3
        if kind == 0:
            with psycopg.connect(url) as conn, conn.transaction(), conn.cursor() as cur:
                cur.execute("INSERT INTO orders_seen (inbox_id, note) VALUES (%s::uuid, 'psycopg cursor')", (m.id,))
                complete_in(cur, m)
                publish(cur, "blocking.seen", {"id": m.id})
        elif kind == 1:
            with Session(engine) as s, s.begin():
                s.execute(text(insert), {"id": m.id, "note": "sqlalchemy session"})
                complete_in(s, m)
                publish(s, "blocking.seen", {"id": m.id})
        else:
            with engine.begin() as c:
                c.execute(text(insert), {"id": m.id, "note": "sqlalchemy connection"})
                complete_in(c, m)
                publish(c, "blocking.seen", {"id": m.id})

    def watch():
        deadline = time.monotonic() + 20
        while processed(url, source) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        Worker(url, source, concurrency=2, poll_interval=0.02).run_blocking(handler, stop=stop)
    finally:
        stop.set()
        watcher.join()
        engine.dispose()
    assert processed(url, source) == 6
    assert sorted(n for rid in rids for n in notes(url, rid)) == ["psycopg cursor"] * 2 + ["sqlalchemy connection"] * 2 + ["sqlalchemy session"] * 2
    published = sorted(r[0]["id"] for r in q(url, "SELECT payload FROM outbox WHERE topic = 'blocking.seen'"))
    assert published == sorted(rids)
