"""Typed errors of the QueueBox core, and the two exceptions a handler raises."""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable, Optional, TypeVar

from . import _native

T = TypeVar("T")

#: Stable kinds of the core (``queuebox_core::ErrorKind::as_str``).
KINDS = (
    "claim_lost",
    "connect",
    "schema_missing",
    "migration",
    "database",
    "config",
    "invalid_input",
    "already_finished",
    "cancelled",
)


class QueueBoxError(Exception):
    """An error raised by the QueueBox core; ``kind`` says what a caller can act on."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, message={self.message!r})"


class ClaimLost(QueueBoxError):
    """A fenced write matched no row: the lease expired or another worker owns the row."""

    def __init__(self, message: str) -> None:
        super().__init__("claim_lost", message)


class Retry(Exception):
    """Raised by a handler to retry its message: after ``delay_ms`` when given, otherwise
    after the retry policy's backoff (dead once the attempts are spent)."""

    def __init__(self, reason: str = "retry requested by the handler", *, delay_ms: Optional[float] = None) -> None:
        super().__init__(reason)
        if delay_ms is not None and not (delay_ms >= 0 and delay_ms != float("inf")):
            raise ValueError(f"Retry delay_ms must be a finite number >= 0, got {delay_ms!r}")
        self.reason = reason
        self.delay_ms: Optional[int] = None if delay_ms is None else int(round(delay_ms))


class Dead(Exception):
    """Raised by a handler to dead-letter its message at once with ``reason``."""

    def __init__(self, reason: str = "dead-lettered by the handler") -> None:
        super().__init__(reason)
        self.reason = reason


_TAG = re.compile(r"^\[([a-z_]+)\] (.*)$", re.S)


def from_native(e: BaseException) -> BaseException:
    """Turns ``NativeError("[kind] message")`` into a typed :class:`QueueBoxError`."""
    if not isinstance(e, _native.NativeError):
        return e
    m = _TAG.match(str(e))
    if not m:
        return QueueBoxError("database", str(e))
    kind, message = m.group(1), m.group(2)
    return ClaimLost(message) if kind == "claim_lost" else QueueBoxError(kind, message)


async def call(awaitable: Awaitable[T]) -> T:
    """Awaits a native call, re-raising its error as a typed one."""
    try:
        return await awaitable
    except _native.NativeError as e:
        raise from_native(e) from None


def call_sync(f: Callable[..., T], *args: Any) -> T:
    try:
        return f(*args)
    except _native.NativeError as e:
        raise from_native(e) from None
