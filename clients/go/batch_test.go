package queuebox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// The worker loop takes tasks in batches and sends plain completions back in batches
// (batch.go); these tests pin down that each task of a batch still stands alone.

// A lost claim inside a batch fails only that task's completion; the others complete.
func TestLostClaimInABatchAffectsOnlyThatTask(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "lostbatch", 4)
	opts := quickOptions("lostbatch")
	opts.BatchSize, opts.Concurrency = 4, 4
	w := newWorker(t, url, opts)
	// Every handler waits until all four run at once, so that the four are out together
	// and their completions go back together.
	var started sync.WaitGroup
	started.Add(4)
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if m.IdempotencyKey == "k2" {
			// Another owner takes this row: its completion's fence no longer matches.
			psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid() WHERE idempotency_key = 'k2'")
		}
		started.Done()
		started.Wait()
		return nil
	}
	runUntil(t, w, handler, "three completions and one lost claim", func() bool {
		s := w.Stats()
		return s.Completed == 3 && s.ClaimsLost == 1 && s.InFlight == 0
	})
	got := psql(t, url, "SELECT string_agg(idempotency_key || '=' || state, ',' ORDER BY idempotency_key) FROM inbox")
	if got != "k1=processed,k2=processing,k3=processed,k4=processed" {
		t.Fatalf("rows %s: only k2's completion may be fenced out", got)
	}
}

// Shutdown while part of the claimed rows runs: the rows never handed to a handler go back
// to pending at once (no attempt spent), the running ones finish, and a later worker
// processes the rest: nothing is lost or done twice.
func TestShutdownWithAPartialBatchReleasesTheRestAndLosesNothing(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "partial", 10)
	opts := quickOptions("partial")
	opts.BatchSize, opts.Concurrency = 10, 2
	w := newWorker(t, url, opts)
	var mu sync.Mutex
	seen := map[string]int{}
	release := make(chan struct{})
	running := make(chan struct{}, 10)
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		mu.Lock()
		seen[m.IdempotencyKey]++
		mu.Unlock()
		running <- struct{}{}
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, handler) }()
	for i := 0; i < 2; i++ {
		select {
		case <-running:
		case <-time.After(20 * time.Second):
			t.Fatal("two handlers did not start")
		}
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processing'"); got != "10" {
		t.Fatalf("%s rows processing, want the whole claim of 10", got)
	}
	cancel()
	waitFor(t, 10*time.Second, "the 8 unstarted rows released", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'pending' AND attempt = 0") == "8"
	})
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the running handlers finished")
	}
	if got := psql(t, url, "SELECT count(*) FILTER (WHERE state = 'processed') || ' ' || count(*) FILTER (WHERE state = 'pending') FROM inbox"); got != "2 8" {
		t.Fatalf("processed/pending %s, want 2 8", got)
	}
	if s := w.Stats(); s.Completed != 2 || s.Released != 8 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}

	w2 := newWorker(t, url, opts)
	runUntil(t, w2, handler, "the released rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "10"
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 10 {
		t.Fatalf("%d distinct rows handled, want 10", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
}

// Many batches at high concurrency: every row handled once and processed.
func TestBatchedHandOutAtConcurrency32HandlesEveryRowOnce(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "many", 1000)
	opts := quickOptions("many")
	opts.BatchSize, opts.Concurrency = 64, 32
	w := newWorker(t, url, opts)
	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		mu.Lock()
		seen[m.IdempotencyKey]++
		mu.Unlock()
		return nil
	}
	runUntil(t, w, handler, "1000 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "1000"
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1000 {
		t.Fatalf("%d distinct rows handled, want 1000", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
	if s := w.Stats(); s.Completed != 1000 || s.ClaimsLost != 0 || s.InFlight != 0 {
		t.Errorf("stats %+v", s)
	}
}

// At concurrency 1 (the default) a completion statement that waits does not hold the next
// rows back: the wrapper hands the completion to the core without waiting for the
// statement, the core frees the slot at once and batches what completes meanwhile. Issue
// 21: the wrapper waited for each statement before handing over the next completion, so
// every statement carried one row and the Go worker fell to 0.62x the Rust worker.
func TestAWaitingCompletionDoesNotHoldBackTheNextRowsAtConcurrencyOne(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "slowdone", 3)
	opts := quickOptions("slowdone")
	opts.BatchSize, opts.Concurrency = 10, 1
	w := newWorker(t, url, opts)
	// Another session holds the first handled row's lock, so that row's completion
	// statement waits until the test lets it go.
	pool := pgxPool(t, url)
	lock, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = lock.Rollback(context.Background()) }()
	var mu sync.Mutex
	var handled []string
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		mu.Lock()
		defer mu.Unlock()
		if len(handled) == 0 {
			if _, err := lock.Exec(ctx, "SELECT 1 FROM inbox WHERE id = $1::uuid FOR UPDATE", m.ID); err != nil {
				return err
			}
		}
		handled = append(handled, m.ID)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, handler) }()
	waitFor(t, 10*time.Second, "all three handlers run while the first completion waits", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 3
	})
	if got := psql(t, url, "SELECT state FROM inbox WHERE id = '"+handled[0]+"'"); got != "processing" {
		t.Fatalf("the first row is %s: its completion should still wait for the lock", got)
	}
	if err := lock.Rollback(context.Background()); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	waitFor(t, 10*time.Second, "three completions", func() bool { return w.Stats().Completed == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'"); got != "3" {
		t.Fatalf("%s rows processed, want 3", got)
	}
}

// Run asks the core for tasks only while a handler slot is free (batch.go, slotGate), so
// every outcome has to give its slot back: were one to keep it, the loop would stop asking
// after Concurrency such rows. Here a quarter of the first attempts retry at once and a
// quarter go dead, more than the four slots many times over, and every row still settles.
func TestEveryOutcomeGivesItsSlotBackAtConcurrencyFour(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "outcomes", 40)
	opts := quickOptions("outcomes")
	opts.BatchSize, opts.Concurrency = 8, 4
	w := newWorker(t, url, opts)
	var mu sync.Mutex
	running, most := 0, 0
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		var n int
		fmt.Sscanf(m.IdempotencyKey, "k%d", &n)
		switch {
		case m.Attempt > 0 || n%4 < 2:
			return nil
		case n%4 == 2:
			return queuebox.Retry(0)
		default:
			return queuebox.Dead("a quarter of the rows are dead")
		}
	}
	runUntil(t, w, handler, "every row processed or dead", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead')") == "40"
	})
	if got := psql(t, url, "SELECT count(*) FILTER (WHERE state = 'processed') || ' ' || count(*) FILTER (WHERE state = 'dead') FROM inbox"); got != "30 10" {
		t.Fatalf("processed/dead %s, want 30 10", got)
	}
	if s := w.Stats(); s.Completed != 30 || s.Retried != 10 || s.Dead != 10 || s.InFlight != 0 {
		t.Errorf("stats %+v", s)
	}
	if most > 4 {
		t.Errorf("%d handlers ran at once, more than the 4 slots", most)
	}
}
