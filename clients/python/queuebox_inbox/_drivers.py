"""The application's own driver, recognised by the package its object comes from (this
package imports no driver until it is handed one): psycopg 3 (``Connection``,
``AsyncConnection``, or a cursor of either) and SQLAlchemy 2 (``Session``, ``AsyncSession``,
``Connection``, ``AsyncConnection``). Each driver only runs the SQL text the core rendered
in its placeholder style and reports how many rows it affected; none of them writes SQL."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Sequence, Union

from .errors import InvalidInput

Params = Sequence[Optional[str]]


@dataclass(frozen=True)
class Driver:
    name: str
    #: The style the core renders this driver's SQL in (``queuebox_core::app_tx::Placeholder``).
    placeholder: str
    #: True when ``run`` returns an awaitable (an asyncio connection or session).
    is_async: bool
    #: Runs one rendered statement; returns (or resolves to) the rows it affected.
    run: Callable[[str, Params], Union[int, Awaitable[int]]]


def _root(db: Any) -> str:
    return type(db).__module__.split(".", 1)[0]


def _psycopg(db: Any, transaction: bool) -> Driver:
    conn = getattr(db, "connection", db)  # a cursor knows its connection
    if transaction and getattr(conn, "autocommit", False) is True:
        raise InvalidInput(
            "invalid input: db: this psycopg connection is in autocommit mode, so the completion would commit "
            "without the business write; use `with conn.transaction():` (or autocommit=False)"
        )
    execute = db.execute
    if inspect.iscoroutinefunction(execute):

        async def run_async(sql: str, params: Params) -> int:
            return (await execute(sql, list(params))).rowcount

        return Driver("psycopg", "percent", True, run_async)
    return Driver("psycopg", "percent", False, lambda sql, params: execute(sql, list(params)).rowcount)


def _sqlalchemy(db: Any) -> Driver:
    from sqlalchemy import text  # only once the application handed us a SQLAlchemy object

    execute = db.execute
    # `:p1`, `:p2`, … bind by name.
    named = lambda params: {f"p{i}": v for i, v in enumerate(params, 1)}  # noqa: E731
    if inspect.iscoroutinefunction(execute):

        async def run_async(sql: str, params: Params) -> int:
            return (await execute(text(sql), named(params))).rowcount

        return Driver("sqlalchemy", "colon", True, run_async)
    return Driver("sqlalchemy", "colon", False, lambda sql, params: execute(text(sql), named(params)).rowcount)


def driver_of(db: Any, *, transaction: bool = False) -> Driver:
    """The driver of ``db``. With ``transaction``, refuses a psycopg connection in autocommit
    mode, where a completion would commit without the business write."""
    root = _root(db)
    if root == "psycopg" and callable(getattr(db, "execute", None)):
        return _psycopg(db, transaction)
    if root == "sqlalchemy" and callable(getattr(db, "execute", None)):
        return _sqlalchemy(db)
    raise InvalidInput(
        "invalid input: db: expected a psycopg Connection/AsyncConnection/cursor or a SQLAlchemy "
        f"Session/AsyncSession/Connection, got {type(db).__module__}.{type(db).__qualname__}"
    )
