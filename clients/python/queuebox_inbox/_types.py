"""Messages, options and results as the handler and the caller see them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
import warnings
from datetime import datetime, timedelta
from typing import Any, Dict, List, Optional, Tuple

from ._durations import Duration, from_ms, pick_ms


@dataclass(frozen=True)
class InboxMessage:
    """A claimed inbox message (never the claim token)."""

    id: str
    source: str
    idempotency_key: str
    aggregate_id: Optional[str]
    event_type: Optional[str]
    payload: Any
    headers: Dict[str, str]
    attempt: int
    """Failed attempts so far (0 on the first delivery)."""
    correlation_id: Optional[str]
    created_at: datetime
    traceparent: Optional[str] = None
    """The W3C traceparent to continue the message's trace from (None when the row has
    none): the row's own, or with OTLP on for the worker (``OTEL_EXPORTER_OTLP_ENDPOINT``)
    the core's ``handle`` span. Extract it with your OpenTelemetry propagator."""
    tracestate: Optional[str] = None

    @staticmethod
    def from_json(text: str) -> "InboxMessage":
        return InboxMessage.from_dict(json.loads(text))

    @staticmethod
    def from_dict(m: Dict[str, Any]) -> "InboxMessage":
        """A message from its JSON object (camelCase names), as the core hands it out."""
        created = m["createdAt"].replace("Z", "+00:00")
        return InboxMessage(
            id=m["id"],
            source=m["source"],
            idempotency_key=m["idempotencyKey"],
            aggregate_id=m.get("aggregateId"),
            event_type=m.get("eventType"),
            payload=m.get("payload"),
            headers=dict(m.get("headers") or {}),
            attempt=int(m["attempt"]),
            correlation_id=m.get("correlationId"),
            created_at=datetime.fromisoformat(_trim_fraction(created)),
            traceparent=(m.get("trace") or {}).get("traceparent"),
            tracestate=(m.get("trace") or {}).get("tracestate"),
        )


def _trim_fraction(ts: str) -> str:
    # Python < 3.11 accepts at most 6 fractional digits.
    if "." not in ts:
        return ts
    head, rest = ts.split(".", 1)
    n = 0
    while n < len(rest) and rest[n].isdigit():
        n += 1
    digits, tail = rest[:n], rest[n:]
    return f"{head}.{digits[:6].ljust(6, '0')}{tail}"


class RetryPolicy:
    """``min(base_delay * 2**attempt, max_delay)`` ± ``jitter``; dead once ``max_attempts``
    failures are spent. Delays are seconds (``int``/``float``) or ``datetime.timedelta``;
    they read back as ``timedelta``. A field left ``None`` takes the core's default (5
    attempts, 1 s, 5 min, 0.2); ``Worker.options.retry`` shows the values in force.

    ``base_delay_ms=`` / ``max_delay_ms=`` (milliseconds) still work and warn
    (``DeprecationWarning``), and so does reading ``base_delay_ms`` / ``max_delay_ms``.
    The delays are keyword-only: ``RetryPolicy(5, 1000, ...)`` meant milliseconds before,
    and read as seconds it would silently wait 1000 times longer, so it is a ``TypeError``."""

    __slots__ = ("max_attempts", "base_delay", "max_delay", "jitter", "_raw")

    max_attempts: Optional[int]
    base_delay: Optional[timedelta]
    max_delay: Optional[timedelta]
    jitter: Optional[float]

    def __init__(
        self,
        max_attempts: Optional[int] = None,
        *,
        base_delay: Optional[Duration] = None,
        max_delay: Optional[Duration] = None,
        jitter: Optional[float] = None,
        base_delay_ms: Optional[int] = None,
        max_delay_ms: Optional[int] = None,
    ) -> None:
        from .errors import ConfigError

        base = pick_ms("retry.base_delay", base_delay, "retry.base_delay_ms", base_delay_ms, ConfigError)
        top = pick_ms("retry.max_delay", max_delay, "retry.max_delay_ms", max_delay_ms, ConfigError)
        object.__setattr__(self, "max_attempts", max_attempts)
        # Kept as the core will read it: whole milliseconds. A non-integer deprecated `_ms`
        # value stays as given so that the core refuses it, naming the field.
        object.__setattr__(self, "base_delay", _as_delta(base))
        object.__setattr__(self, "max_delay", _as_delta(top))
        object.__setattr__(self, "jitter", jitter)
        object.__setattr__(self, "_raw", (base, top))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RetryPolicy is immutable")

    def _key(self) -> Tuple[Any, ...]:
        return (self.max_attempts, self.base_delay, self.max_delay, self.jitter)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryPolicy) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"RetryPolicy(max_attempts={self.max_attempts!r}, base_delay={self.base_delay!r}, max_delay={self.max_delay!r}, jitter={self.jitter!r})"

    @property
    def base_delay_ms(self) -> Optional[int]:
        warnings.warn("`base_delay_ms` is deprecated: read `base_delay` (a timedelta)", DeprecationWarning, stacklevel=2)
        return self._core_ms()[0]

    @property
    def max_delay_ms(self) -> Optional[int]:
        warnings.warn("`max_delay_ms` is deprecated: read `max_delay` (a timedelta)", DeprecationWarning, stacklevel=2)
        return self._core_ms()[1]

    def _core_ms(self) -> Tuple[Any, Any]:
        """The delays in milliseconds as the core takes them (None where unset)."""
        return self._raw  # type: ignore[no-any-return]


def _as_delta(ms: Any) -> Optional[timedelta]:
    return timedelta(milliseconds=ms) if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0 else None


@dataclass(frozen=True)
class ResolvedOptions:
    """The options in force, defaults filled in and validated by the core; durations as
    ``timedelta`` (``lease_ms`` and the other ``*_ms`` names still read, with a
    ``DeprecationWarning``)."""

    source: str
    batch_size: int
    concurrency: int
    lease: timedelta
    poll_interval: timedelta
    shutdown_grace: timedelta
    listen: bool
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def lease_ms(self) -> int:
        return _deprecated_ms("lease", self.lease)

    @property
    def poll_interval_ms(self) -> int:
        return _deprecated_ms("poll_interval", self.poll_interval)

    @property
    def shutdown_grace_ms(self) -> int:
        return _deprecated_ms("shutdown_grace", self.shutdown_grace)

    @staticmethod
    def from_json(text: str) -> "ResolvedOptions":
        o = json.loads(text)
        r = o["retry"]
        return ResolvedOptions(
            source=o["source"],
            batch_size=o["batchSize"],
            concurrency=o["concurrency"],
            lease=from_ms(o["leaseMs"]),
            poll_interval=from_ms(o["pollIntervalMs"]),
            shutdown_grace=from_ms(o["shutdownGraceMs"]),
            listen=o["listen"],
            retry=RetryPolicy(r["maxAttempts"], base_delay=from_ms(r["baseDelayMs"]), max_delay=from_ms(r["maxDelayMs"]), jitter=r["jitter"]),
        )


def _deprecated_ms(name: str, value: timedelta) -> int:
    warnings.warn(f"`{name}_ms` is deprecated: read `{name}` (a timedelta)", DeprecationWarning, stacklevel=3)
    return value // timedelta(milliseconds=1)


@dataclass(frozen=True)
class WorkerStats:
    claimed: int
    completed: int
    retried: int
    dead: int
    released: int
    claims_lost: int
    claim_errors: int

    @staticmethod
    def from_json(text: str) -> "WorkerStats":
        s = json.loads(text)
        return WorkerStats(s["claimed"], s["completed"], s["retried"], s["dead"], s["released"], s["claimsLost"], s["claimErrors"])


Row = Dict[str, Any]
Rows = List[Row]
