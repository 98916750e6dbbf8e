/**
 * Handler spans in the application's own OpenTelemetry tracer. When the application
 * registered a tracer provider with `@opentelemetry/api` (the Node SDK's `start()`,
 * `provider.register()`, `trace.setGlobalTracerProvider`), or handed one to the worker
 * (`tracerProvider`), each handler call runs in a `CONSUMER` span `handle <source>` whose
 * parent is the row's W3C trace context (`message.trace`), so the trace of the request that
 * enqueued or relayed the row continues through the handler, and the handler's own spans
 * (database, HTTP) nest under it when the application has a context manager (the Node SDK
 * installs one). A thrown error marks the span as an error. Without `@opentelemetry/api`
 * installed (an optional peer dependency), or with no provider registered when `run` starts,
 * handlers run unwrapped and nothing here costs anything.
 */
import type { Handler, InboxMessage, TracerProviderLike } from "./types.js";

type Api = typeof import("@opentelemetry/api");

async function loadApi(): Promise<Api | undefined> {
  try {
    return await import("@opentelemetry/api");
  } catch {
    return undefined;
  }
}

/** The row's trace context as the parent of the handler's span (the root when it has none). */
function parentContext(api: Api, message: InboxMessage<unknown>) {
  const t = message.trace;
  if (!t) return api.ROOT_CONTEXT;
  // The core stores and hands out only valid traceparents (version-traceid-spanid-flags);
  // isSpanContextValid still guards against an all-zero id.
  const [, traceId, spanId, flags] = t.traceparent.split("-");
  const spanContext = {
    traceId,
    spanId,
    traceFlags: parseInt(flags, 16) & 0xff,
    isRemote: true,
    traceState: t.tracestate ? api.createTraceState(t.tracestate) : undefined,
  };
  return api.isSpanContextValid(spanContext) ? api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext) : api.ROOT_CONTEXT;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v !== null && (typeof v === "object" || typeof v === "function") && typeof (v as PromiseLike<unknown>).then === "function";
}

/**
 * `handler` in a span of `provider`'s tracer, or of the registered global provider; the
 * handler itself when neither is there.
 */
export async function traced(handler: Handler<unknown>, source: string, provider?: TracerProviderLike): Promise<Handler<unknown>> {
  const api = await loadApi();
  if (!api) return handler;
  let tracerProvider = provider as import("@opentelemetry/api").TracerProvider | undefined;
  if (!tracerProvider) {
    const global = api.trace.getTracerProvider();
    // The global is a ProxyTracerProvider; while nothing is registered its delegate is the
    // API's no-op provider, the one a fresh proxy has.
    if (global instanceof api.ProxyTracerProvider && global.getDelegate() === new api.ProxyTracerProvider().getDelegate()) {
      return handler;
    }
    tracerProvider = global;
  }
  const tracer = tracerProvider.getTracer("@alternayte/queuebox-inbox");
  const name = `handle ${source}`;
  return (message, tx, signal) => {
    const parent = parentContext(api, message);
    const span = tracer.startSpan(
      name,
      {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          "messaging.system": "queuebox",
          "messaging.operation": "process",
          "messaging.destination.name": source,
          "messaging.message.id": message.id,
          "queuebox.attempt": message.attempt,
        },
      },
      parent,
    );
    let ended = false;
    const end = (error?: unknown) => {
      if (ended) return;
      ended = true;
      if (error !== undefined) {
        const e = error instanceof Error ? error : new Error(String(error));
        span.recordException(e);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: e.message });
      }
      span.end();
    };
    // A handler cancelled (lease lost, shutdown's grace over) may never settle: its span
    // ends then, as an error.
    signal.addEventListener("abort", () => end(signal.reason ?? new Error("cancelled")), { once: true });
    let returned: unknown;
    try {
      returned = api.context.with(api.trace.setSpan(parent, span), () => handler(message, tx, signal));
    } catch (error) {
      end(error);
      throw error;
    }
    if (!isThenable(returned)) {
      end();
      return returned;
    }
    return Promise.resolve(returned).then(
      (v) => {
        end();
        return v;
      },
      (error: unknown) => {
        end(error);
        throw error;
      },
    );
  };
}
