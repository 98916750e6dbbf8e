"""Messages, options and results as the handler and the caller see them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional


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


@dataclass(frozen=True)
class RetryPolicy:
    """``min(base_delay_ms * 2**attempt, max_delay_ms)`` ± ``jitter``; dead once
    ``max_attempts`` failures are spent. A field left ``None`` takes the core's default
    (5 attempts, 1000 ms, 300000 ms, 0.2); ``Worker.options.retry`` shows the values in force."""

    max_attempts: Optional[int] = None
    base_delay_ms: Optional[int] = None
    max_delay_ms: Optional[int] = None
    jitter: Optional[float] = None


@dataclass(frozen=True)
class ResolvedOptions:
    """The options in force, defaults filled in and validated by the core."""

    source: str
    batch_size: int
    concurrency: int
    lease_ms: int
    poll_interval_ms: int
    shutdown_grace_ms: int
    listen: bool
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @staticmethod
    def from_json(text: str) -> "ResolvedOptions":
        o = json.loads(text)
        r = o["retry"]
        return ResolvedOptions(
            source=o["source"],
            batch_size=o["batchSize"],
            concurrency=o["concurrency"],
            lease_ms=o["leaseMs"],
            poll_interval_ms=o["pollIntervalMs"],
            shutdown_grace_ms=o["shutdownGraceMs"],
            listen=o["listen"],
            retry=RetryPolicy(r["maxAttempts"], r["baseDelayMs"], r["maxDelayMs"], r["jitter"]),
        )


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
