package queuebox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

var errors_Is = errors.Is

func quickOptions(source string) queuebox.Options {
	return queuebox.Options{Source: source, BatchSize: 10, Concurrency: 4, PollInterval: 50 * time.Millisecond, ShutdownGrace: 2 * time.Second}
}

// runUntil runs w with handler until cond holds, then cancels and waits for Run.
func runUntil(t *testing.T, w *queuebox.Worker, handler queuebox.Handler, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, handler) }()
	waitFor(t, 20*time.Second, what, cond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func newWorker(t *testing.T, url string, opts queuebox.Options) *queuebox.Worker {
	t.Helper()
	w, err := queuebox.NewWorker(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func TestInvalidOptionsNameTheField(t *testing.T) {
	url := newDB(t)
	cases := []struct {
		opts  queuebox.Options
		field string
	}{
		{queuebox.Options{}, "source"},
		{queuebox.Options{Source: "s", BatchSize: -1}, "batchSize"},
		{queuebox.Options{Source: "s", LeaseMS: 100}, "leaseMs"},
		{queuebox.Options{Source: "s", Retry: queuebox.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond}}, "retry.maxDelayMs"},
	}
	for _, c := range cases {
		_, err := queuebox.NewWorker(t.Context(), url, c.opts)
		var qe *queuebox.Error
		if !errors.Is(err, queuebox.ErrConfig) || !errors.As(err, &qe) || qe.Code != c.field {
			t.Errorf("%+v: want ErrConfig naming %s, got %#v", c.opts, c.field, err)
		}
	}
}

func TestUnmigratedDatabaseIsSchemaMissing(t *testing.T) {
	server := serverURL(t)
	_, err := queuebox.NewWorker(t.Context(), server+"/postgres", queuebox.Options{Source: "s"})
	if !errors.Is(err, queuebox.ErrSchemaMissing) {
		t.Fatalf("want ErrSchemaMissing, got %v", err)
	}
	_, err = queuebox.NewWorker(t.Context(), "postgres://postgres:hunter2@127.0.0.1:1/x", queuebox.Options{Source: "s"})
	if !errors.Is(err, queuebox.ErrConnect) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("want ErrConnect without the password, got %v", err)
	}
}

func TestEveryRowIsHandledOnceAndProcessed(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "orders", 60)
	w := newWorker(t, url, quickOptions("orders"))
	var mu sync.Mutex
	calls := map[string]int{}
	var sawPayload atomic.Bool
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		var p struct{ N int }
		if err := m.UnmarshalPayload(&p); err == nil && fmt.Sprintf("k%d", p.N) == m.IdempotencyKey && m.Source == "orders" && m.Attempt == 0 && m.ID != "" {
			sawPayload.Store(true)
		}
		mu.Lock()
		calls[m.IdempotencyKey]++
		mu.Unlock()
		return nil
	}
	runUntil(t, w, handler, "60 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "60"
	})
	if len(calls) != 60 {
		t.Fatalf("handler saw %d distinct rows, want 60", len(calls))
	}
	for k, n := range calls {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
	if !sawPayload.Load() {
		t.Error("the message fields did not match the inserted rows")
	}
	if s := w.Stats(); s.Completed != 60 || s.InFlight != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestHandlerErrorRetriesWithBackoffThenDeadAtMaxAttempts(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "flaky", 1)
	opts := quickOptions("flaky")
	opts.Retry = queuebox.RetryPolicy{MaxAttempts: 2, BaseDelay: 150 * time.Millisecond, MaxDelay: time.Second, Jitter: queuebox.NoJitter()}
	w := newWorker(t, url, opts)
	var mu sync.Mutex
	var at []time.Time
	var attempts []int
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		mu.Lock()
		at = append(at, time.Now())
		attempts = append(attempts, m.Attempt)
		mu.Unlock()
		return errors.New("downstream unavailable")
	}
	runUntil(t, w, handler, "the row to be dead", func() bool {
		return psql(t, url, "SELECT state FROM inbox") == "dead"
	})
	if got := psql(t, url, "SELECT attempt || ' ' || last_error FROM inbox"); got != "2 downstream unavailable" {
		t.Fatalf("dead row: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[0 1 2]" {
		t.Fatalf("deliveries saw attempts %v, want [0 1 2] (max_attempts+1 deliveries)", attempts)
	}
	// Backoff: 150 ms after the first failure, 300 ms after the second (no jitter).
	if g := at[1].Sub(at[0]); g < 140*time.Millisecond {
		t.Errorf("first retry after %s, want >= 150ms", g)
	}
	if g := at[2].Sub(at[1]); g < 290*time.Millisecond {
		t.Errorf("second retry after %s, want >= 300ms", g)
	}
}

func TestRetryAndDeadOutcomesFromTheHandler(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "decide", 2)
	w := newWorker(t, url, quickOptions("decide"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if m.IdempotencyKey == "k1" {
			return queuebox.RetryWithReason(time.Hour, "not yet")
		}
		return queuebox.Dead("poison message")
	}
	runUntil(t, w, handler, "both rows decided", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state <> 'processing' AND attempt + (state = 'dead')::int > 0") == "2"
	})
	got := psql(t, url, "SELECT string_agg(idempotency_key || ':' || state || ':' || attempt || ':' || last_error || ':' || (scheduled_at > now() + interval '50 minutes'), ',' ORDER BY idempotency_key) FROM inbox")
	if got != "k1:pending:1:not yet:true,k2:dead:0:poison message:false" {
		t.Fatalf("rows: %s", got)
	}
}

func TestFailingHandlerLeavesNoBusinessRow(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (key text PRIMARY KEY)")
	insertRows(t, url, "ship", 1)
	w := newWorker(t, url, quickOptions("ship"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO shipments (key) VALUES ($1)", m.IdempotencyKey); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT count(*) AS n FROM shipments")
		if err != nil || fmt.Sprint(rows[0]["n"]) != "1" {
			return fmt.Errorf("own write not visible in the transaction: %v %v", rows, err)
		}
		return errors.New("failed after the write")
	}
	runUntil(t, w, handler, "the failure recorded", func() bool {
		return psql(t, url, "SELECT attempt FROM inbox") == "1"
	})
	if got := psql(t, url, "SELECT count(*) FROM shipments"); got != "0" {
		t.Fatalf("a failed handler left %s business rows", got)
	}
	if got := psql(t, url, "SELECT state || ' ' || last_error FROM inbox"); got != "pending failed after the write" {
		t.Fatalf("row: %s", got)
	}
}

func TestSucceedingHandlerCommitsBusinessRowWithCompletion(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (key text PRIMARY KEY, n bigint, meta jsonb)")
	insertRows(t, url, "ship", 3)
	w := newWorker(t, url, quickOptions("ship"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		var p struct{ N int64 }
		_ = m.UnmarshalPayload(&p)
		_, err := tx.Exec(ctx, "INSERT INTO shipments (key, n, meta) VALUES ($1, $2, $3)", m.IdempotencyKey, p.N, map[string]any{"id": m.ID})
		return err
	}
	runUntil(t, w, handler, "3 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "3"
	})
	got := psql(t, url, "SELECT string_agg(s.key || ':' || s.n || ':' || (s.meta->>'id' = i.id::text), ',' ORDER BY s.key) FROM shipments s JOIN inbox i ON i.idempotency_key = s.key")
	if got != "k1:1:true,k2:2:true,k3:3:true" {
		t.Fatalf("business rows: %s", got)
	}
}

func TestCancellingTheContextStopsTheWorkerAndInFlightRowsAreNotCompleted(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE effects (key text)")
	insertRows(t, url, "slow", 3)
	opts := quickOptions("slow")
	opts.BatchSize, opts.Concurrency, opts.ShutdownGrace = 3, 1, 300*time.Millisecond
	w := newWorker(t, url, opts)
	started := make(chan struct{}, 3)
	var handlerCtxCancelled atomic.Bool
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", m.IdempotencyKey); err != nil {
			return err
		}
		started <- struct{}{}
		select {
		case <-ctx.Done():
			handlerCtxCancelled.Store(true)
		case <-time.After(20 * time.Second):
		}
		return nil // asks to complete; a cancelled row must be abandoned anyway
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, handler) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never started")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the grace")
	}
	if !handlerCtxCancelled.Load() {
		t.Error("the handler's context was not cancelled after the grace")
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'"); got != "0" {
		t.Fatalf("%s rows completed after cancellation", got)
	}
	if got := psql(t, url, "SELECT string_agg(state, ',' ORDER BY idempotency_key) FROM inbox"); got != "processing,pending,pending" {
		t.Fatalf("states %s: the running row keeps its lease (abandoned), unstarted rows are released", got)
	}
	if got := psql(t, url, "SELECT count(*) FROM effects"); got != "0" {
		t.Fatalf("abandoned handler's write committed (%s rows)", got)
	}
	if len(started) != 0 {
		t.Error("a second handler started after the stop")
	}
}

func TestLostLeaseCancelsTheHandlerAndNothingIsWritten(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "lease", 1)
	opts := quickOptions("lease")
	opts.Lease = 600 * time.Millisecond
	w := newWorker(t, url, opts)
	var cancelled atomic.Bool
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		// Another party takes the row: the next renewal matches nothing.
		psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid()")
		select {
		case <-ctx.Done():
			cancelled.Store(true)
		case <-time.After(10 * time.Second):
		}
		return nil
	}
	runUntil(t, w, handler, "the lease loss", func() bool { return cancelled.Load() && w.Stats().InFlight == 0 })
	if s := w.Stats(); s.ClaimsLost != 1 || s.Completed != 0 {
		t.Fatalf("stats %+v", s)
	}
	if got := psql(t, url, "SELECT state || ' ' || attempt FROM inbox"); got != "processing 0" {
		t.Fatalf("row %s: nothing may be written after a lost lease", got)
	}
}

func TestPanickingHandlerBecomesARetry(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "panic", 1)
	w := newWorker(t, url, quickOptions("panic"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error { panic("kaboom") }
	runUntil(t, w, handler, "the retry", func() bool { return psql(t, url, "SELECT attempt FROM inbox") == "1" })
	if got := psql(t, url, "SELECT last_error FROM inbox"); got != "handler panicked: kaboom" {
		t.Fatalf("last_error %q", got)
	}
}

func TestErrorsMatchBySentinel(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &queuebox.Error{Kind: queuebox.KindClaimLost, Message: "claim lost on inbox row x"})
	if !errors.Is(err, queuebox.ErrClaimLost) || errors.Is(err, queuebox.ErrCancelled) {
		t.Fatal("errors.Is must match by kind")
	}
	if err := (&queuebox.Worker{}).Run(context.Background(), nil); !errors.Is(err, queuebox.ErrInvalidInput) {
		t.Fatalf("nil handler: %v", err)
	}
}
