// Command orders is the README example: a pull worker that records every order message
// in the same transaction that marks it processed. Run it with
//
//	QUEUEBOX_DATABASE_URL=postgres://localhost/app go run ./examples/orders
//
// (after `queuebox migrate` and `CREATE TABLE orders_seen (id uuid PRIMARY KEY, total numeric)`).
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

type order struct {
	Total float64 `json:"total"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("QUEUEBOX_DATABASE_URL")
	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{
		Source:        "orders",
		BatchSize:     20,
		Concurrency:   4,
		Lease:         30 * time.Second,
		ShutdownGrace: 10 * time.Second,
		Retry:         queuebox.RetryPolicy{MaxAttempts: 8, BaseDelay: 2 * time.Second},
	})
	if err != nil {
		log.Fatalf("worker: %v", err)
	}
	defer w.Close()

	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		var o order
		if err := m.UnmarshalPayload(&o); err != nil {
			return queuebox.Dead("payload is not an order: " + err.Error())
		}
		if o.Total < 0 {
			return queuebox.Dead("negative total")
		}
		// Committed together with the processed mark, or not at all.
		_, err := tx.Exec(ctx, "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)", m.ID, o.Total)
		return err
	})
	if errors.Is(err, queuebox.ErrSchemaMissing) {
		log.Fatal("run `queuebox migrate --database-url ...` first")
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("stopped: %+v", w.Stats())
}
