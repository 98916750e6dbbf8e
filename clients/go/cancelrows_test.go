package queuebox_test

// CancelInbox / CancelOutbox through the native library against the real PostgreSQL: rows
// are inserted and read back through psql, and a real Worker shows what it was handed.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Pending pull rows cancelled by key, aggregate and id are never handed to a worker and are
// "cancelled"; a second cancel cancels nothing and says the row had finished.
func TestCancelInboxTakesPendingRowsOutOfTheWorkersReach(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	psql(t, url, `INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption) VALUES
		('cxl','c1',NULL,'{}','pull'), ('cxl','c2','A','{}','pull'), ('cxl','c3','A','{}','pull'),
		('cxl','c4',NULL,'{}','pull'), ('cxl','c5',NULL,'{}','pull')`)
	expect := func(what string, got queuebox.CancelCounts, err error, want queuebox.CancelCounts) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: got %+v, %v; want %+v", what, got, err, want)
		}
	}
	got, err := queuebox.CancelInbox(ctx, url, queuebox.InboxTarget{Source: "cxl", Key: "c1"})
	expect("by key", got, err, queuebox.CancelCounts{Cancelled: 1})
	got, err = queuebox.CancelInbox(ctx, url, queuebox.InboxTarget{Source: "cxl", Key: "c1"})
	expect("again", got, err, queuebox.CancelCounts{Finished: 1})
	got, err = queuebox.CancelInbox(ctx, url, queuebox.InboxTarget{Source: "cxl", Aggregate: "A"})
	expect("by aggregate", got, err, queuebox.CancelCounts{Cancelled: 2})
	id := psql(t, url, "SELECT id FROM inbox WHERE idempotency_key = 'c4'")
	got, err = queuebox.CancelInbox(ctx, url, queuebox.InboxTarget{ID: id})
	expect("by id", got, err, queuebox.CancelCounts{Cancelled: 1})

	var mu sync.Mutex
	var seen []string
	w := newWorker(t, url, quickOptions("cxl"))
	runUntil(t, w, func(_ context.Context, msg *queuebox.Message, _ *queuebox.Tx) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, msg.IdempotencyKey)
		return nil
	}, "c5 processed", func() bool {
		return psql(t, url, "SELECT state FROM inbox WHERE idempotency_key = 'c5'") == "processed"
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "c5" {
		t.Fatalf("the worker was handed %v, want only c5", seen)
	}
	states := psql(t, url, "SELECT string_agg(idempotency_key || '=' || state || '/' || attempt, ',' ORDER BY idempotency_key) FROM inbox")
	if want := "c1=cancelled/0,c2=cancelled/0,c3=cancelled/0,c4=cancelled/0,c5=processed/0"; states != want {
		t.Fatalf("states\n got %s\nwant %s", states, want)
	}
}

// Pending outbox rows of a key are cancelled; the relay will not deliver them.
func TestCancelOutboxByKeyAndTopic(t *testing.T) {
	url := newDB(t)
	psql(t, url, `INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES
		('t','K','{}', now() + interval '1 hour'), ('t','K','{}', now() + interval '1 hour'), ('u','K','{}', now())`)
	got, err := queuebox.CancelOutbox(context.Background(), url, queuebox.OutboxTarget{Topic: "t", Key: "K"})
	if err != nil || got != (queuebox.CancelCounts{Cancelled: 2}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if s := psql(t, url, "SELECT string_agg(topic || '=' || state, ',' ORDER BY topic, state) FROM outbox"); s != "t=cancelled,t=cancelled,u=pending" {
		t.Fatalf("states %s", s)
	}
}

// A target that names no row is refused naming the missing field, before connecting (the
// URL is unreachable); a done ctx returns ErrCancelled at once.
func TestCancelRefusesATargetThatNamesNoRow(t *testing.T) {
	nowhere := "postgres://postgres@127.0.0.1:1/none"
	ctx := context.Background()
	cases := []struct {
		what  string
		call  func() error
		named string
	}{
		{"inbox, source only", func() error {
			_, err := queuebox.CancelInbox(ctx, nowhere, queuebox.InboxTarget{Source: "s"})
			return err
		}, "id, key or aggregate"},
		{"inbox, key without source", func() error {
			_, err := queuebox.CancelInbox(ctx, nowhere, queuebox.InboxTarget{Key: "k"})
			return err
		}, "source is required"},
		{"outbox, nothing", func() error {
			_, err := queuebox.CancelOutbox(ctx, nowhere, queuebox.OutboxTarget{Topic: "t"})
			return err
		}, "id or key"},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), c.named) {
			t.Errorf("%s: want ErrInvalidInput naming %q, got %v", c.what, c.named, err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := queuebox.CancelInbox(done, nowhere, queuebox.InboxTarget{ID: "x"}); !errors.Is(err, queuebox.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: want ErrCancelled, got %v", err)
	}
}
