"""Errors cross the native boundary typed: the extension raises one exception class per kind
of the core's error-kind table, which the package re-exports; nothing parses a message."""

import asyncio
import json
import pathlib

import pytest

import queuebox_inbox
from conftest import enqueue, states
from queuebox_inbox import (
    AlreadyFinished,
    Cancelled,
    ClaimLost,
    Database,
    InvalidInput,
    QueueBoxError,
    _native,
)
from queuebox_inbox.errors import BY_KIND, KINDS

TABLE = pathlib.Path(__file__).resolve().parents[3] / "proto-docs" / "error-kinds.json"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_the_exception_classes_are_exactly_the_core_table():
    core = [k["name"] for k in json.loads(TABLE.read_text())["kinds"]]
    assert list(KINDS) == core, "the extension's classes drifted from proto-docs/error-kinds.json"
    for kind, cls in BY_KIND.items():
        assert issubclass(cls, QueueBoxError) and cls.kind == kind
        assert getattr(queuebox_inbox, cls.__name__) is cls, f"{cls.__name__} is re-exported"
    assert queuebox_inbox.QueueBoxError is _native.QueueBoxError


def test_an_error_of_the_extension_is_raised_as_its_class():
    with pytest.raises(InvalidInput) as e:
        _native.evaluate("no_such_kind", "{}")
    assert e.value.kind == "invalid_input" and "no_such_kind" in str(e.value)


def test_a_lost_lease_raises_claim_lost(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "py-lost-lease"
        [rid] = await enqueue(db, source, 1)
        w = await _native.connect_worker(database_url, json.dumps({"source": source, "pollIntervalMs": 20}))
        task = await w.next()
        # Another worker owns the row now: the fenced completion matches nothing.
        await db.execute("UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1::uuid", [rid])
        with pytest.raises(ClaimLost):
            await task.complete()
        assert (await states(db, source))[rid]["state"] == "processing"
        await w.shutdown()
        await db.close()

    run(go())


def test_a_cancelled_task_may_only_be_abandoned(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "py-cancel-only"
        await enqueue(db, source, 5)
        opts = {"source": source, "batchSize": 5, "concurrency": 5, "pollIntervalMs": 20, "shutdownGraceMs": 100}
        w = await _native.connect_worker(database_url, json.dumps(opts))
        tasks = [await w.next() for _ in range(5)]
        await tasks[0].execute("CREATE TABLE py_cancelled_write (x int)")
        assert await w.shutdown() == 5, "the grace runs out with five running tasks"
        assert all(t.is_cancelled() for t in tasks)
        finishes = [
            ("complete", lambda: tasks[0].complete()),
            ("fail", lambda: tasks[1].fail("boom")),
            ("retry", lambda: tasks[2].retry(1000, "later")),
            ("dead", lambda: tasks[3].dead("poison")),
            ("release", lambda: tasks[4].release()),
        ]
        for name, finish in finishes:
            with pytest.raises(Cancelled):
                await finish()
        for r in (await states(db, source)).values():
            assert (r["state"], r["attempt"]) == ("processing", 0), "nothing written"
        rows = await db.query("SELECT to_regclass('py_cancelled_write') IS NULL AS gone")
        assert rows[0]["gone"] is True, "the cancelled task's writes rolled back"
        await tasks[0].abandon()
        with pytest.raises(AlreadyFinished):
            await tasks[0].complete()
        await db.close()

    run(go())
