package queuebox_test

// Schedules in a Go worker's options: two workers run the same 200 ms schedule and claim
// its rows; every tick is one row, handled once, none missing. A bad schedule is refused
// naming its field.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

func TestTwoWorkersEnqueueEachTickOfASharedScheduleOnce(t *testing.T) {
	url := newDB(t)
	sched := queuebox.Schedule{Name: "go-tick", Source: "gojobs", Every: 200 * time.Millisecond,
		Payload: map[string]any{"from": "go"}}
	var mu sync.Mutex
	var keys []string
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		w, err := queuebox.NewWorker(t.Context(), url, queuebox.Options{Source: "gojobs",
			PollInterval: 50 * time.Millisecond, ShutdownGrace: 2 * time.Second,
			Schedules: []queuebox.Schedule{sched}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Run(ctx, func(ctx context.Context, msg *queuebox.Message, tx *queuebox.Tx) error {
				mu.Lock()
				keys = append(keys, msg.IdempotencyKey)
				mu.Unlock()
				return nil
			})
		}()
	}
	waitFor(t, 30*time.Second, "10 handled ticks", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(keys) >= 10
	})
	cancel()
	wg.Wait()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("%s handled twice", k)
		}
		seen[k] = true
		if !strings.HasPrefix(k, "schedule:go-tick:") {
			t.Fatalf("key %q", k)
		}
	}
	// One row per tick, none missing: the span of the stored ticks is their count.
	got := psql(t, url, `SELECT count(*) = count(DISTINCT idempotency_key)
		AND (extract(epoch FROM max(t) - min(t)) * 1000)::bigint / 200 + 1 = count(*)
		AND bool_and((extract(epoch FROM t) * 1000)::bigint % 200 = 0)
		FROM (SELECT idempotency_key, substr(idempotency_key, length('schedule:go-tick:') + 1)::timestamptz AS t
		      FROM inbox WHERE source = 'gojobs') r`)
	if got != "t" {
		t.Fatalf("the stored ticks are not one row per 200 ms tick: %s", psql(t, url,
			`SELECT string_agg(idempotency_key, ' ' ORDER BY idempotency_key) FROM inbox`))
	}
}

func TestABadScheduleIsRefusedNamingItsField(t *testing.T) {
	url := newDB(t)
	_, err := queuebox.NewWorker(t.Context(), url, queuebox.Options{Source: "gojobs", Schedules: []queuebox.Schedule{
		{Name: "ok", Source: "gojobs", Every: time.Second, Payload: 1},
		{Name: "bad", Source: "gojobs", Cron: "0 9 * * *", TimeZone: "Mars/Olympus", Payload: 1}}})
	var qe *queuebox.Error
	if !errors.Is(err, queuebox.ErrConfig) || !errors.As(err, &qe) || qe.Code != "schedules[1].timeZone" {
		t.Fatalf("want ErrConfig naming schedules[1].timeZone, got %#v", err)
	}
}
