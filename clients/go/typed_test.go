package queuebox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

type shipment struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
	Lines []struct {
		Qty int `json:"qty"`
	} `json:"lines"`
}

func (s shipment) Validate() error {
	if s.Total < 0 {
		return errors.New("total: must not be negative")
	}
	return nil
}

// The rows of the typed-payload tests: one payload that decodes into shipment, and four that
// do not, each with what its last_error must name.
var typedRows = []struct{ key, payload, lastError string }{
	{"good", `{"id": "a", "total": 12.5, "lines": [{"qty": 2}], "extra": true}`, ""},
	{"text-total", `{"id": "b", "total": "lots"}`, "payload is not a valid queuebox_test.shipment: field total: expected float64, got a JSON string"},
	{"array", `[1, 2]`, "payload is not a valid queuebox_test.shipment: expected queuebox_test.shipment, got a JSON array"},
	{"nested", `{"id": "d", "total": 1, "lines": [{"qty": 1.5}]}`, "payload is not a valid queuebox_test.shipment: field lines.qty: expected int, got a JSON number 1.5"},
	{"negative", `{"id": "e", "total": -1}`, "payload is not a valid queuebox_test.shipment: total: must not be negative"},
}

// Typed decodes each payload into the handler's type, in every handler form (Run's *Tx,
// RunPgx's pgx.Tx, RunSQL's *sql.Tx): the handler sees only the payload that decodes, and
// each other row is dead at once (no failed attempt counted, no retry) with a last_error naming the
// type and the field.
func TestTypedHandlerDeadLettersAPayloadThatDoesNotDecode(t *testing.T) {
	forms := map[string]func(t *testing.T, ctx context.Context, w *queuebox.Worker, url string, seen func(*queuebox.Job[shipment])) error{
		"Run": func(_ *testing.T, ctx context.Context, w *queuebox.Worker, _ string, seen func(*queuebox.Job[shipment])) error {
			return w.Run(ctx, queuebox.Typed(func(ctx context.Context, job *queuebox.Job[shipment], tx *queuebox.Tx) error {
				seen(job)
				_, err := tx.Exec(ctx, "INSERT INTO shipped (id, total) VALUES ($1, $2)", job.Args.ID, job.Args.Total)
				return err
			}))
		},
		"RunPgx": func(t *testing.T, ctx context.Context, w *queuebox.Worker, url string, seen func(*queuebox.Job[shipment])) error {
			return w.RunPgx(ctx, pgxPool(t, url), queuebox.Typed(func(ctx context.Context, job *queuebox.Job[shipment], tx pgx.Tx) error {
				seen(job)
				_, err := tx.Exec(ctx, "INSERT INTO shipped (id, total) VALUES ($1, $2)", job.Args.ID, job.Args.Total)
				return err
			}))
		},
		"RunSQL": func(t *testing.T, ctx context.Context, w *queuebox.Worker, url string, seen func(*queuebox.Job[shipment])) error {
			return w.RunSQL(ctx, sqlDB(t, url), queuebox.Typed(func(ctx context.Context, job *queuebox.Job[shipment], tx *sql.Tx) error {
				seen(job)
				_, err := tx.ExecContext(ctx, "INSERT INTO shipped (id, total) VALUES ($1, $2)", job.Args.ID, job.Args.Total)
				return err
			}))
		},
	}
	for name, run := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a database each: three forms in the time of one
			url := newDB(t)
			psql(t, url, "CREATE TABLE shipped (id text, total numeric)")
			for _, r := range typedRows {
				psql(t, url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('typed', '"+r.key+"', '"+r.payload+"', 'pull')")
			}
			w := newWorker(t, url, quickOptions("typed"))
			var mu sync.Mutex
			var jobs []*queuebox.Job[shipment]
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- run(t, ctx, w, url, func(j *queuebox.Job[shipment]) {
					mu.Lock()
					jobs = append(jobs, j)
					mu.Unlock()
				})
			}()
			// A row retried instead of dead-lettered counts too (attempt > 0), so that failure
			// shows at once below instead of as a time-out.
			waitFor(t, 20*time.Second, "every row finished or retried", func() bool {
				return psql(t, url, "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead') OR attempt > 0") == "5"
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].Args.ID != "a" || jobs[0].Args.Total != 12.5 || len(jobs[0].Args.Lines) != 1 || jobs[0].Args.Lines[0].Qty != 2 || jobs[0].IdempotencyKey != "good" {
				t.Fatalf("the handler should see only the good payload, decoded: %+v", jobs)
			}
			if got := psql(t, url, "SELECT id || '=' || total FROM shipped"); got != "a=12.5" {
				t.Errorf("shipped: %q", got)
			}
			for _, r := range typedRows {
				got := psql(t, url, "SELECT state || '|' || attempt || '|' || coalesce(last_error, '') FROM inbox WHERE idempotency_key = '"+r.key+"'")
				want := "processed|0|"
				if r.lastError != "" {
					want = "dead|0|" + r.lastError
				}
				if got != want {
					t.Errorf("row %s: want %q, got %q", r.key, want, got)
				}
			}
		})
	}
}

// DecodePayload is the decoding of Typed for a TaskHandler: a *DeadError that unwraps to
// encoding/json's error, so errors.As finds the field.
func TestDecodePayloadErrorsUnwrap(t *testing.T) {
	m := &queuebox.Message{Payload: json.RawMessage(`{"id": "b", "total": "lots"}`)}
	_, err := queuebox.DecodePayload[shipment](m)
	var dead *queuebox.DeadError
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &dead) || !errors.As(err, &typeErr) || typeErr.Field != "total" {
		t.Fatalf("want a *DeadError wrapping a *json.UnmarshalTypeError on total, got %#v", err)
	}
	if !strings.Contains(dead.Reason, "field total") {
		t.Errorf("reason: %q", dead.Reason)
	}
	// A pointer type decodes too, and names the type it points at.
	p, err := queuebox.DecodePayload[*shipment](&queuebox.Message{Payload: json.RawMessage(`{"id": "a", "total": 1}`)})
	if err != nil || p == nil || p.ID != "a" {
		t.Fatalf("*shipment: %v %+v", err, p)
	}
	if _, err := queuebox.DecodePayload[*shipment](&queuebox.Message{Payload: json.RawMessage(`{"total": -2}`)}); err == nil || !strings.Contains(err.Error(), "valid queuebox_test.shipment: total: must not be negative") {
		t.Errorf("*shipment's Validate: %v", err)
	}
}
