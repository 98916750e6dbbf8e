"""Enqueue pull rows in the application's own transaction on every driver
publish supports: committed with the business write, rolled back with it, duplicates
answered with the stored row's id, and refusals naming the field; the statement is the
core's (queuebox_core::app_tx::enqueue_statement)."""

import secrets
from datetime import datetime, timedelta, timezone

import pytest

from queuebox_inbox import BlockingDatabase, Enqueued, EnqueueMessage, InvalidInput, enqueue, enqueue_many
from test_app_tx import DRIVERS, go, ids, maybe, q, url  # noqa: F401  (url is a fixture)


class Rollback(Exception):
    pass


@pytest.mark.parametrize("driver", DRIVERS, ids=ids)
def test_enqueue_commits_with_the_transaction_and_answers_duplicates(driver, url):
    source = f"enq_{driver.name}_{secrets.token_hex(3)}"
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    got = {}

    async def test(d):
        async def body(db):
            got["one"] = await maybe(enqueue(db, source, {"total": 12.5}, idempotency_key="order-7", aggregate_id="cust-1",
                                             event_type="order.created", headers={"x-tenant": "acme"}, priority=5,
                                             max_attempts=2, delay=timedelta(minutes=1)))
            got["again"] = await maybe(enqueue(db, source, {"total": 99}, idempotency_key="order-7"))
            got["many"] = await maybe(enqueue_many(db, [EnqueueMessage(source, "plain", scheduled_at=at),
                                                        {"source": source, "payload": [1], "idempotency_key": "order-7"},
                                                        {"source": source, "payload": [2], "idempotency_key": "k2"}]))

        await d.in_tx(body)

        async def rolled_back(db):
            got["gone"] = await maybe(enqueue(db, source, {"x": 1}, idempotency_key="never"))
            raise Rollback()

        with pytest.raises(Rollback):
            await d.in_tx(rolled_back)

    go(driver, url, test)
    one = got["one"]
    assert isinstance(one, Enqueued) and not one.duplicate
    assert got["again"] == Enqueued(one.id, True), "a repeat key answers the stored row's id, nothing written"
    many = got["many"]
    assert [m.duplicate for m in many] == [False, True, False] and many[1].id == one.id
    rows = q(url, "SELECT id::text, idempotency_key, aggregate_id, event_type, headers, priority, max_attempts, payload, consumption,"
                  " state, scheduled_at > now() + interval '50 seconds' FROM inbox WHERE source = %s ORDER BY sequence", source)
    assert rows[0] == (one.id, "order-7", "cust-1", "order.created", {"x-tenant": "acme"}, 5, 2, {"total": 12.5}, "pull", "pending", True)
    assert [r[0] for r in rows] == [one.id, many[0].id, many[2].id], "three rows; the rolled-back one is not there"
    assert q(url, "SELECT count(*) FROM inbox WHERE source = %s AND idempotency_key = 'never'", source) == [(0,)]


@pytest.mark.parametrize("driver", DRIVERS[:1] + DRIVERS[2:3], ids=ids[:1] + ids[2:3])
def test_bad_input_is_refused_naming_the_field(driver, url):
    source = f"enq_bad_{secrets.token_hex(3)}"
    cases = [
        (lambda db: enqueue(db, "", {}), r"\bsource\b"),
        (lambda db: enqueue(db, source, None), r"\bpayload\b"),
        (lambda db: enqueue(db, source, {}, delay=-1), r"`delay`"),
        (lambda db: enqueue(db, source, {}, delay=1, scheduled_at=datetime.now(timezone.utc)), r"delay.*scheduled_at|scheduled_at.*delay"),
        (lambda db: enqueue_many(db, [{"source": source, "payload": {}}, {"source": source, "payload": {}, "priority": "high"}]), r"messages\[1\]\.priority"),
        (lambda db: enqueue_many(db, [{"source": source, "payload": {}, "topic": "x"}]), r"messages\[0\]\.topic"),
    ]

    async def test(d):
        for call, pattern in cases:

            async def body(db):
                await maybe(call(db))

            with pytest.raises(InvalidInput, match=pattern):
                await d.in_tx(body)

    go(driver, url, test)
    assert q(url, "SELECT count(*) FROM inbox WHERE source = %s", source) == [(0,)]


def test_database_enqueue_takes_the_same_options(url):
    source = f"enq_db_{secrets.token_hex(3)}"
    with BlockingDatabase.connect(url) as db:
        r = db.enqueue(source, "k", {"n": 1}, priority=3, max_attempts=4, delay=timedelta(minutes=1))
        assert db.enqueue(source, "k", {"n": 2}) == {"id": r["id"], "duplicate": True}
    assert q(url, "SELECT priority, max_attempts, scheduled_at > now() + interval '50 seconds' FROM inbox WHERE id = %s::uuid", r["id"]) == [(3, 4, True)]
