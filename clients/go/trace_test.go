package queuebox_test

// A handler gets the row's W3C trace context on Message.Trace, and with OTLP on
// (Options.OTLPEndpoint, or OTEL_EXPORTER_OTLP_ENDPOINT set for the process) the core's
// "handle" span's context instead (same trace id, the handle span's id), so the handler
// continues the trace.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
)

// handledTrace runs a worker on source until its one row is handled; returns Message.Trace.
func handledTrace(t *testing.T, url string, opts queuebox.Options) *queuebox.TraceContext {
	t.Helper()
	psql(t, url, `INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)
		VALUES ('`+opts.Source+`', 't1', '{}', 'pull', '`+traceparent+`', 'congo=t61rcWkgMzE')`)
	var mu sync.Mutex
	var got *queuebox.TraceContext
	var handled atomic.Bool
	w := newWorker(t, url, opts)
	runUntil(t, w, func(ctx context.Context, m *queuebox.Message, _ *queuebox.Tx) error {
		mu.Lock()
		got = m.Trace
		mu.Unlock()
		handled.Store(true)
		return nil
	}, "the row is handled", handled.Load)
	_ = w.Close()
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		t.Fatal("Message.Trace is nil for a row with a traceparent")
	}
	if got.Tracestate == nil || *got.Tracestate != "congo=t61rcWkgMzE" {
		t.Fatalf("tracestate %v", got.Tracestate)
	}
	return got
}

func TestMessageTraceIsTheRowsContext(t *testing.T) {
	if v, ok := os.LookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT"); ok && v != "" {
		t.Skip("not run: OTEL_EXPORTER_OTLP_ENDPOINT is set for this process")
	}
	url := newDB(t)
	if got := handledTrace(t, url, quickOptions("traced")); got.Traceparent != traceparent {
		t.Fatalf("traceparent %q, want the row's %q", got.Traceparent, traceparent)
	}
}

func TestMessageTraceContinuesFromTheHandleSpanWithOTLPOn(t *testing.T) {
	t.Run("OTEL_EXPORTER_OTLP_ENDPOINT", func(t *testing.T) {
		checkHandleSpan(t, func(collector string) queuebox.Options {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
			return quickOptions("spanned")
		})
	})
	t.Run("Options.OTLPEndpoint", func(t *testing.T) {
		checkHandleSpan(t, func(collector string) queuebox.Options {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "") // the option alone turns tracing on
			o := quickOptions("spanned")
			o.OTLPEndpoint = collector
			return o
		})
	})
}

func TestOTLPEndpointIsValidated(t *testing.T) {
	o := quickOptions("spanned")
	o.OTLPEndpoint = "collector:4318"
	_, err := queuebox.NewWorker(t.Context(), newDB(t), o)
	var qe *queuebox.Error
	if !errors.Is(err, queuebox.ErrConfig) || !errors.As(err, &qe) || qe.Code != "otlpEndpoint" {
		t.Fatalf("a URL without a scheme: want ErrConfig naming otlpEndpoint, got %#v", err)
	}
}

// checkHandleSpan: with tracing turned on by options(collector's URL), Message.Trace is the
// handle span's context in the row's trace and the span reaches the collector.
func checkHandleSpan(t *testing.T, options func(collector string) queuebox.Options) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			posts.Add(1)
		}
	}))
	defer collector.Close()
	opts := options(collector.URL)
	url := newDB(t)
	got := handledTrace(t, url, opts)
	parts := strings.Split(got.Traceparent, "-")
	if len(parts) != 4 || parts[1] != traceID {
		t.Fatalf("traceparent %q is not in the row's trace %s", got.Traceparent, traceID)
	}
	if parts[2] == "00f067aa0ba902b7" {
		t.Fatalf("traceparent %q is the row's own, not the handle span's", got.Traceparent)
	}
	// The worker's exporter sends the handle span when the worker closes.
	waitFor(t, 10*time.Second, "the handle span reaches the collector", func() bool { return posts.Load() > 0 })
}
