package queuebox

// Handler spans in the application's own OpenTelemetry tracer. When the application set a
// tracer provider (otel.SetTracerProvider), or handed one to the worker
// (Options.TracerProvider), each handler call runs in a CONSUMER span "handle <source>"
// whose parent is the row's W3C trace context (Message.Trace, read with the W3C
// propagator), so the trace of the request that enqueued or relayed the row continues
// through the handler; the span is in the handler's ctx, so the handler's own spans (pgx,
// net/http) nest under it. A returned error or a panic marks it as an error. With no
// provider set, handlers run unwrapped and nothing here costs anything.

import (
	"context"
	"fmt"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the handler spans.
const tracerName = "github.com/alternayte/queuebox/clients/go"

// globalUnset is the package path of the placeholder otel.GetTracerProvider returns until
// the application calls otel.SetTracerProvider.
const globalUnset = "go.opentelemetry.io/otel/internal/global"

// tracerProvider is the provider whose spans wrap the handlers: the given one, else the
// application's global one, else nil (no provider set).
func tracerProvider(given trace.TracerProvider) trace.TracerProvider {
	if given != nil {
		return given
	}
	tp := otel.GetTracerProvider()
	if t := reflect.TypeOf(tp); t == nil || (t.Kind() == reflect.Pointer && t.Elem().PkgPath() == globalUnset) {
		return nil
	}
	return tp
}

// traced wraps call in a span of tp's tracer per task; call itself when tp is nil.
func traced(tp trace.TracerProvider, source string, call func(context.Context, *Task) error) func(context.Context, *Task) error {
	if tp == nil {
		return call
	}
	tracer := tp.Tracer(tracerName)
	name := "handle " + source
	var w3c propagation.TraceContext
	return func(ctx context.Context, task *Task) (err error) {
		msg := task.Message
		if msg.Trace != nil {
			carrier := propagation.MapCarrier{"traceparent": msg.Trace.Traceparent}
			if msg.Trace.Tracestate != nil {
				carrier["tracestate"] = *msg.Trace.Tracestate
			}
			ctx = w3c.Extract(ctx, carrier)
		}
		ctx, span := tracer.Start(ctx, name,
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", "queuebox"),
				attribute.String("messaging.operation", "process"),
				attribute.String("messaging.destination.name", source),
				attribute.String("messaging.message.id", msg.ID),
				attribute.Int("queuebox.attempt", msg.Attempt),
			))
		defer func() {
			if p := recover(); p != nil {
				span.SetStatus(codes.Error, fmt.Sprintf("handler panicked: %v", p))
				span.End()
				panic(p) // callHandler turns it into the task's failure
			}
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
		return call(ctx, task)
	}
}
