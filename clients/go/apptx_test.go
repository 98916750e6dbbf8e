package queuebox_test

// The application owns the transaction: CompleteTx and the RunPgx / RunSQL /
// RunTasks handler forms on pgx v5 and on database/sql (pgx's stdlib driver), against the
// real PostgreSQL. Rows are checked through psql, never through the code under test.

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// pgxPool is the application's own pgx pool on url.
func pgxPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// sqlDB is the application's own database/sql pool on url (pgx's stdlib driver).
func sqlDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// execFunc runs one statement in the handler's transaction, whatever the driver.
type execFunc func(query string, args ...any) error

// bodyFunc is a test handler written once for both drivers.
type bodyFunc func(ctx context.Context, m *queuebox.Message, exec execFunc) error

// driverCase runs a worker with body through one driver's handler form: RunPgx on a pgx
// pool, or RunSQL on a database/sql pool (pgx's stdlib driver).
type driverCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, w *queuebox.Worker, url string, body bodyFunc) error
}

var drivers = []driverCase{
	{"pgx", func(ctx context.Context, t *testing.T, w *queuebox.Worker, url string, body bodyFunc) error {
		return w.RunPgx(ctx, pgxPool(t, url), func(ctx context.Context, m *queuebox.Message, tx pgx.Tx) error {
			return body(ctx, m, func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err })
		})
	}},
	{"database/sql", func(ctx context.Context, t *testing.T, w *queuebox.Worker, url string, body bodyFunc) error {
		return w.RunSQL(ctx, sqlDB(t, url), func(ctx context.Context, m *queuebox.Message, tx *sql.Tx) error {
			return body(ctx, m, func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err })
		})
	}},
}

// runDriverUntil runs the worker through d until cond holds, then stops it.
func runDriverUntil(t *testing.T, d driverCase, w *queuebox.Worker, url string, body bodyFunc, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, t, w, url, body) }()
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

// Item 2 with the application's transaction: the business rows and the completions commit together.
func TestAppTxBusinessWriteAndCompletionCommitTogether(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			url := newDB(t)
			psql(t, url, "CREATE TABLE shipments (id uuid PRIMARY KEY, key text)")
			insertRows(t, url, "ship", 5)
			w := newWorker(t, url, quickOptions("ship"))
			body := func(ctx context.Context, m *queuebox.Message, exec execFunc) error {
				return exec("INSERT INTO shipments (id, key) VALUES ($1, $2)", m.ID, m.IdempotencyKey)
			}
			runDriverUntil(t, d, w, url, body, "5 rows processed", func() bool {
				return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "5"
			})
			got := psql(t, url, "SELECT count(*) || ' ' || count(*) FILTER (WHERE i.state = 'processed' AND i.claim_token IS NULL) FROM shipments s JOIN inbox i USING (id)")
			if got != "5 5" {
				t.Fatalf("shipments joined to processed rows: %s, want 5 5", got)
			}
		})
	}
}

// The completion really is part of the application's transaction: after CompleteTx and
// before the commit, nobody else sees the row processed nor the business row; after the
// commit both are there.
func TestCompleteTxIsInvisibleUntilTheApplicationCommits(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (id uuid PRIMARY KEY)")
	insertRows(t, url, "ship", 1)
	pool := pgxPool(t, url)
	w := newWorker(t, url, quickOptions("ship"))
	var before atomic.Value
	handler := func(ctx context.Context, task *queuebox.Task) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, "INSERT INTO shipments (id) VALUES ($1)", task.Message.ID); err != nil {
			return err
		}
		if err := queuebox.CompleteTx(ctx, tx, task); err != nil {
			return err
		}
		before.Store(psql(t, url, "SELECT state || ' ' || (SELECT count(*) FROM shipments) FROM inbox"))
		return tx.Commit(ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunTasks(ctx, handler) }()
	waitFor(t, 20*time.Second, "the row processed", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := before.Load(); got != "processing 0" {
		t.Fatalf("before the application's commit others saw %q, want \"processing 0\"", got)
	}
	if got := psql(t, url, "SELECT count(*) FROM shipments"); got != "1" {
		t.Fatalf("%s shipments after the commit", got)
	}
}

// Item 3 with the application's transaction: a handler error rolls the business write
// back, and the core retries the row (attempt 1, last_error the handler's error).
func TestAppTxHandlerErrorRollsBackAndTheRowIsRetried(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			url := newDB(t)
			psql(t, url, "CREATE TABLE shipments (id uuid PRIMARY KEY)")
			insertRows(t, url, "ship", 1)
			opts := quickOptions("ship")
			opts.Retry = queuebox.RetryPolicy{BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: queuebox.NoJitter()}
			w := newWorker(t, url, opts)
			body := func(ctx context.Context, m *queuebox.Message, exec execFunc) error {
				if err := exec("INSERT INTO shipments (id) VALUES ($1)", m.ID); err != nil {
					return err
				}
				return errors.New("payment service said no")
			}
			runDriverUntil(t, d, w, url, body, "the retry", func() bool { return psql(t, url, "SELECT attempt FROM inbox") == "1" })
			if got := psql(t, url, "SELECT state || '|' || last_error || '|' || (scheduled_at > now() + interval '50 minutes') FROM inbox"); got != "pending|payment service said no|true" {
				t.Fatalf("row %q", got)
			}
			if got := psql(t, url, "SELECT count(*) FROM shipments"); got != "0" {
				t.Fatalf("a failed handler left %s business rows", got)
			}
		})
	}
}

// A failure after CompleteTx ran (a later statement in the same transaction fails) rolls
// back the completion with the business write, and the core still retries the row.
func TestAFailureAfterCompleteTxRollsTheCompletionBack(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (id uuid PRIMARY KEY)")
	insertRows(t, url, "ship", 1)
	opts := quickOptions("ship")
	opts.Retry = queuebox.RetryPolicy{BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: queuebox.NoJitter()}
	w := newWorker(t, url, opts)
	db := sqlDB(t, url)
	handler := func(ctx context.Context, task *queuebox.Task) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (id) VALUES ($1)", task.Message.ID); err != nil {
			return err
		}
		if err := queuebox.CompleteTx(ctx, tx, task); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO shipments (id) VALUES ($1)", task.Message.ID) // duplicate key
		if err == nil {
			return tx.Commit()
		}
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunTasks(ctx, handler) }()
	waitFor(t, 20*time.Second, "the retry", func() bool { return psql(t, url, "SELECT attempt FROM inbox") == "1" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := psql(t, url, "SELECT state || '|' || (last_error LIKE '%duplicate key%') || '|' || (SELECT count(*) FROM shipments) FROM inbox")
	if got != "pending|true|0" {
		t.Fatalf("row %q, want pending, a duplicate-key last_error and no shipment", got)
	}
}

// Item 4 / the lost lease with the application's transaction: the first worker's lease
// expired and a second worker claimed the row; the first handler's CompleteTx then
// matches no row, returns ErrClaimLost, and its business write rolls back. The second
// worker's completion stands.
func TestAppTxLostLeaseIsErrClaimLostAndTheWriteDisappears(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			url := newDB(t)
			psql(t, url, "CREATE TABLE shipments (worker text)")
			insertRows(t, url, "lease", 1)
			// One task at a time: the first worker claims nothing more while its handler runs.
			single := quickOptions("lease")
			single.BatchSize, single.Concurrency = 1, 1
			first, second := newWorker(t, url, single), newWorker(t, url, quickOptions("lease"))
			var firstCalls atomic.Int32
			firstStarted := make(chan struct{})
			// The first handler stalls (as in a long GC pause or a network partition) until
			// its lease ran out and the second worker holds the row, then completes.
			body := func(ctx context.Context, m *queuebox.Message, exec execFunc) error {
				if firstCalls.Add(1) > 1 {
					return errors.New("the first worker got the row again")
				}
				if err := exec("INSERT INTO shipments VALUES ('first')"); err != nil {
					return err
				}
				close(firstStarted)
				waitFor(t, 10*time.Second, "the second worker's claim", func() bool {
					return psql(t, url, "SELECT count(*) FROM shipments") == "1"
				})
				return nil // the wrapper's CompleteTx now finds the row taken
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			firstDone := make(chan error, 1)
			go func() { firstDone <- d.run(ctx, t, first, url, body) }()
			<-firstStarted
			// Expire the first lease (a lease of milliseconds would be renewed by the
			// first worker), then let the second worker take the row.
			psql(t, url, "UPDATE inbox SET lease_expires_at = now() - interval '1 second'")
			pool := pgxPool(t, url)
			secondDone := make(chan error, 1)
			go func() {
				secondDone <- second.RunTasks(ctx, func(ctx context.Context, task *queuebox.Task) error {
					tx, err := pool.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(context.Background())
					if _, err := tx.Exec(ctx, "INSERT INTO shipments VALUES ('second')"); err != nil {
						return err
					}
					if err := queuebox.CompleteTx(ctx, tx, task); err != nil {
						return err
					}
					return tx.Commit(ctx)
				})
			}()
			waitFor(t, 20*time.Second, "the first worker's lost claim", func() bool { return first.Stats().ClaimsLost == 1 && first.Stats().InFlight == 0 })
			waitFor(t, 20*time.Second, "the second completion", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
			cancel()
			for _, c := range []chan error{firstDone, secondDone} {
				if err := <-c; err != nil {
					t.Fatalf("Run: %v", err)
				}
			}
			if got := psql(t, url, "SELECT string_agg(worker, ',') FROM shipments"); got != "second" {
				t.Fatalf("business rows %q: the first worker's write must roll back", got)
			}
			if got := psql(t, url, "SELECT attempt || ' ' || coalesce(last_error, '-') FROM inbox"); got != "0 -" {
				t.Fatalf("row %q: a lost claim spends no attempt", got)
			}
		})
	}
}

// CompleteTx itself returns the typed ErrClaimLost (errors.Is) when the claim was taken.
func TestCompleteTxReturnsErrClaimLost(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (id uuid)")
	insertRows(t, url, "lost", 1)
	pool := pgxPool(t, url)
	w := newWorker(t, url, quickOptions("lost"))
	errs := make(chan error, 1)
	handler := func(ctx context.Context, task *queuebox.Task) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, "INSERT INTO shipments VALUES ($1)", task.Message.ID); err != nil {
			return err
		}
		psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid()") // another owner
		err = queuebox.CompleteTx(ctx, tx, task)
		errs <- err
		return err
	}
	runUntilTasks(t, w, handler, "the lost claim", func() bool { return len(errs) == 1 && w.Stats().InFlight == 0 })
	err := <-errs
	var qe *queuebox.Error
	if !errors.Is(err, queuebox.ErrClaimLost) || !errors.As(err, &qe) || qe.Kind != queuebox.KindClaimLost {
		t.Fatalf("CompleteTx: want ErrClaimLost, got %v", err)
	}
	if s := w.Stats(); s.ClaimsLost != 1 {
		t.Errorf("stats %+v: the core must count the lost claim", s)
	}
	if got := psql(t, url, "SELECT state || ' ' || attempt || ' ' || (SELECT count(*) FROM shipments) FROM inbox"); got != "processing 0 0" {
		t.Fatalf("row %q", got)
	}
}

// runUntilTasks is runUntil for a TaskHandler.
func runUntilTasks(t *testing.T, w *queuebox.Worker, handler queuebox.TaskHandler, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunTasks(ctx, handler) }()
	waitFor(t, 20*time.Second, what, cond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunTasks: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunTasks did not return after cancel")
	}
}

func TestCompleteTxRefusesWhatIsNotATransaction(t *testing.T) {
	err := queuebox.CompleteTx(context.Background(), nil, nil)
	if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), "task") {
		t.Fatalf("nil task: %v", err)
	}
	_, err = queuebox.Publish(context.Background(), "not a transaction", "t", map[string]int{"n": 1})
	if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), "tx: string") {
		t.Fatalf("a string as tx: %v", err)
	}
	var nilTx *sql.Tx
	_, err = queuebox.Publish(context.Background(), nilTx, "t", map[string]int{"n": 1})
	if !errors.Is(err, queuebox.ErrInvalidInput) || !strings.Contains(err.Error(), "tx: *sql.Tx") {
		t.Fatalf("a nil *sql.Tx: %v", err)
	}
}

// Items 7 and 12 with the application's transaction: a handler whose lease was lost (a
// renewal matched no row) or that outlived the shutdown grace sees its ctx cancelled; its
// transaction rolls back and the row is not completed (abandoned, no attempt spent).
func TestAppTxCancelledHandlerCommitsNothing(t *testing.T) {
	for _, d := range drivers {
		for _, why := range []string{"lost lease", "shutdown grace"} {
			t.Run(d.name+"/"+why, func(t *testing.T) {
				url := newDB(t)
				psql(t, url, "CREATE TABLE effects (id uuid)")
				insertRows(t, url, "cancel", 1)
				opts := quickOptions("cancel")
				opts.BatchSize, opts.Concurrency = 1, 1
				opts.Lease, opts.ShutdownGrace = 600*time.Millisecond, 200*time.Millisecond
				w := newWorker(t, url, opts)
				started := make(chan struct{})
				var cancelled atomic.Bool
				body := func(ctx context.Context, m *queuebox.Message, exec execFunc) error {
					if err := exec("INSERT INTO effects VALUES ($1)", m.ID); err != nil {
						return err
					}
					if why == "lost lease" {
						psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid()")
					}
					close(started)
					select {
					case <-ctx.Done():
						cancelled.Store(true)
					case <-time.After(10 * time.Second):
					}
					return nil // asks to complete: a cancelled task must not be
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- d.run(ctx, t, w, url, body) }()
				<-started
				if why == "lost lease" {
					waitFor(t, 10*time.Second, "the lost lease", func() bool { return cancelled.Load() && w.Stats().InFlight == 0 })
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				if !cancelled.Load() {
					t.Fatal("the handler's ctx was not cancelled")
				}
				if got := psql(t, url, "SELECT state || ' ' || attempt || ' ' || (SELECT count(*) FROM effects) FROM inbox"); got != "processing 0 0" {
					t.Fatalf("row %q: want processing, no attempt spent, no business write", got)
				}
			})
		}
	}
}

// A *Task kept past its handler cannot be completed (its native handle is freed).
func TestCompleteTxAfterTheHandlerReturnedIsAlreadyFinished(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "late", 1)
	w := newWorker(t, url, quickOptions("late"))
	kept := make(chan *queuebox.Task, 1)
	runUntilTasks(t, w, func(ctx context.Context, task *queuebox.Task) error {
		kept <- task
		return nil // the core completes the row itself
	}, "the row processed", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
	tx, err := pgxPool(t, url).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := queuebox.CompleteTx(context.Background(), tx, <-kept); !errors.Is(err, queuebox.ErrAlreadyFinished) {
		t.Fatalf("want ErrAlreadyFinished, got %v", err)
	}
}
