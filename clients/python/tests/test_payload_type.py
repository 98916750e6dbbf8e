"""Typed payloads: Worker(payload_type=...) hands the handler a dataclass or a
pydantic model; a payload that does not decode is dead-lettered (default) or retried, never
handled. Against the real PostgreSQL."""

import asyncio
import secrets
from dataclasses import dataclass

import pydantic  # in the package's `test` extra; the package itself does not need it
import pytest

from conftest import wait_for
from queuebox_inbox import BlockingDatabase, ConfigError, Worker


@dataclass
class OrderCreated:
    order_id: int
    total: float


class OrderModel(pydantic.BaseModel):
    order_id: int
    total: float


def run_on(database_url, source, payloads, handler_seen, **opts):
    with BlockingDatabase.connect(database_url) as db:
        for i, p in enumerate(payloads):
            db.enqueue(source, f"k{i}", p)

    async def go():
        stop = asyncio.Event()

        async def handler(message, tx):
            handler_seen.append(message.payload)

        async def finished():
            rows = await asyncio.to_thread(rows_of, database_url, source)
            # Done: processed or dead, or back to pending after a failed attempt.
            return all(r["state"] in ("processed", "dead") or (r["state"] == "pending" and r["attempt"] > 0) for r in rows) and rows

        w = Worker(database_url, source, poll_interval=0.02, **opts)
        t = asyncio.ensure_future(w.run(handler, stop=stop))
        rows = await wait_for(finished, what="every row handled or refused")
        stop.set()
        await t
        return rows

    return asyncio.run(go())


def rows_of(database_url, source):
    with BlockingDatabase.connect(database_url) as db:
        return db.query("SELECT idempotency_key AS k, state, attempt, last_error FROM inbox WHERE source = $1 ORDER BY 1", [source])


@pytest.mark.parametrize("payload_type", [OrderCreated, OrderModel], ids=["dataclass", "pydantic"])
def test_the_handler_gets_the_type_and_a_bad_payload_is_dead_lettered(database_url, payload_type):
    seen = []
    source = f"typed_{secrets.token_hex(3)}"
    rows = run_on(database_url, source, [{"order_id": 7, "total": 12.5}, {"order_id": "x"}, [1, 2]], seen, payload_type=payload_type)
    assert seen == [payload_type(order_id=7, total=12.5)]
    assert [(r["k"], r["state"]) for r in rows] == [("k0", "processed"), ("k1", "dead"), ("k2", "dead")]
    assert rows[1]["last_error"].startswith(f"payload is not a valid {payload_type.__qualname__}: ")


def test_invalid_payload_retry_hands_it_to_the_retry_policy(database_url):
    seen = []
    source = f"typed_r_{secrets.token_hex(3)}"
    rows = run_on(database_url, source, [{"order_id": 1}], seen, payload_type=OrderCreated, invalid_payload="retry",
                  retry={"max_attempts": 3, "base_delay": 60})
    assert seen == []
    assert (rows[0]["state"], rows[0]["attempt"]) == ("pending", 1), "retried later, not dead"
    assert "not a valid OrderCreated" in rows[0]["last_error"]


def test_bad_typed_options_name_the_field():
    with pytest.raises(ConfigError, match="`invalid_payload`"):
        Worker("postgres://x@127.0.0.1:1/x", "s", payload_type=OrderCreated, invalid_payload="drop")
    with pytest.raises(ConfigError, match="`payload_type`"):
        Worker("postgres://x@127.0.0.1:1/x", "s", payload_type=42)
