package queuebox_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// How many rows a Go worker holds, seen in the database. Run queues the batches
// the core hands out (a hand-out worker) and reports its handlers' times, so its adaptive
// batch is large (1024) while slow handlers still hold about their slots and fast ones get
// the deep pipeline the loop needs.

type sample struct {
	at   time.Duration
	held int
}

// drainSampling drains rows rows with handlers that sleep handler, sampling the rows in
// processing until all are processed.
func drainSampling(t *testing.T, source string, rows, concurrency int, handler time.Duration) []sample {
	t.Helper()
	url := newDB(t)
	insertRows(t, url, source, rows)
	w := newWorker(t, url, queuebox.Options{Source: source, Concurrency: concurrency, PollInterval: 50 * time.Millisecond,
		Lease: 10 * time.Second, ShutdownGrace: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
			time.Sleep(handler)
			return nil
		})
	}()
	start := time.Now()
	var samples []sample
	for {
		counts := psql(t, url, "SELECT count(*) FILTER (WHERE state = 'processed') || ' ' || count(*) FILTER (WHERE state = 'processing') FROM inbox")
		var processed, processing int
		if _, err := fmt.Sscan(counts, &processed, &processing); err != nil {
			t.Fatalf("counts %q: %v", counts, err)
		}
		if processed == rows {
			break
		}
		if time.Since(start) > 100*time.Second {
			t.Fatalf("drain too slow: %v", samples[max(0, len(samples)-5):])
		}
		samples = append(samples, sample{time.Since(start), processing})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return samples
}

func TestSlowHandlersHoldAboutTheirSlotsNotTheBatch(t *testing.T) {
	samples := drainSampling(t, "prefetch-slow", 60, 4, 200*time.Millisecond)
	// Before any handler has finished (none can within 200 ms): at most max(10, 2 x 4).
	for _, s := range samples {
		if s.at < 200*time.Millisecond && s.held > 10 {
			t.Fatalf("held %d rows cold, batch 1024: %v", s.held, samples)
		}
	}
	// Once the reported 200 ms handlers are measured: 4 running and one or two waiting, with
	// room for slow claims (8) and, in the few ms a batched completion runs beside the next
	// claim, the handlers' finished rows (+4).
	var settled []int
	for _, s := range samples {
		if s.at > 500*time.Millisecond {
			settled = append(settled, s.held)
		}
	}
	sort.Ints(settled)
	if len(settled) < 20 {
		t.Fatalf("too few samples: %v", samples)
	}
	if p90 := settled[len(settled)*9/10]; p90 > 8 {
		t.Fatalf("held %d rows (p90) once measured: %v", p90, samples)
	}
	if most := settled[len(settled)-1]; most > 12 {
		t.Fatalf("held %d rows once measured: %v", most, samples)
	}
	if median := settled[len(settled)/2]; median < 4 {
		t.Fatalf("the 4 handlers were not kept busy (median %d): %v", median, samples)
	}
}

func TestFastHandlersRunAheadFarBeyondTheirSlots(t *testing.T) {
	samples := drainSampling(t, "prefetch-fast", 5000, 4, 0)
	most := 0
	for _, s := range samples {
		most = max(most, s.held)
	}
	if most < 64 {
		t.Fatalf("a no-op worker holds far beyond 2 x 4 rows: held %d", most)
	}
	if most > 2*1024 {
		t.Fatalf("never more than twice the batch: held %d", most)
	}
}
