"""A handler gets the row's W3C trace context as message.traceparent / tracestate
(the row's own while tracing is off, the core's handle span's with ``otlp_endpoint``), to
continue the trace in its own OpenTelemetry SDK."""

import asyncio
import http.server
import os
import threading

import pytest

from conftest import wait_for
from queuebox_inbox import Database, QueueBoxError, Worker

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
        async with Worker(database_url, source, poll_interval=0.05) as w:
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


class _Collector(http.server.BaseHTTPRequestHandler):
    posts = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf":
            type(self).posts += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_with_otlp_endpoint_the_handler_gets_the_handle_spans_context(database_url):
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"

    async def go():
        db = await Database.connect(database_url)
        source = "spanned"
        await db.execute(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent)"
            " VALUES ($1, 't1', '{}', 'pull', $2)",
            [source, TRACEPARENT],
        )
        seen = []

        async def handler(m, tx):
            seen.append(m.traceparent)

        stop = asyncio.Event()
        async with Worker(database_url, source, poll_interval=0.05, otlp_endpoint=endpoint) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))

            async def handled():
                return len(seen) == 1

            await wait_for(handled, 20, "the row is handled")
            stop.set()
            await t
        await db.close()
        _, trace_id, span_id, _ = seen[0].split("-")
        assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736", seen[0]
        assert span_id != "00f067aa0ba902b7", "the handle span's id, not the row's own"

        # The worker's exporter sends the handle span when the worker closes.
        async def exported():
            return _Collector.posts > 0

        await wait_for(exported, 10, "the handle span reaches the collector")

    try:
        asyncio.run(go())
    finally:
        collector.shutdown()


def test_an_otlp_endpoint_without_a_scheme_is_refused_by_its_python_name():
    with pytest.raises(QueueBoxError) as e:
        Worker("postgres://nobody@127.0.0.1:1/none", "spanned", otlp_endpoint="collector:4318")
    assert e.value.kind == "config" and "`otlp_endpoint`" in str(e.value), str(e.value)
