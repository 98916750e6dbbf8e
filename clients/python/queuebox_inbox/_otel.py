"""Spans in the application's own OpenTelemetry tracer: when the application configured a
tracer provider (``opentelemetry.trace.set_tracer_provider``), or handed one to the worker
(``tracer_provider=``), each handler call runs in a ``CONSUMER`` span ``handle <source>``
whose parent is the row's W3C trace context (``message.traceparent``), so the trace of the
request that enqueued or relayed the row continues through the handler, and the handler's
own spans (database, HTTP) nest under it. An exception marks the span as an error. Without
``opentelemetry-api`` installed, or with no provider configured, handlers run unwrapped and
nothing here costs anything."""

from __future__ import annotations

import inspect
from typing import Any, Callable


def traced(handler: Callable[..., Any], source: str, provider: Any = None) -> Callable[..., Any]:
    try:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return handler
    if provider is None:
        provider = trace.get_tracer_provider()
        # The API's own placeholders: the application configured nothing.
        if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
            return handler
    tracer = provider.get_tracer("queuebox_inbox")
    propagator = TraceContextTextMapPropagator()
    name = f"handle {source}"

    def span(message: Any) -> Any:
        carrier = {}
        if message.traceparent:
            carrier["traceparent"] = message.traceparent
            if message.tracestate:
                carrier["tracestate"] = message.tracestate
        return tracer.start_as_current_span(
            name,
            context=propagator.extract(carrier),
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "queuebox",
                "messaging.operation": "process",
                "messaging.destination.name": source,
                "messaging.message.id": message.id,
                "queuebox.attempt": message.attempt,
            },
        )

    if inspect.iscoroutinefunction(handler):

        async def run_async(message: Any, tx: Any) -> Any:
            with span(message):
                return await handler(message, tx)

        return run_async

    def run(message: Any, tx: Any) -> Any:
        # A plain function: the span is current on the thread that calls it (the loop's, or
        # run_blocking's worker thread).
        with span(message):
            return handler(message, tx)

    return run
