"""Contract item 13 (proto-docs/client-contract.md): mapped table and column names. A worker given the
names of a schema of its own (core/tests/fixtures/own_schema.sql: tables shop."order" and
shop."user", reserved-word columns) claims and completes there, ``complete_in`` on psycopg
names the same table, and a misspelt mapping key is refused naming it."""

from __future__ import annotations

import asyncio
import json
import pathlib
import secrets
import threading

import psycopg
import pytest

from queuebox_inbox import ConfigError, Database, Worker, complete_in

from conftest import _create, _drop, url_for, wait_for

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "core" / "tests" / "fixtures"
NAMES = json.loads((FIXTURES / "own_schema_names.json").read_text())
OPTIONS = dict(
    outbox_table_name=NAMES["outboxTableName"],
    inbox_table_name=NAMES["inboxTableName"],
    column_mapping=NAMES["columnMapping"],
)


@pytest.fixture
def own_schema_url():
    name = f"qb_py_names_{secrets.token_hex(4)}"

    async def create() -> None:
        await _create(name, schema=False)
        db = await Database.connect(url_for(name))
        await db.execute_script((FIXTURES / "own_schema.sql").read_text())
        await db.close()

    asyncio.run(create())
    yield url_for(name)
    asyncio.run(_drop(name))


def status(url: str, key: str):
    with psycopg.connect(url) as c:
        row = c.execute('SELECT status FROM shop."user" WHERE "key" = %s', (key,)).fetchone()
        return row[0] if row else None


def test_item_13_a_worker_on_its_own_schema_claims_completes_and_completes_in(own_schema_url):
    url = own_schema_url
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("""INSERT INTO shop."user" ("from", "key", payload, consumption)
                     VALUES ('named', 'n1', '{"n": 1}', 'pull'), ('named', 'n2', '{"n": 2}', 'pull')""")
    seen = []
    stop = threading.Event()
    w = Worker(url, "named", poll_interval=0.02, **OPTIONS)
    t = threading.Thread(target=w.run_blocking, args=(lambda m, tx: seen.append(m.idempotency_key),), kwargs={"stop": stop})
    t.start()
    try:
        asyncio.run(wait_for(lambda: _async(status(url, "n1") == "processed" and status(url, "n2") == "processed"), what="both processed"))
    finally:
        stop.set()
        t.join(20)
    assert sorted(seen) == ["n1", "n2"]

    with psycopg.connect(url, autocommit=True) as c:
        c.execute("""INSERT INTO shop."user" ("from", "key", payload, consumption) VALUES ('named', 'n3', '{"n": 3}', 'pull')""")

    def handle(message, tx):
        with psycopg.connect(url) as conn:  # the application's own connection and transaction
            complete_in(conn, message)

    stop2 = threading.Event()
    w2 = Worker(url, "named", poll_interval=0.02, **OPTIONS)
    t2 = threading.Thread(target=w2.run_blocking, args=(handle,), kwargs={"stop": stop2})
    t2.start()
    try:
        asyncio.run(wait_for(lambda: _async(status(url, "n3") == "processed"), what="n3 completed in the application's transaction"))
    finally:
        stop2.set()
        t2.join(20)


def test_item_13_a_misspelt_mapping_key_is_refused_naming_it():
    with pytest.raises(ConfigError, match="sourse"):
        Worker("postgres://127.0.0.1:1/x", "named", column_mapping={"inbox": {"sourse": "from"}})


async def _async(v):
    return v
