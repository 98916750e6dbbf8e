"""The Rust core's log records reach Python's logging (tests/../queuebox_inbox/_logs.py)."""

import asyncio
import logging
import time

import pytest

from conftest import enqueue, states, wait_for
from queuebox_inbox import ConnectError, Dead, Database, Worker


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def find(self, level: int, text: str):
        return next((r for r in self.records if r.levelno == level and text in r.getMessage()), None)


def captured_logger(name: str):
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Captured()
    logger.addHandler(handler)
    return logger, handler


def wait_for_record(handler: Captured, level: int, text: str, seconds: float = 10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = handler.find(level, text)
        if r is not None:
            return r
        time.sleep(0.02)
    pytest.fail(f"no {logging.getLevelName(level)} record containing {text!r}; got {[r.getMessage() for r in handler.records]}")


def test_an_unreachable_database_is_logged_at_warning_through_logging():
    logger, handler = captured_logger("test.qb.down")
    worker = Worker("postgres://qb@127.0.0.1:1/down", "py-logs-down", logger=logger)
    with pytest.raises(ConnectError):
        asyncio.run(worker.connect())
    r = wait_for_record(handler, logging.WARNING, "database is unreachable")
    assert r.source == "py-logs-down"
    assert r.target == "queuebox_core::worker"
    assert "127.0.0.1:1" in r.error
    assert r.queuebox["source"] == "py-logs-down"


def test_a_dead_lettered_message_is_logged_with_its_id_and_source(database_url):
    logger, handler = captured_logger("test.qb.dead")

    async def go():
        db = await Database.connect(database_url)
        source = "py-logs-dead"
        (mid,) = await enqueue(db, source, 1)

        async def handler_fn(m, tx):
            raise Dead("poison pill")

        async def dead():
            return (await states(db, source))[mid]["state"] == "dead"

        stop = asyncio.Event()
        t = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02, logger=logger).run(handler_fn, stop=stop))
        await wait_for(dead, 10, "dead-lettered")
        stop.set()
        await t
        await db.close()
        return mid

    mid = asyncio.run(asyncio.wait_for(go(), 60))
    r = wait_for_record(handler, logging.WARNING, "dead-lettered")
    assert (r.message_id, r.source, r.reason) == (mid, "py-logs-dead", "poison pill")
