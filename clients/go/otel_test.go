package queuebox_test

// Handler spans in the application's own OpenTelemetry tracer, recorded by the real SDK's
// in-memory exporter: a provider given in Options, none at all (no span), and the global
// provider the application set (in a child process of this test binary: the global can be
// set only once and would reach every other test here). The parent is the row's traceparent.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// childEnv names the database a child process of this binary handles with the global provider.
const childEnv = "QB_OTEL_GLOBAL_CHILD_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		os.Exit(globalProviderChild(url))
	}
	os.Exit(m.Run())
}

// spanRows inserts a row with the trace context and one without it (whose handler fails).
func spanRows(t testing.TB, url, source string) {
	psql(t, url, `INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate)
		VALUES ('`+source+`', 'ok', '{}', 'pull', '`+traceparent+`', 'congo=t61rcWkgMzE'),
		       ('`+source+`', 'boom', '{}', 'pull', NULL, NULL)`)
}

// handleTwo runs a worker on both rows; returns the span id found in each handler's ctx
// ("none" without one), by idempotency key.
func handleTwo(ctx context.Context, url string, opts queuebox.Options) (map[string]string, error) {
	w, err := queuebox.NewWorker(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var mu sync.Mutex
	seen := map[string]string{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(runCtx, func(ctx context.Context, m *queuebox.Message, _ *queuebox.Tx) error {
			mu.Lock()
			if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
				seen[m.IdempotencyKey] = sc.SpanID().String()
			} else {
				seen[m.IdempotencyKey] = "none"
			}
			mu.Unlock()
			if m.IdempotencyKey == "boom" {
				return errors.New("boom")
			}
			return nil
		})
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("timed out: %d of 2 rows handled", n)
		}
	}
	stop()
	if err := <-done; err != nil {
		return nil, err
	}
	return seen, nil
}

// spanInfo is what the tests check of a span, the same from this process and from a child.
type spanInfo struct {
	Name, TraceID, SpanID, ParentID, TraceState, StatusDesc string
	Kind                                                    trace.SpanKind
	ParentRemote                                            bool
	Status                                                  codes.Code
	Attrs                                                   map[string]string
}

func infos(stubs tracetest.SpanStubs) []spanInfo {
	out := make([]spanInfo, 0, len(stubs))
	for _, s := range stubs {
		i := spanInfo{
			Name: s.Name, TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(),
			TraceState: s.SpanContext.TraceState().String(), Kind: s.SpanKind, Status: s.Status.Code,
			StatusDesc: s.Status.Description, Attrs: map[string]string{},
		}
		if s.Parent.IsValid() {
			i.ParentID, i.ParentRemote = s.Parent.SpanID().String(), s.Parent.IsRemote()
		}
		for _, a := range s.Attributes {
			i.Attrs[string(a.Key)] = a.Value.Emit()
		}
		out = append(out, i)
	}
	return out
}

// checkSpans asserts the two handler spans and that each was the one in its handler's ctx
// (seen: the span id found in each handler's ctx, by idempotency key).
func checkSpans(t *testing.T, spans []spanInfo, seen map[string]string, source string) {
	t.Helper()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per handler call: %+v", len(spans), spans)
	}
	var ok, boom spanInfo
	for _, s := range spans {
		if s.TraceID == traceID {
			ok = s
		} else {
			boom = s
		}
	}
	if ok.SpanID == "" {
		t.Fatalf("no span continues the row's trace %s: %+v", traceID, spans)
	}
	if ok.Name != "handle "+source || ok.Kind != trace.SpanKindConsumer {
		t.Fatalf("span %q kind %v, want %q consumer", ok.Name, ok.Kind, "handle "+source)
	}
	if ok.ParentID != "00f067aa0ba902b7" || !ok.ParentRemote {
		t.Fatalf("parent %q (remote %v), want the row's span 00f067aa0ba902b7", ok.ParentID, ok.ParentRemote)
	}
	if ok.TraceState != "congo=t61rcWkgMzE" {
		t.Fatalf("tracestate %q", ok.TraceState)
	}
	if ok.Attrs["messaging.destination.name"] != source || ok.Attrs["queuebox.attempt"] != "0" || ok.Attrs["messaging.message.id"] == "" {
		t.Fatalf("attributes %v", ok.Attrs)
	}
	if seen["ok"] != ok.SpanID || seen["boom"] != boom.SpanID {
		t.Fatalf("the handlers' ctx spans %v are not the exported spans %+v", seen, spans)
	}
	if boom.Status != codes.Error || boom.StatusDesc != "boom" {
		t.Fatalf("failed handler's status %v %q", boom.Status, boom.StatusDesc)
	}
	if boom.ParentID != "" {
		t.Fatalf("a row without trace context has parent %s", boom.ParentID)
	}
}

func TestHandlerSpansInTheGivenTracerProvider(t *testing.T) {
	url := newDB(t)
	spanRows(t, url, "otel_given")
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	opts := quickOptions("otel_given")
	opts.TracerProvider = tp
	seen, err := handleTwo(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, infos(exporter.GetSpans()), seen, "otel_given")
}

func TestNoTracerProviderNoSpan(t *testing.T) {
	url := newDB(t)
	spanRows(t, url, "otel_none")
	seen, err := handleTwo(t.Context(), url, quickOptions("otel_none"))
	if err != nil {
		t.Fatal(err)
	}
	if seen["ok"] != "none" || seen["boom"] != "none" {
		t.Fatalf("spans %v in the handlers' ctx with no provider set", seen)
	}
}

func TestHandlerSpansInTheGlobalTracerProvider(t *testing.T) {
	url := newDB(t)
	spanRows(t, url, "otel_global")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got struct {
		Spans []spanInfo
		Seen  map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	checkSpans(t, got.Spans, got.Seen, "otel_global")
}

// globalProviderChild sets the global provider as an application does, handles the two rows
// of "otel_global" and prints the spans and the handlers' span contexts as JSON.
func globalProviderChild(url string) int {
	exporter := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter)))
	seen, err := handleTwo(context.Background(), url, quickOptions("otel_global"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"Spans": infos(exporter.GetSpans()), "Seen": seen}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
