"""Database.cancel_inbox / cancel_outbox (asyncio) and their BlockingDatabase twins against
the real PostgreSQL through the real native extension: cancelled rows are never handed to a
real Worker, a second cancel cancels nothing, and a target that names no row is refused
naming the missing field."""

import asyncio
import secrets

import pytest

from conftest import wait_for
from queuebox_inbox import BlockingDatabase, CancelCounts, Database, InvalidInput, Worker


async def _states(db, source):
    rows = await db.query(
        "SELECT idempotency_key || '=' || state || '/' || attempt AS s FROM inbox WHERE source = $1 ORDER BY idempotency_key",
        [source],
    )
    return ",".join(r["s"] for r in rows)


def test_cancelled_pull_rows_are_never_handed_to_a_worker(database_url):
    source = f"cxl_{secrets.token_hex(3)}"

    async def go():
        async with await Database.connect(database_url) as db:
            for key, aggregate in [("c1", None), ("c2", "A"), ("c3", "A"), ("c4", None), ("c5", None)]:
                await db.enqueue(source, key, {}, aggregate_id=aggregate)
            assert await db.cancel_inbox(source=source, key="c1") == CancelCounts(1, 0, 0, 0)
            assert await db.cancel_inbox(source=source, key="c1") == CancelCounts(0, 0, 1, 0)
            assert (await db.cancel_inbox(source=source, aggregate="A")).cancelled == 2
            (row,) = await db.query("SELECT id::text AS id FROM inbox WHERE source = $1 AND idempotency_key = 'c4'", [source])
            assert (await db.cancel_inbox(id=row["id"])).cancelled == 1

            seen = []

            async def handler(m, tx):
                seen.append(m.idempotency_key)

            stop = asyncio.Event()
            async with Worker(database_url, source, poll_interval=0.05) as w:
                t = asyncio.ensure_future(w.run(handler, stop=stop))
                await wait_for(lambda: _has(_states(db, source), "c5=processed"), 15, "c5 processed")
                stop.set()
                await t
            assert seen == ["c5"]
            assert await _states(db, source) == "c1=cancelled/0,c2=cancelled/0,c3=cancelled/0,c4=cancelled/0,c5=processed/0"

    asyncio.run(go())


async def _has(coro, text):
    return text in await coro


def test_blocking_twin_cancels_outbox_rows_of_a_key(database_url):
    topic = f"t_{secrets.token_hex(3)}"
    with BlockingDatabase.connect(database_url) as db:
        db.execute(
            "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES ($1,'K','{}', now() + interval '1 hour'), ($1,'L','{}', now())",
            [topic],
        )
        assert db.cancel_outbox(topic=topic, key="K") == CancelCounts(cancelled=1, in_flight=0, finished=0, push=0)
        assert db.cancel_outbox(topic=topic, key="K").finished == 1
        rows = db.query("SELECT string_agg(key || '=' || state, ',' ORDER BY key) AS s FROM outbox WHERE topic = $1", [topic])
        assert rows == [{"s": "K=cancelled,L=pending"}]


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda db: db.cancel_inbox(source="s"), "id, key or aggregate"),
        (lambda db: db.cancel_inbox(key="k"), "source is required"),
        (lambda db: db.cancel_outbox(topic="t"), "id or key"),
    ],
)
def test_a_target_that_names_no_row_is_refused_naming_the_field(database_url, call, named):
    with BlockingDatabase.connect(database_url) as db:
        with pytest.raises(InvalidInput, match=named):
            call(db)

    async def go():
        async with await Database.connect(database_url) as db:
            with pytest.raises(InvalidInput, match=named):
                await call(db)

    asyncio.run(go())
