"""Your transaction, your driver: complete a claimed message and publish outbox rows inside
the application's own transaction, on its own psycopg connection or SQLAlchemy session, so
its repository code and QueueBox's rows share one commit.

The core renders every statement (SQL text in the driver's placeholder style, parameters as
text, how to read the result) and keeps the fence; this module runs the statement on the
driver it was given (``_drivers``) and reads the affected-row count. With an asyncio
connection or session each function returns an awaitable; with a blocking one it returns
the result.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Awaitable, Dict, Iterable, List, Mapping, Optional, Union

from . import _native
from ._drivers import Driver, driver_of
from ._durations import Duration, to_ms
from ._types import InboxMessage
from ._worker import Running, running_of
from .errors import ClaimLost, DatabaseError, InvalidInput, QueueBoxError


@dataclass(frozen=True)
class OutboxMessage:
    """One outbox row for :func:`publish_many` (a plain dict with these keys works too)."""

    topic: str
    #: Any JSON value but None.
    payload: Any
    #: Ordering / partition key (``X-Message-Key``, the Kafka record key); at most 255 characters.
    key: Optional[str] = None
    #: Sent with the message; the relay's header rules apply (no framing or relay-owned names).
    headers: Optional[Dict[str, str]] = None
    aggregate_type: Optional[str] = None
    #: Dead-letter ceiling, at least 1 (default 5).
    max_attempts: Optional[int] = None
    #: Deprecated: milliseconds; use ``delay``.
    delay_ms: Optional[int] = None
    #: Not delivered before this time (timezone-aware). Not with ``delay``.
    scheduled_at: Optional[datetime] = None
    #: Not delivered before this long after the insert (database clock): seconds or a
    #: ``timedelta``. Not with ``scheduled_at``.
    delay: Optional[Duration] = None

    def __post_init__(self) -> None:
        if self.delay_ms is not None:
            warnings.warn("`delay_ms` is deprecated: pass `delay` in seconds or as a datetime.timedelta", DeprecationWarning, stacklevel=3)


def _core_message(m: Union[OutboxMessage, Mapping[str, Any]], at: str) -> Dict[str, Any]:
    """The message as the core reads it; unknown keys go through for the core to refuse."""
    if isinstance(m, OutboxMessage):
        items = {f.name: getattr(m, f.name) for f in fields(m)}
    elif isinstance(m, Mapping):
        items = dict(m)
    else:
        raise InvalidInput(f"invalid input: {at} must be an OutboxMessage or a dict, got {type(m).__name__}")
    if items.get("delay") is not None:
        if items.get("delay_ms") is not None:
            raise InvalidInput(f"invalid input: {at}.delay: give `delay` (seconds or timedelta) or the deprecated `delay_ms`, not both")
        items["delay_ms"] = to_ms("delay" if at == "message" else f"{at}.delay", items["delay"], InvalidInput)
    elif isinstance(m, Mapping) and items.get("delay_ms") is not None:
        warnings.warn("`delay_ms` is deprecated: pass `delay` in seconds or as a datetime.timedelta", DeprecationWarning, stacklevel=5)
    items.pop("delay", None)
    return _json_fields(items, at)



def _json_fields(items: Dict[str, Any], at: str) -> Dict[str, Any]:
    """A message's fields as the core reads them (publish and enqueue alike): None left out
    (the core's default) except a null payload, which the core refuses by name; a datetime
    ``scheduled_at`` as ISO 8601; a value JSON cannot hold refused, naming ``{at}.{field}``."""
    out = {}
    for k, v in items.items():
        if v is None and k != "payload":
            continue
        if k == "scheduled_at" and isinstance(v, datetime):
            v = v.isoformat()  # without a timezone the core refuses it, naming scheduled_at
        try:
            json.dumps(v)
        except (TypeError, ValueError) as e:
            raise InvalidInput(f"invalid input: {at}.{k} is not JSON: {e}") from None
        out[k] = v
    return out

def _render(messages: Iterable[Any], placeholder: str, single: bool) -> Dict[str, Any]:
    if isinstance(messages, (str, bytes, Mapping, OutboxMessage)) or not isinstance(messages, Iterable):
        raise InvalidInput("invalid input: messages must be a list of OutboxMessage or dicts")
    given = list(messages)
    core = [_core_message(m, "message" if single else f"messages[{i}]") for i, m in enumerate(given)]
    try:
        return json.loads(_native.publish_statement(json.dumps(core), placeholder))
    except QueueBoxError as e:
        text = str(e)
        if not any(_uses_delay_ms(m) for m in given):
            # The core takes milliseconds as `delay_ms`; the caller wrote `delay`.
            text = re.sub(r"\bdelay_ms\b", "delay", text)
        if single:
            # One message: say `topic`, not `messages[0].topic`.
            text = re.sub(r"messages\[0\]\.?", "", text)
        raise type(e)(text) from None


def _uses_delay_ms(m: Any) -> bool:
    got = m.get("delay_ms") if isinstance(m, Mapping) else getattr(m, "delay_ms", None)
    return got is not None


def _checked_ids(st: Dict[str, Any], n: int) -> List[str]:
    ids = st["ids"]
    if n != len(ids):
        raise DatabaseError(f"database error during outbox publish: inserted {n} rows of {len(ids)}")
    return ids


def _publish(db: Any, messages: Iterable[Any], single: bool) -> Union[List[str], Awaitable[List[str]]]:
    driver = driver_of(db)
    st = _render(messages, driver.placeholder, single)
    if driver.is_async:

        async def run() -> List[str]:
            return _checked_ids(st, await driver.run(st["sql"], st["params"]))  # type: ignore[misc]

        return run()
    return _checked_ids(st, driver.run(st["sql"], st["params"]))  # type: ignore[arg-type]


def _completed(running: Running, n: int) -> None:
    if n == 1:
        running.completed = True
        return
    if running.completed:
        # Run twice in one transaction: the first run already took the claim, so this one
        # matches no row. Not a lost claim; the application's transaction still fails, so a
        # transaction that rolled back and lost the claim meanwhile commits nothing either.
        # (A new transaction after a rollback completes again: its run affects the row.)
        raise InvalidInput("invalid input: message: complete_in already completed this message; it runs once per transaction (a second run in the same transaction, or after it committed, matches no row)")
    # The core settles the task, counts and logs the lost claim, and raises ClaimLost naming
    # the row.
    running.task.claim_lost()
    raise ClaimLost(f"claim lost on inbox row {running.message.id}")  # not reached: claim_lost raises


def complete_in(db: Any, message: InboxMessage) -> Optional[Awaitable[None]]:
    """Completes ``message`` inside the application's transaction on ``db``: the row turns
    ``processed`` when that transaction commits, together with the business write. From
    here on the worker no longer renews the lease nor completes the row itself, so commit
    soon. Raises :class:`ClaimLost` when the lease was lost (another worker owns the row):
    let it leave your transaction block so the business write rolls back.

    ``db``: a psycopg ``Connection`` / ``AsyncConnection`` (or cursor) inside a transaction,
    or a SQLAlchemy ``Session`` / ``AsyncSession`` / ``Connection``; ``message`` is the one
    the handler received. Await the result with an asyncio connection or session."""
    driver: Driver = driver_of(db, transaction=True)
    running = running_of(message)
    st = json.loads(running.task.completion_statement(driver.placeholder))
    if driver.is_async:

        async def run() -> None:
            _completed(running, await driver.run(st["sql"], st["params"]))  # type: ignore[misc]

        return run()
    _completed(running, driver.run(st["sql"], st["params"]))  # type: ignore[arg-type]
    return None


def publish(
    db: Any,
    topic: str,
    payload: Any,
    *,
    key: Optional[str] = None,
    headers: Optional[Dict[str, str]] = None,
    aggregate_type: Optional[str] = None,
    max_attempts: Optional[int] = None,
    delay: Optional[Duration] = None,
    scheduled_at: Optional[datetime] = None,
    delay_ms: Optional[int] = None,
) -> Union[str, Awaitable[str]]:
    """Writes one outbox row in the application's transaction on ``db`` and returns its id
    (awaitable with an asyncio connection or session). Nothing is delivered unless that
    transaction commits. ``delay``: seconds or a ``timedelta`` (``delay_ms`` is deprecated)."""
    if delay_ms is not None:
        warnings.warn("`delay_ms` is deprecated: pass `delay` in seconds or as a datetime.timedelta", DeprecationWarning, stacklevel=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # warned above, at the caller's line
        m = OutboxMessage(topic, payload, key, headers, aggregate_type, max_attempts, delay_ms, scheduled_at, delay)
    ids = _publish(db, [m], True)
    if isinstance(ids, list):
        return ids[0]

    async def first() -> str:
        return (await ids)[0]  # type: ignore[misc]

    return first()


def publish_many(db: Any, messages: Iterable[Union[OutboxMessage, Mapping[str, Any]]]) -> Union[List[str], Awaitable[List[str]]]:
    """Writes many outbox rows with one statement; returns their ids in order (awaitable with
    an asyncio connection or session)."""
    return _publish(db, messages, False)


@dataclass(frozen=True)
class EnqueueMessage:
    """One pull inbox row for :func:`enqueue_many` (a plain dict with these keys works too)."""

    #: The pull source whose workers claim it.
    source: str
    #: Any JSON value but None.
    payload: Any
    #: Deduplicates on ``(source, idempotency_key)``: a repeat returns the stored row's id
    #: with ``duplicate=True``. Without it each call makes a new row (its key is its id).
    idempotency_key: Optional[str] = None
    #: Rows of one aggregate are handled in order, one at a time.
    aggregate_id: Optional[str] = None
    event_type: Optional[str] = None
    correlation_id: Optional[str] = None
    headers: Optional[Dict[str, str]] = None
    #: Higher is claimed first within the source (default 0); an aggregate keeps its order.
    priority: Optional[int] = None
    #: This row's dead-letter ceiling instead of the worker's retry policy.
    max_attempts: Optional[int] = None
    #: Not claimable before this long after the insert: seconds or a ``timedelta``. Not with ``scheduled_at``.
    delay: Optional[Duration] = None
    #: Not claimable before this time (timezone-aware). Not with ``delay``.
    scheduled_at: Optional[datetime] = None


@dataclass(frozen=True)
class Enqueued:
    """What :func:`enqueue` stored: the row's id, and whether ``(source, idempotency_key)``
    was there already (then ``id`` is the existing row's and nothing was written)."""

    id: str
    duplicate: bool


def _enqueue_core(m: Union[EnqueueMessage, Mapping[str, Any]], at: str) -> Dict[str, Any]:
    if isinstance(m, EnqueueMessage):
        items = {f.name: getattr(m, f.name) for f in fields(m)}
    elif isinstance(m, Mapping):
        items = dict(m)
    else:
        raise InvalidInput(f"invalid input: {at} must be an EnqueueMessage or a dict, got {type(m).__name__}")
    if items.get("delay") is not None:
        items["delay_ms"] = to_ms("delay" if at == "message" else f"{at}.delay", items["delay"], InvalidInput)
    items.pop("delay", None)
    return _json_fields(items, at)


def _enqueued(rows: List[Any], n: int) -> List[Enqueued]:
    # One row per message, `(n, id, duplicate)`, ordered by n (the core's statement says so).
    if len(rows) != n or [int(r[0]) for r in rows] != list(range(len(rows))):
        raise DatabaseError(f"database error during enqueue: expected one row per message ({n}), got {len(rows)}")
    return [Enqueued(str(r[1]), bool(r[2])) for r in rows]


def _enqueue(db: Any, messages: Iterable[Any], single: bool) -> Union[List[Enqueued], Awaitable[List[Enqueued]]]:
    driver = driver_of(db)
    if isinstance(messages, (str, bytes, Mapping, EnqueueMessage)) or not isinstance(messages, Iterable):
        raise InvalidInput("invalid input: messages must be a list of EnqueueMessage or dicts")
    core = [_enqueue_core(m, "message" if single else f"messages[{i}]") for i, m in enumerate(messages)]
    try:
        st = json.loads(_native.enqueue_statement(json.dumps(core), driver.placeholder))
    except QueueBoxError as e:
        text = re.sub(r"\bdelay_ms\b", "delay", str(e))
        raise type(e)(re.sub(r"messages\[0\]\.?", "", text) if single else text) from None
    if driver.is_async:

        async def run() -> List[Enqueued]:
            return _enqueued(await driver.fetch(st["sql"], st["params"]), len(core))  # type: ignore[misc]

        return run()
    return _enqueued(driver.fetch(st["sql"], st["params"]), len(core))  # type: ignore[arg-type]


def enqueue(
    db: Any,
    source: str,
    payload: Any,
    *,
    idempotency_key: Optional[str] = None,
    aggregate_id: Optional[str] = None,
    event_type: Optional[str] = None,
    correlation_id: Optional[str] = None,
    headers: Optional[Dict[str, str]] = None,
    priority: Optional[int] = None,
    max_attempts: Optional[int] = None,
    delay: Optional[Duration] = None,
    scheduled_at: Optional[datetime] = None,
) -> Union[Enqueued, Awaitable[Enqueued]]:
    """Stores one pull row for ``source``'s workers in the application's transaction on
    ``db``; returns :class:`Enqueued` (awaitable with an asyncio connection or session).
    Claimable once that transaction commits; rolled back, there is no row."""
    m = EnqueueMessage(source, payload, idempotency_key, aggregate_id, event_type, correlation_id, headers, priority, max_attempts, delay, scheduled_at)
    out = _enqueue(db, [m], True)
    if isinstance(out, list):
        return out[0]

    async def first() -> Enqueued:
        return (await out)[0]  # type: ignore[misc]

    return first()


def enqueue_many(db: Any, messages: Iterable[Union[EnqueueMessage, Mapping[str, Any]]]) -> Union[List[Enqueued], Awaitable[List[Enqueued]]]:
    """Stores many pull rows with one statement; returns one :class:`Enqueued` per message,
    in order (a repeat key within the call is a duplicate of the first)."""
    return _enqueue(db, messages, False)
