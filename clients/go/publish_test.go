package queuebox_test

// Publish / PublishMany in the application's transaction, on pgx v5 and database/sql,
// against the real PostgreSQL; rows are read back through psql.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// A committed publish is a pending outbox row with the returned id and every option.
func TestPublishCommittedIsAPendingRowWithTheReturnedID(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	tx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	id, err := queuebox.Publish(ctx, tx, "orders.created", map[string]any{"order": 42, "total": 9.5},
		queuebox.WithKey("order-42"), queuebox.WithHeader("x-tenant", "acme"),
		queuebox.WithHeaders(map[string]string{"x-trace": "t1"}), queuebox.WithAggregateType("order"),
		queuebox.WithMaxAttempts(9), queuebox.WithScheduledAt(at))
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := psql(t, url, "SELECT count(*) FROM outbox"); got != "0" {
		t.Fatalf("the row is visible before the commit (%s rows)", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := psql(t, url, `SELECT id || '|' || topic || '|' || key || '|' || aggregate_type || '|' || payload::text || '|' ||
		headers::text || '|' || max_attempts || '|' || state || '|' || attempt || '|' ||
		to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM outbox`)
	want := id + `|orders.created|order-42|order|{"order": 42, "total": 9.5}|{"x-trace": "t1", "x-tenant": "acme"}|9|pending|0|2031-05-06 07:08:09.123456`
	if got != want {
		t.Fatalf("outbox row\n got %s\nwant %s", got, want)
	}
}

// Defaults, and WithDelay counting from the database clock, through database/sql.
func TestPublishThroughDatabaseSQLWithDefaultsAndADelay(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	tx, err := sqlDB(t, url).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := queuebox.Publish(ctx, tx, "t", json.RawMessage(`{"a": [1, 2]}`))
	if err != nil {
		t.Fatal(err)
	}
	later, err := queuebox.Publish(ctx, tx, "t", "text payload", queuebox.WithDelay(90*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := psql(t, url, fmt.Sprintf(`SELECT string_agg(payload::text || ' ' || coalesce(key, '-') || ' ' || headers::text || ' ' || max_attempts || ' ' ||
		(scheduled_at <= now()) || ' ' || (scheduled_at BETWEEN now() + interval '89 minutes' AND now() + interval '91 minutes'),
		',' ORDER BY id = '%s' DESC) FROM outbox WHERE id IN ('%s', '%s')`, plain, plain, later))
	if got != `{"a": [1, 2]} - {} 5 true false,"text payload" - {} 5 false true` {
		t.Fatalf("rows: %s", got)
	}
}

// A rolled-back publish leaves no row, on both drivers.
func TestRolledBackPublishLeavesNoRow(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	ptx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Publish(ctx, ptx, "t", 1); err != nil {
		t.Fatal(err)
	}
	if err := ptx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	stx, err := sqlDB(t, url).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.PublishMany(ctx, stx, []queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1), queuebox.NewOutboxMessage("t", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := psql(t, url, "SELECT count(*) FROM outbox"); got != "0" {
		t.Fatalf("%s rows after the rollbacks", got)
	}
}

// countingTx counts the statements sent through a pgx transaction.
type countingTx struct {
	pgx.Tx
	execs int
}

func (c *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.execs++
	return c.Tx.Exec(ctx, sql, args...)
}

// PublishMany of 10,000 messages is one statement; the ids come back in order.
func TestPublishManyTenThousandRowsInOneStatement(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	tx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]queuebox.OutboxMessage, 10000)
	for i := range msgs {
		msgs[i] = queuebox.NewOutboxMessage("bulk", map[string]int{"n": i}, queuebox.WithKey(fmt.Sprintf("k%d", i%100)))
	}
	counted := &countingTx{Tx: tx}
	started := time.Now()
	ids, err := queuebox.PublishMany(ctx, counted, msgs)
	if err != nil {
		t.Fatalf("PublishMany: %v", err)
	}
	t.Logf("PublishMany of 10,000 rows: %s", time.Since(started))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if counted.execs != 1 || len(ids) != 10000 {
		t.Fatalf("%d statements, %d ids; want 1 statement and 10000 ids", counted.execs, len(ids))
	}
	// Row order (sequence) follows the input; each id is the row holding that input.
	got := psql(t, url, "SELECT count(*) || ' ' || bool_and(payload->>'n' = (r - 1)::text) FROM (SELECT payload, row_number() OVER (ORDER BY sequence) r FROM outbox) o")
	if got != "10000 true" {
		t.Fatalf("rows in order: %s", got)
	}
	for _, i := range []int{0, 1, 4999, 9999} {
		if n := psql(t, url, "SELECT payload->>'n' FROM outbox WHERE id = '"+ids[i]+"'"); n != fmt.Sprint(i) {
			t.Errorf("ids[%d] is the row of message %s", i, n)
		}
	}
}

// Bad input is ErrInvalidInput naming the message and the field, and nothing is inserted.
func TestPublishBadInputNamesTheField(t *testing.T) {
	url := newDB(t)
	ctx := context.Background()
	pool := pgxPool(t, url)
	cases := []struct {
		msgs []queuebox.OutboxMessage
		want string
	}{
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("", 1)}, "messages[0].topic"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage(strings.Repeat("t", 256), 1)}, "messages[0].topic"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", nil)}, "messages[0].payload"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", func() {})}, "messages[0].payload"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1), queuebox.NewOutboxMessage("t", 1, queuebox.WithMaxAttempts(0))}, "messages[1].max_attempts"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1, queuebox.WithKey(strings.Repeat("k", 256)))}, "messages[0].key"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1, queuebox.WithHeader("content-length", "3"))}, "messages[0].headers"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1, queuebox.WithHeader("x-a", "line\nbreak"))}, "messages[0].headers"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1, queuebox.WithDelay(-time.Second))}, "messages[0].delay_ms"},
		{[]queuebox.OutboxMessage{queuebox.NewOutboxMessage("t", 1, queuebox.WithDelay(time.Second), queuebox.WithScheduledAt(time.Now()))}, "messages[0]"},
		{nil, "messages"},
	}
	for _, c := range cases {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = queuebox.PublishMany(ctx, tx, c.msgs)
		if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want ErrInvalidInput naming %s, got %v", c.want, err)
		}
		// The transaction is still usable: nothing was sent.
		if err := tx.Commit(ctx); err != nil {
			t.Errorf("commit after refused input (%s): %v", c.want, err)
		}
	}
	if got := psql(t, url, "SELECT count(*) FROM outbox"); got != "0" {
		t.Fatalf("%s rows inserted from bad input", got)
	}
}

// Publishing from a handler in the application's transaction: the consumed row's
// completion and the published row commit together, or neither does.
func TestConsumeAndPublishInOneApplicationTransaction(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "relay", 2)
	w := newWorker(t, url, quickOptions("relay"))
	handler := func(ctx context.Context, m *queuebox.Message, tx pgx.Tx) error {
		if _, err := queuebox.Publish(ctx, tx, "forwarded", m.Payload, queuebox.WithKey(m.IdempotencyKey)); err != nil {
			return err
		}
		if m.IdempotencyKey == "k2" {
			return queuebox.Dead("k2 is refused after publishing")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunPgx(ctx, pgxPool(t, url), handler) }()
	waitFor(t, 20*time.Second, "both rows decided", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead')") == "2"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := psql(t, url, "SELECT string_agg(key || ':' || payload::text, ',') FROM outbox"); got != `k1:{"n": 1}` {
		t.Fatalf("outbox %q: only the processed row's publish may commit", got)
	}
}
