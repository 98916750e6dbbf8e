"""Issue 19: a handler gets the row's W3C trace context as message.traceparent / tracestate
(the row's own while tracing is off), to continue the trace in its own OpenTelemetry SDK."""

import asyncio
import os

import pytest

from conftest import wait_for
from queuebox_inbox import Database, Worker

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_handler_gets_the_rows_trace_context(database_url):
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        pytest.skip("not run: OTEL_EXPORTER_OTLP_ENDPOINT is set for this process")

    async def go():
        db = await Database.connect(database_url)
        source = "traced"
        await db.execute(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)"
            " VALUES ($1, 't1', '{}', 'pull', $2, 'congo=t61rcWkgMzE'), ($1, 't2', '{}', 'pull', NULL, NULL)",
            [source, TRACEPARENT],
        )
        seen = {}

        async def handler(m, tx):
            seen[m.idempotency_key] = (m.traceparent, m.tracestate)

        stop = asyncio.Event()
        async with Worker(database_url, source, poll_interval_ms=50) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))

            async def both():
                return len(seen) == 2

            await wait_for(both, 20, "2 handled")
            stop.set()
            await t
        await db.close()
        assert seen["t1"] == (TRACEPARENT, "congo=t61rcWkgMzE")
        assert seen["t2"] == (None, None)

    asyncio.run(go())
