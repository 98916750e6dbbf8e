"""The application's own driver, recognised by the package its object comes from (this
package imports no driver until it is handed one): psycopg 3 (``Connection``,
``AsyncConnection``, or a cursor of either), SQLAlchemy 2 (``Session``, ``AsyncSession``,
``Connection``, ``AsyncConnection``) and Django (``django.db.connection`` or
``connections[alias]`` on the PostgreSQL backend, or one of its cursors). Each driver only
runs the SQL text the core rendered in its placeholder style and reports how many rows it
affected, or the rows it returned; none of them writes SQL."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple, Union

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
    #: Runs one rendered query; returns (or resolves to) its rows as tuples.
    fetch: Callable[[str, Params], Union[List[Tuple[Any, ...]], Awaitable[List[Tuple[Any, ...]]]]]


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

        async def fetch_async(sql: str, params: Params) -> List[Tuple[Any, ...]]:
            return [tuple(r) for r in await (await execute(sql, list(params))).fetchall()]

        return Driver("psycopg", "percent", True, run_async, fetch_async)
    return Driver(
        "psycopg",
        "percent",
        False,
        lambda sql, params: execute(sql, list(params)).rowcount,
        lambda sql, params: [tuple(r) for r in execute(sql, list(params)).fetchall()],
    )


def _sqlalchemy(db: Any) -> Driver:
    from sqlalchemy import text  # only once the application handed us a SQLAlchemy object

    execute = db.execute
    # `:p1`, `:p2`, … bind by name.
    named = lambda params: {f"p{i}": v for i, v in enumerate(params, 1)}  # noqa: E731
    if inspect.iscoroutinefunction(execute):

        async def run_async(sql: str, params: Params) -> int:
            return (await execute(text(sql), named(params))).rowcount

        async def fetch_async(sql: str, params: Params) -> List[Tuple[Any, ...]]:
            return [tuple(r) for r in (await execute(text(sql), named(params))).all()]

        return Driver("sqlalchemy", "colon", True, run_async, fetch_async)
    return Driver(
        "sqlalchemy",
        "colon",
        False,
        lambda sql, params: execute(text(sql), named(params)).rowcount,
        lambda sql, params: [tuple(r) for r in execute(text(sql), named(params)).all()],
    )


def _django(db: Any, transaction: bool) -> Driver:
    # A connection (`django.db.connection` is a proxy to `connections["default"]`) opens a
    # cursor per statement; a cursor is used as it is. Django's cursors take `%s` markers,
    # passed through to psycopg (its PostgreSQL backend), so the core's percent style fits.
    cursor_of = getattr(db, "cursor", None)
    conn = db if callable(cursor_of) else getattr(db, "db", None)
    if conn is None or getattr(conn, "vendor", None) != "postgresql":
        raise InvalidInput(
            "invalid input: db: a Django connection or cursor on the PostgreSQL backend is needed, got "
            f"vendor {getattr(conn, 'vendor', None)!r}"
        )
    if transaction and not conn.in_atomic_block:
        raise InvalidInput(
            "invalid input: db: this Django connection is in autocommit mode (outside transaction.atomic()), "
            "so the completion would commit without the business write; run it inside `with transaction.atomic():`"
        )

    def on_cursor(work: Callable[[Any], Any]) -> Any:
        if callable(cursor_of):
            with db.cursor() as c:
                return work(c)
        return work(db)

    def run(sql: str, params: Params) -> int:
        return on_cursor(lambda c: (c.execute(sql, list(params)), c.rowcount)[1])  # type: ignore[no-any-return]

    def fetch(sql: str, params: Params) -> List[Tuple[Any, ...]]:
        return on_cursor(lambda c: (c.execute(sql, list(params)), [tuple(r) for r in c.fetchall()])[1])  # type: ignore[no-any-return]

    return Driver("django", "percent", False, run, fetch)


def driver_of(db: Any, *, transaction: bool = False) -> Driver:
    """The driver of ``db``. With ``transaction``, refuses a psycopg connection in autocommit
    mode, where a completion would commit without the business write."""
    root = _root(db)
    if root == "psycopg" and callable(getattr(db, "execute", None)):
        return _psycopg(db, transaction)
    if root == "sqlalchemy" and callable(getattr(db, "execute", None)):
        return _sqlalchemy(db)
    if root == "django" and (callable(getattr(db, "cursor", None)) or callable(getattr(db, "execute", None))):
        return _django(db, transaction)
    raise InvalidInput(
        "invalid input: db: expected a psycopg Connection/AsyncConnection/cursor, a SQLAlchemy "
        "Session/AsyncSession/Connection or a Django connection/cursor, got "
        f"{type(db).__module__}.{type(db).__qualname__}"
    )
