// Command enqueue-go times enqueue-in-the-application's-transaction for the Go side of
// benchmarks/enqueue/run.sh: QueueBox's Go wrapper (clients/go, cgo over libqueuebox) and
// River (InsertTx / InsertManyTx), both on one pgx v5 connection, so the driver is the same.
//
//	enqueue-go SYSTEM URL ROWS_PER_TX TXS     SYSTEM: queuebox-go | river
//	enqueue-go river-migrate URL 0 0           (River's schema, by rivermigrate)
//
// Prints one JSON line. The timer boundary is the same in every program of run.sh: the
// connection is open and two transactions of the same shape have run and rolled back
// (statements prepared, caches warm) before the clock starts; it stops when the last COMMIT
// has returned. Each transaction is BEGIN, one enqueue call of ROWS_PER_TX rows, COMMIT.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

type benchArgs struct {
	N int64 `json:"n"`
}

func (benchArgs) Kind() string { return "bench" }

// enqueueFn enqueues rows rows in tx, numbering payloads from first.
type enqueueFn func(ctx context.Context, tx pgx.Tx, first int64, rows int) error

func queueboxGo() enqueueFn {
	return func(ctx context.Context, tx pgx.Tx, first int64, rows int) error {
		if rows == 1 {
			_, err := queuebox.Enqueue(ctx, tx, "bench", benchArgs{N: first})
			return err
		}
		msgs := make([]queuebox.EnqueueMessage, rows)
		for i := range msgs {
			msgs[i] = queuebox.NewEnqueueMessage("bench", benchArgs{N: first + int64(i)})
		}
		_, err := queuebox.EnqueueMany(ctx, tx, msgs)
		return err
	}
}

func riverFn(client *river.Client[pgx.Tx]) enqueueFn {
	return func(ctx context.Context, tx pgx.Tx, first int64, rows int) error {
		if rows == 1 {
			_, err := client.InsertTx(ctx, tx, benchArgs{N: first}, nil)
			return err
		}
		params := make([]river.InsertManyParams, rows)
		for i := range params {
			params[i] = river.InsertManyParams{Args: benchArgs{N: first + int64(i)}}
		}
		_, err := client.InsertManyTx(ctx, tx, params)
		return err
	}
}

func riverMigrate(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "enqueue-go:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 {
		fail(fmt.Errorf("usage: enqueue-go queuebox-go|river URL ROWS_PER_TX TXS"))
	}
	system, url := os.Args[1], os.Args[2]
	ctx := context.Background()
	if system == "river-migrate" {
		if err := riverMigrate(ctx, url); err != nil {
			fail(err)
		}
		return
	}
	rows, err1 := strconv.Atoi(os.Args[3])
	txs, err2 := strconv.Atoi(os.Args[4])
	if err1 != nil || err2 != nil || rows < 1 || txs < 1 {
		fail(fmt.Errorf("ROWS_PER_TX and TXS must be positive integers"))
	}
	// One connection: River's client wants a pool for its driver; a pool of one keeps every
	// transaction on the same session, as the other programs' single connection does.
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		fail(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	var fn enqueueFn
	switch system {
	case "queuebox-go":
		fn = queueboxGo()
	case "river":
		// An insert-only client (no Workers, no queues): River's documented way to insert from
		// a process that does not work jobs.
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
		if err != nil {
			fail(err)
		}
		fn = riverFn(client)
	default:
		fail(fmt.Errorf("unknown system %q", system))
	}
	one := func(first int64, commit bool) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx, first, rows); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if commit {
			return tx.Commit(ctx)
		}
		return tx.Rollback(ctx)
	}
	for i := 0; i < 2; i++ {
		if err := one(0, false); err != nil {
			fail(err)
		}
	}
	t0 := time.Now()
	for i := 0; i < txs; i++ {
		if err := one(int64(i*rows+1), true); err != nil {
			fail(err)
		}
	}
	secs := time.Since(t0).Seconds()
	out, _ := json.Marshal(map[string]any{
		"system": system, "rows_per_tx": rows, "txs": txs, "rows": rows * txs,
		"seconds": secs, "rows_per_s": float64(rows*txs) / secs,
	})
	fmt.Println(string(out))
}
