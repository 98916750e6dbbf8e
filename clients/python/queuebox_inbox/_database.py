"""A small pool run by the core: enqueue pull rows, cancel pending rows, run statements
outside a handler.

Two twins over the same native pool, as psycopg 3 has ``Connection`` and
``AsyncConnection``: :class:`Database` (asyncio, ``await``) and :class:`BlockingDatabase`
(plain calls for Django, Flask, scripts: no event loop needed). Both close with a context
manager (``async with`` / ``with``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Optional, Sequence

from . import _native, _params
from ._durations import Duration, to_ms
from ._types import Rows
from .errors import InvalidInput


def _enqueue_json(
    source: str,
    idempotency_key: str,
    payload: Any,
    aggregate_id: Optional[str],
    event_type: Optional[str],
    headers: Optional[Dict[str, str]],
    correlation_id: Optional[str],
    priority: Optional[int] = None,
    max_attempts: Optional[int] = None,
    delay: Optional[Duration] = None,
    scheduled_at: Optional[datetime] = None,
) -> str:
    # The core's enqueue rule (the same statement as `enqueue` in your transaction) checks
    # every field; only the duration is converted here.
    msg = {
        "source": source,
        "idempotencyKey": idempotency_key,
        "payload": payload,
        "aggregateId": aggregate_id,
        "eventType": event_type,
        "headers": headers,
        "correlationId": correlation_id,
        "priority": priority,
        "maxAttempts": max_attempts,
        "delayMs": None if delay is None else to_ms("delay", delay, InvalidInput),
        "scheduledAt": scheduled_at.isoformat() if isinstance(scheduled_at, datetime) else scheduled_at,
    }
    return json.dumps({k: v for k, v in msg.items() if v is not None or k == "payload"})


@dataclass(frozen=True)
class CancelCounts:
    """What a cancel did with the rows it named (all zeros when it matched none)."""

    #: Pending (or scheduled, or waiting for a retry) rows now ``cancelled``.
    cancelled: int
    #: Rows being handled: left to finish or fail normally.
    in_flight: int
    #: Rows already terminal (processed/sent, dead, or cancelled before): unchanged.
    finished: int
    #: Inbox push rows: the relay forwards them, they are never cancelled.
    push: int


def _cancel_target(**fields: Optional[str]) -> str:
    # The core reads the target and refuses one that names no row, naming the field.
    return json.dumps({k: v for k, v in fields.items() if v is not None})


def _cancel_counts(text: str) -> CancelCounts:
    c = json.loads(text)
    return CancelCounts(cancelled=c["cancelled"], in_flight=c["inFlight"], finished=c["finished"], push=c["push"])


class Database:
    """The asyncio pool: ``async with await Database.connect(url) as db:`` (or ``await
    db.close()``). :class:`BlockingDatabase` is its blocking twin."""

    def __init__(self, native: Any) -> None:
        self._db = native

    @staticmethod
    async def connect(database_url: str, *, max_connections: Optional[int] = None) -> "Database":
        return Database(await _native.connect_database(database_url, max_connections))

    async def enqueue(
        self,
        source: str,
        idempotency_key: str,
        payload: Any,
        *,
        aggregate_id: Optional[str] = None,
        event_type: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
        correlation_id: Optional[str] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        delay: Optional[Duration] = None,
        scheduled_at: Optional[datetime] = None,
    ) -> Dict[str, Any]:
        """Stores a pull row in a transaction of its own (deduplicated on ``(source,
        idempotency_key)``; ``idempotency_key=None`` makes a new row each time); returns
        ``{"id": ..., "duplicate": bool}``. The same rule and options as :func:`enqueue`
        in your transaction (``priority``, ``max_attempts``, ``delay`` or ``scheduled_at``)."""
        msg = _enqueue_json(source, idempotency_key, payload, aggregate_id, event_type, headers, correlation_id, priority, max_attempts, delay, scheduled_at)
        return json.loads(await self._db.enqueue(msg))

    async def cancel_inbox(
        self,
        *,
        id: Optional[str] = None,
        source: Optional[str] = None,
        key: Optional[str] = None,
        aggregate: Optional[str] = None,
    ) -> CancelCounts:
        """Cancels pending pull rows (what ``queuebox cancel inbox`` does): one row by ``id``,
        or within ``source`` the row of an idempotency ``key``, or every pending row of an
        ``aggregate``. One statement of the core: a row being handled is counted in
        ``in_flight`` and left to finish, and nothing is cancelled twice. A target that names
        no row raises :class:`InvalidInput` naming the missing field."""
        target = _cancel_target(id=id, source=source, key=key, aggregate=aggregate)
        return _cancel_counts(await self._db.cancel("inbox", target))

    async def cancel_outbox(
        self, *, id: Optional[str] = None, topic: Optional[str] = None, key: Optional[str] = None
    ) -> CancelCounts:
        """Cancels pending outbox rows (what ``queuebox cancel outbox`` does): one row by
        ``id``, or every pending row of a ``key`` (the ordering key), optionally only those of
        ``topic``."""
        return _cancel_counts(await self._db.cancel("outbox", _cancel_target(id=id, topic=topic, key=key)))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement in its own transaction; returns the affected row count. Parameters
        bind as in :class:`Transaction` (``Decimal`` and ints of any size as exact numeric)."""
        return await self._db.execute(sql, _params.encode(params))

    async def query(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return json.loads(await self._db.query(sql, _params.encode(params)))

    async def execute_script(self, sql: str) -> int:
        """SQL text outside a transaction (several statements, no parameters)."""
        return await self._db.execute_script(sql)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> "Database":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class BlockingDatabase:
    """The blocking twin of :class:`Database`: the same pool and methods, each call waiting
    on the calling thread (without the GIL, so other Python threads run meanwhile).
    ``with BlockingDatabase.connect(url) as db: db.enqueue(...)``."""

    def __init__(self, native: Any) -> None:
        self._db = native

    @staticmethod
    def connect(database_url: str, *, max_connections: Optional[int] = None) -> "BlockingDatabase":
        return BlockingDatabase(_native.connect_database_blocking(database_url, max_connections))

    def enqueue(
        self,
        source: str,
        idempotency_key: str,
        payload: Any,
        *,
        aggregate_id: Optional[str] = None,
        event_type: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
        correlation_id: Optional[str] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        delay: Optional[Duration] = None,
        scheduled_at: Optional[datetime] = None,
    ) -> Dict[str, Any]:
        """As :meth:`Database.enqueue`."""
        msg = _enqueue_json(source, idempotency_key, payload, aggregate_id, event_type, headers, correlation_id, priority, max_attempts, delay, scheduled_at)
        return json.loads(self._db.call_blocking("enqueue", msg))  # type: ignore[no-any-return]

    def cancel_inbox(
        self,
        *,
        id: Optional[str] = None,
        source: Optional[str] = None,
        key: Optional[str] = None,
        aggregate: Optional[str] = None,
    ) -> CancelCounts:
        """As :meth:`Database.cancel_inbox`."""
        target = _cancel_target(id=id, source=source, key=key, aggregate=aggregate)
        return _cancel_counts(self._db.cancel_blocking("inbox", target))

    def cancel_outbox(
        self, *, id: Optional[str] = None, topic: Optional[str] = None, key: Optional[str] = None
    ) -> CancelCounts:
        """As :meth:`Database.cancel_outbox`."""
        return _cancel_counts(self._db.cancel_blocking("outbox", _cancel_target(id=id, topic=topic, key=key)))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._db.call_blocking("execute", sql, _params.encode(params))  # type: ignore[no-any-return]

    def query(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return json.loads(self._db.call_blocking("query", sql, _params.encode(params)))  # type: ignore[no-any-return]

    def execute_script(self, sql: str) -> int:
        return self._db.call_blocking("execute_script", sql)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._db.call_blocking("close", "")

    def __enter__(self) -> "BlockingDatabase":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def migrate(database_url: str) -> list:
    """Applies the QueueBox migrations; returns the names applied now."""
    return await _native.migrate(database_url)


def migrate_blocking(database_url: str) -> list:
    """:func:`migrate` for a program without an event loop (a Django management command, a
    deploy script): waits on the calling thread."""
    return _native.migrate_blocking(database_url)  # type: ignore[no-any-return]


def evaluate(kind: str, input: Any) -> Any:
    """Runs one conformance vector case (proto-docs/vectors) through the core."""
    return json.loads(_native.evaluate(kind, json.dumps(input)))
