"""Handler spans in the application's own OpenTelemetry tracer: a provider given to
the worker, and one the application set globally (in a program of its own: the global
provider can be set once per process). The parent is the row's traceparent."""

import asyncio
import secrets
import subprocess
import sys
import textwrap

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import wait_for
from queuebox_inbox import BlockingDatabase, Worker

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def rows(database_url, source):
    with BlockingDatabase.connect(database_url) as db:
        db.execute(
            "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent)"
            " VALUES ($1, 'ok', '{}', 'pull', $2), ($1, 'boom', '{\"boom\": true}', 'pull', NULL)",
            [source, TRACEPARENT],
        )


def test_each_handler_call_is_a_consumer_span_under_the_rows_trace(database_url):
    source = f"otel_{secrets.token_hex(3)}"
    rows(database_url, source)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inner = {}

    async def handler(m, tx):
        from opentelemetry import trace

        inner[m.idempotency_key] = trace.get_current_span().get_span_context().trace_id
        if m.payload.get("boom"):
            raise RuntimeError("boom")

    async def go():
        stop = asyncio.Event()
        w = Worker(database_url, source, poll_interval=0.02, tracer_provider=provider, retry={"max_attempts": 0})
        t = asyncio.ensure_future(w.run(handler, stop=stop))
        await wait_for(lambda: asyncio.sleep(0, len(exporter.get_finished_spans()) == 2), what="two spans")
        stop.set()
        await t

    asyncio.run(go())
    spans = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()}
    by_key = {("ok" if s.parent is not None else "boom"): s for s in spans.values()}
    ok, boom = by_key["ok"], by_key["boom"]
    assert ok.name == f"handle {source}" and ok.kind == SpanKind.CONSUMER
    assert format(ok.context.trace_id, "032x") == TRACE_ID and format(ok.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert inner["ok"] == ok.context.trace_id, "the span is current inside the handler"
    assert boom.status.status_code == StatusCode.ERROR and boom.parent is None
    assert ok.attributes["messaging.destination.name"] == source


def test_the_applications_global_tracer_provider_is_used(database_url):
    source = f"otel_g_{secrets.token_hex(3)}"
    rows(database_url, source)
    program = textwrap.dedent(f"""
        import threading, time
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from queuebox_inbox import Worker
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        w = Worker({database_url!r}, {source!r}, poll_interval=0.02, retry={{"max_attempts": 0}})
        threading.Thread(target=w.run_blocking, args=(lambda m, tx: None,), daemon=True).start()
        deadline = time.monotonic() + 15
        while len(exporter.get_finished_spans()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        w.stop()
        print(sorted(s.name for s in exporter.get_finished_spans()))
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([f"handle {source}"] * 2)
