// Command queuebox-go is the Go wrapper's adapter of benchmarks/peers/run.sh: clients/go
// (cgo over libqueuebox) Worker.Run with default options but Concurrency, so the batch is the
// users' default (the core's hand-out batch); QB_BATCH sets an explicit BatchSize (harness.py's
// queuebox-go-b* systems: the Rust worker's options). The worker is created (and connected)
// in Prepare, before a drain's clock. Rows are inserted with plain SQL through pgx
// (QueueBox's inbox is written by the relay or by the application's own INSERT).
package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/benchmarks/peers/river/benchcli"
	queuebox "github.com/alternayte/queuebox/clients/go"
)

type adapter struct {
	url  string
	pool *pgxpool.Pool
	w    *queuebox.Worker
	stop context.CancelFunc
	done chan error
}

func (a *adapter) Enqueue(ctx context.Context, n int) error {
	_, err := a.pool.Exec(ctx, `INSERT INTO inbox (source, idempotency_key, payload, consumption)
		SELECT 'bench', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $1::int) g`, n)
	return err
}

func (a *adapter) EnqueueOne(ctx context.Context, p benchcli.Payload) error {
	b, _ := json.Marshal(p)
	_, err := a.pool.Exec(ctx, `INSERT INTO inbox (source, idempotency_key, payload, consumption)
		VALUES ('bench', 'l' || $1::bigint, $2::jsonb, 'pull')`, p.N, string(b))
	return err
}

// Prepare creates the worker, which connects to the database.
func (a *adapter) Prepare(ctx context.Context, conc int) error {
	opts := queuebox.Options{Source: "bench", Concurrency: conc}
	if b := os.Getenv("QB_BATCH"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil {
			return err
		}
		opts.BatchSize = n
	}
	w, err := queuebox.NewWorker(ctx, a.url, opts)
	if err != nil {
		return err
	}
	a.w = w
	return nil
}

func (a *adapter) Start(ctx context.Context, conc int, h func(context.Context, benchcli.Payload)) error {
	if a.w == nil {
		if err := a.Prepare(ctx, conc); err != nil {
			return err
		}
	}
	w := a.w
	ctx, a.stop = context.WithCancel(ctx)
	a.done = make(chan error, 1)
	go func() {
		a.done <- w.Run(ctx, func(ctx context.Context, m *queuebox.Message, _ *queuebox.Tx) error {
			var p benchcli.Payload
			if err := m.UnmarshalPayload(&p); err != nil {
				return err
			}
			h(ctx, p)
			return nil
		})
	}()
	return nil
}

func (a *adapter) Stop(context.Context) error {
	a.stop()
	err := <-a.done
	a.w.Close()
	return err
}

func main() {
	benchcli.Main(func(ctx context.Context, url string) (benchcli.Adapter, error) {
		if err := queuebox.Migrate(ctx, url); err != nil {
			return nil, err
		}
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return nil, err
		}
		return &adapter{url: url, pool: pool}, nil
	})
}
