package queuebox_test

// Enqueue / EnqueueMany in the application's transaction, on pgx v5 and database/sql,
// against the real PostgreSQL; rows are read back through psql, and claimed by a Worker.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// A committed enqueue is a pending pull row with every option; before the commit and after
// a rollback there is none.
func TestEnqueueIsAPullRowOnlyAfterCommit(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	pool := pgxPool(t, url)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	out, err := queuebox.Enqueue(ctx, tx, "emails", map[string]any{"user": 42},
		queuebox.WithIdempotencyKey("welcome-42"), queuebox.WithPriority(7),
		queuebox.WithAggregateID("user-42"), queuebox.WithHeader("x-tenant", "acme"),
		queuebox.WithMaxAttempts(2), queuebox.WithScheduledAt(at), queuebox.WithEventType("welcome"))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if out.Duplicate || out.ID == "" {
		t.Fatalf("Enqueue: %+v", out)
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox"); got != "0" {
		t.Fatalf("the row is visible before the commit (%s rows)", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := psql(t, url, `SELECT id || '|' || source || '|' || idempotency_key || '|' || consumption || '|' || state || '|' ||
		priority || '|' || aggregate_id || '|' || event_type || '|' || headers::text || '|' || max_attempts || '|' ||
		payload::text || '|' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM inbox`)
	want := out.ID + `|emails|welcome-42|pull|pending|7|user-42|welcome|{"x-tenant": "acme"}|2|{"user": 42}|2031-05-06 07:08:09.123456`
	if got != want {
		t.Fatalf("inbox row\n got %s\nwant %s", got, want)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Enqueue(ctx, tx, "emails", 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox"); got != "1" {
		t.Fatalf("a rolled-back enqueue left a row (%s rows)", got)
	}
}

// A repeated key returns the stored row's id as a duplicate, through database/sql, across
// transactions and within one EnqueueMany; no key is a new row each time.
func TestEnqueueManyReturnsTheStoredIDOfADuplicate(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	db := sqlDB(t, url)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := queuebox.Enqueue(ctx, tx, "jobs", "a", queuebox.WithIdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := queuebox.EnqueueMany(ctx, tx, []queuebox.EnqueueMessage{
		queuebox.NewEnqueueMessage("jobs", "b", queuebox.WithIdempotencyKey("k1")),
		queuebox.NewEnqueueMessage("jobs", "c", queuebox.WithIdempotencyKey("k2")),
		queuebox.NewEnqueueMessage("jobs", "d", queuebox.WithIdempotencyKey("k2")),
		queuebox.NewEnqueueMessage("jobs", "e"),
		queuebox.NewEnqueueMessage("jobs", "f"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if out[0] != (queuebox.Enqueued{ID: first.ID, Duplicate: true}) {
		t.Fatalf("repeat of k1: %+v, want the stored %s", out[0], first.ID)
	}
	if out[1].Duplicate || out[2] != (queuebox.Enqueued{ID: out[1].ID, Duplicate: true}) {
		t.Fatalf("k2 twice in one call: %+v %+v", out[1], out[2])
	}
	if out[3].Duplicate || out[4].Duplicate || out[3].ID == out[4].ID {
		t.Fatalf("keyless rows: %+v %+v", out[3], out[4])
	}
	if got := psql(t, url, "SELECT count(*) FROM inbox"); got != "4" {
		t.Fatalf("%s rows, want 4", got)
	}
}

// Bad input names the message and field, and stores nothing.
func TestEnqueueManyNamesTheBadField(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	tx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = queuebox.EnqueueMany(ctx, tx, []queuebox.EnqueueMessage{
		queuebox.NewEnqueueMessage("jobs", 1),
		queuebox.NewEnqueueMessage("jobs", 2),
		queuebox.NewEnqueueMessage("jobs", 3, queuebox.WithPriority(40000)),
	})
	if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), "messages[2].priority") {
		t.Fatalf("err = %v, want ErrInvalidInput naming messages[2].priority", err)
	}
	_, err = queuebox.Enqueue(ctx, tx, "jobs", 1, queuebox.WithKey("k"))
	if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), "messages[0].key") {
		t.Fatalf("err = %v, want ErrInvalidInput naming messages[0].key (a publish-only option)", err)
	}
	if _, err := queuebox.Enqueue(ctx, struct{}{}, "jobs", 1); !errors.Is(err, queuebox.ErrInvalidInput) {
		t.Fatalf("a tx without Query: %v", err)
	}
}

// A worker claims the enqueued rows highest priority first.
func TestEnqueuedRowsAreHandledByPriority(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	tx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []queuebox.EnqueueMessage
	for i, p := range []int{0, 5, -3, 9, 5} {
		msgs = append(msgs, queuebox.NewEnqueueMessage("prio", i, queuebox.WithPriority(p),
			queuebox.WithIdempotencyKey(string(rune('a'+i)))))
	}
	if _, err := queuebox.EnqueueMany(ctx, tx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// One claim takes all five; one handler at a time handles them in claim order.
	got := psql(t, url, `SELECT string_agg(idempotency_key, ',' ORDER BY -priority, sequence) FROM inbox`)
	if got != "d,b,e,a,c" {
		t.Fatalf("stored priorities give %s", got)
	}
	order := make(chan string, 5)
	w, err := queuebox.NewWorker(t.Context(), url, queuebox.Options{Source: "prio", BatchSize: 5, Concurrency: 1,
		PollInterval: 50 * time.Millisecond, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(runCtx, func(ctx context.Context, msg *queuebox.Message, tx *queuebox.Tx) error {
			order <- msg.IdempotencyKey
			return nil
		})
	}()
	var seen []string
	for len(seen) < 5 {
		select {
		case k := <-order:
			seen = append(seen, k)
		case <-time.After(20 * time.Second):
			t.Fatalf("handled %v only", seen)
		}
	}
	cancel()
	<-done
	if strings.Join(seen, ",") != "d,b,e,a,c" {
		t.Fatalf("handled in order %v, want d,b,e,a,c", seen)
	}
}
