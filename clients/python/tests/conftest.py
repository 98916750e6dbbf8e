"""Test support: one fresh, migrated database per test session on the shared PostgreSQL
server, reached through the real native extension (no mocks, no other driver)."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from typing import Any, Awaitable, Callable, Dict, List
from urllib.parse import urlsplit, urlunsplit

import pytest

from queuebox_inbox import Database, migrate

ADMIN_URL = os.environ.get("QUEUEBOX_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/queuebox")


def url_for(name: str) -> str:
    u = urlsplit(ADMIN_URL)
    return urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


async def _create(name: str, schema: bool) -> None:
    admin = await Database.connect(ADMIN_URL, max_connections=2)
    try:
        await admin.execute_script(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    if schema:
        await migrate(url_for(name))


async def _drop(name: str) -> None:
    admin = await Database.connect(ADMIN_URL, max_connections=2)
    try:
        await admin.execute_script(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def database_url() -> Any:
    name = f"qb_py_{secrets.token_hex(4)}"
    asyncio.run(_create(name, schema=True))

    async def table() -> None:
        db = await Database.connect(url_for(name))
        await db.execute("CREATE TABLE seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)")
        await db.close()

    asyncio.run(table())
    yield url_for(name)
    asyncio.run(_drop(name))


@pytest.fixture
def empty_database_url() -> Any:
    name = f"qb_py_empty_{secrets.token_hex(4)}"
    asyncio.run(_create(name, schema=False))
    yield url_for(name)
    asyncio.run(_drop(name))


async def enqueue(db: Database, source: str, n: int, **extra: Any) -> List[str]:
    ids = []
    for i in range(n):
        ids.append((await db.enqueue(source, f"k{i}", {"n": i}, **extra))["id"])
    return ids


async def wait_for(check: Callable[[], Awaitable[Any]], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = await check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def states(db: Database, source: str) -> Dict[str, Dict[str, Any]]:
    rows = await db.query(
        "SELECT id::text AS id, state, attempt, last_error, claim_token::text AS claim_token,"
        " scheduled_at > now() AS in_future FROM inbox WHERE source = $1",
        [source],
    )
    return {r["id"]: r for r in rows}


async def count_state(db: Database, source: str, state: str) -> int:
    rows = await db.query("SELECT count(*)::int8 AS n FROM inbox WHERE source = $1 AND state = $2", [source, state])
    return int(rows[0]["n"])
