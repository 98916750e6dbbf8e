package queuebox_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// The examples are compiled by go test and shown by go doc; they need a database, so they
// have no Output comment and do not run.

// Order is an application's payload type.
type Order struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
}

// Validate refuses an order the handler must never see; Typed dead-letters it.
func (o Order) Validate() error {
	if o.Total < 0 {
		return errors.New("total: must not be negative")
	}
	return nil
}

func ExampleMigrate() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := queuebox.Migrate(ctx, os.Getenv("DATABASE_URL")); err != nil {
		log.Fatal(err)
	}
}

func ExampleNewWorker() {
	ctx := context.Background()
	// Gives up connecting after 10 s; the worker then runs until ctx ends.
	connect, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := queuebox.NewWorker(connect, os.Getenv("DATABASE_URL"), queuebox.Options{Source: "orders", Concurrency: 4})
	if errors.Is(err, context.DeadlineExceeded) {
		log.Fatal("the database did not answer within 10 s")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO orders_seen (id) VALUES ($1::uuid)", m.ID)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A typed handler on the application's pgx pool, as River's Worker[T]: job.Args is the
// decoded payload; a payload that is not an Order (or that Order.Validate refuses) is
// dead-lettered without reaching the handler.
func ExampleTyped() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	err = w.RunPgx(ctx, pool, queuebox.Typed(func(ctx context.Context, job *queuebox.Job[Order], tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orders SET paid = true, total = $2 WHERE id = $1", job.Args.ID, job.Args.Total)
		return err
	}))
	if err != nil {
		log.Fatal(err)
	}
}

// In a TaskHandler, where the application begins its own transaction, DecodePayload is
// Typed's decoding: its error dead-letters the row when returned.
func ExampleDecodePayload() {
	handler := func(ctx context.Context, task *queuebox.Task) error {
		order, err := queuebox.DecodePayload[Order](task.Message)
		if err != nil {
			return err
		}
		log.Printf("order %s: %.2f", order.ID, order.Total)
		return nil
	}
	_ = queuebox.TaskHandler(handler)
}

// Publish in the application's pgx transaction: the event exists only if the order does.
func ExamplePublish() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", "o-1", 12.5); err != nil {
		log.Fatal(err)
	}
	id, err := queuebox.Publish(ctx, tx, "orders.created", Order{ID: "o-1", Total: 12.5}, queuebox.WithKey("o-1"))
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("published %s", id)
}

// Enqueue a job for a pull source's workers in the same transaction as the write that
// calls for it; a repeated idempotency key stores nothing.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	job, err := queuebox.Enqueue(ctx, tx, "emails", map[string]any{"user": 42},
		queuebox.WithIdempotencyKey("welcome-42"), queuebox.WithPriority(10))
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("job %s (duplicate: %v)", job.ID, job.Duplicate)
}

// GORM: tx.Statement.ConnPool is the transaction's database/sql handle, so the business
// write, a publish and the row's completion commit together (or roll back together when
// the callback returns an error).
func ExampleCompleteTx_gorm() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	db, err := gorm.Open(postgres.Open(url), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	err = w.RunTasks(ctx, func(ctx context.Context, task *queuebox.Task) error {
		order, err := queuebox.DecodePayload[Order](task.Message)
		if err != nil {
			return err
		}
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE orders SET paid = true WHERE id = ?", order.ID).Error; err != nil {
				return err
			}
			if _, err := queuebox.Publish(ctx, tx.Statement.ConnPool, "orders.paid", order); err != nil {
				return err
			}
			return queuebox.CompleteTx(ctx, tx.Statement.ConnPool, task)
		})
	})
	if err != nil {
		log.Fatal(err)
	}
}

// sqlc: the handle sqlc's Queries take (its DBTX, here a pgx.Tx) is what Publish takes too,
// so queries.WithTx(tx) and the publish share the transaction.
func ExamplePublish_sqlc() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// queries := db.New(pool).WithTx(tx); queries.CreateOrder(ctx, ...)
	if _, err := queuebox.Publish(ctx, tx, "orders.created", Order{ID: "o-2"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// Errors of the package match with errors.Is against its sentinels, and errors.As gives the
// kind, the SQLSTATE or option path, and the library's message.
func ExampleError() {
	_, err := queuebox.NewWorker(context.Background(), os.Getenv("DATABASE_URL"), queuebox.Options{Source: "orders", BatchSize: -1})
	var qerr *queuebox.Error
	switch {
	case errors.Is(err, queuebox.ErrConfig) && errors.As(err, &qerr):
		log.Printf("option %s: %s", qerr.Code, qerr.Message)
	case errors.Is(err, queuebox.ErrSchemaMissing):
		log.Print("run queuebox migrate first")
	case err != nil:
		log.Fatal(err)
	}
}
