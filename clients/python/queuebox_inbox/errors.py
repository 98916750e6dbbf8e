"""Typed errors of the QueueBox core, and the two exceptions a handler raises.

The error classes are defined by the native extension (bindings/python), one per kind of
the core's error-kind table (``queuebox_core::ErrorKind``, proto-docs/error-kinds.json), all
subclasses of :class:`QueueBoxError` with the kind's name as ``kind``. The extension raises
them directly; nothing here parses a message.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Dict, Optional, Type

from . import _native
from ._durations import Duration, pick_ms

QueueBoxError: Type[Exception] = _native.QueueBoxError
ClaimLost: Type[Exception] = _native.ClaimLost
ConnectError: Type[Exception] = _native.ConnectError
SchemaMissing: Type[Exception] = _native.SchemaMissing
MigrationError: Type[Exception] = _native.MigrationError
DatabaseError: Type[Exception] = _native.DatabaseError
ConfigError: Type[Exception] = _native.ConfigError
InvalidInput: Type[Exception] = _native.InvalidInput
AlreadyFinished: Type[Exception] = _native.AlreadyFinished
Cancelled: Type[Exception] = _native.Cancelled

#: The class of each kind, keyed by the kind's stable name (tests compare it with the core's table).
BY_KIND: Dict[str, Type[Exception]] = {
    cls.kind: cls  # type: ignore[attr-defined]
    for cls in (ClaimLost, ConnectError, SchemaMissing, MigrationError, DatabaseError, ConfigError, InvalidInput, AlreadyFinished, Cancelled)
}

#: Stable kinds of the core, in code order.
KINDS = tuple(BY_KIND)


class Retry(Exception):
    """Raised by a handler to retry its message: after ``delay`` (seconds or a
    ``datetime.timedelta``) when given, otherwise after the retry policy's backoff (dead
    once the attempts are spent). ``delay_ms=`` (milliseconds) is deprecated."""

    def __init__(self, reason: str = "retry requested by the handler", *, delay: Optional[Duration] = None, delay_ms: Optional[float] = None) -> None:
        super().__init__(reason)
        if delay_ms is not None and not (isinstance(delay_ms, (int, float)) and delay_ms >= 0 and delay_ms != float("inf")):
            raise InvalidInput(f"invalid input: `delay_ms` must be a finite number >= 0, got {delay_ms!r}")
        ms = pick_ms("delay", delay, "delay_ms", None if delay_ms is None else int(round(delay_ms)), InvalidInput)
        self.reason = reason
        #: The delay in whole milliseconds, as the core takes it (None: the retry policy's).
        self._ms: Optional[int] = ms

    @property
    def delay(self) -> Optional[timedelta]:
        return None if self._ms is None else timedelta(milliseconds=self._ms)

    @property
    def delay_ms(self) -> Optional[int]:
        warnings.warn("`Retry.delay_ms` is deprecated: read `delay` (a timedelta)", DeprecationWarning, stacklevel=2)
        return self._ms


class Dead(Exception):
    """Raised by a handler to dead-letter its message at once with ``reason``."""

    def __init__(self, reason: str = "dead-lettered by the handler") -> None:
        super().__init__(reason)
        self.reason = reason
