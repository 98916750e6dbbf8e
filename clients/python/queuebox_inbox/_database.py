"""A small pool run by the core: enqueue pull rows, run statements outside a handler."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence

from . import _native, _params
from ._types import Rows


class Database:
    """Connect with ``await Database.connect(url)``."""

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
    ) -> Dict[str, Any]:
        """Stores a pull row (deduplicated on ``(source, idempotency_key)``);
        returns ``{"id": ..., "duplicate": bool}``."""
        msg = {
            "source": source,
            "idempotencyKey": idempotency_key,
            "payload": payload,
            "aggregateId": aggregate_id,
            "eventType": event_type,
            "headers": headers,
            "correlationId": correlation_id,
        }
        return json.loads(await self._db.enqueue(json.dumps(msg)))

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


async def migrate(database_url: str) -> list:
    """Applies the QueueBox migrations; returns the names applied now."""
    return await _native.migrate(database_url)


def evaluate(kind: str, input: Any) -> Any:
    """Runs one conformance vector case (proto-docs/vectors) through the core."""
    return json.loads(_native.evaluate(kind, json.dumps(input)))
