// Command river is River's adapter of benchmarks/peers/run.sh: river.Client with the
// riverpgxv5 driver, default settings (LISTEN/NOTIFY, FetchCooldown 100 ms, FetchPollInterval
// 1 s, async completer) and MaxWorkers = concurrency on the default queue; pgx pool of 40
// (pgxpool's default, max(4, CPUs), would starve 32 workers), every connection opened in
// Prepare, before a drain's clock. River fetches at most once per FetchCooldown (its docs:
// "throughput is limited by this value"); RIVER_FETCH_COOLDOWN_MS and RIVER_FETCH_POLL_MS
// override FetchCooldown and FetchPollInterval (harness.py's "river-tuned": 1 ms, River's
// minimum, and 10 ms).
package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/alternayte/queuebox/benchmarks/peers/river/benchcli"
)

type benchArgs struct {
	N int64   `json:"n"`
	T float64 `json:"t"`
}

func (benchArgs) Kind() string { return "bench" }

type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	h func(context.Context, benchcli.Payload)
}

func (w *benchWorker) Work(ctx context.Context, job *river.Job[benchArgs]) error {
	w.h(ctx, benchcli.Payload{N: job.Args.N, T: job.Args.T})
	return nil
}

type adapter struct {
	pool   *pgxpool.Pool
	insert *river.Client[pgx.Tx]
	work   *river.Client[pgx.Tx]
}

func (a *adapter) Enqueue(ctx context.Context, n int) error {
	for i := 1; i <= n; i += 5000 {
		var batch []river.InsertManyParams
		for k := i; k < i+5000 && k <= n; k++ {
			batch = append(batch, river.InsertManyParams{Args: benchArgs{N: int64(k)}})
		}
		if _, err := a.insert.InsertMany(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

func (a *adapter) EnqueueOne(ctx context.Context, p benchcli.Payload) error {
	_, err := a.insert.Insert(ctx, benchArgs{N: p.N, T: p.T}, nil)
	return err
}

func (a *adapter) Start(ctx context.Context, conc int, h func(context.Context, benchcli.Payload)) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{h: h})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: conc}},
		Workers: workers,
	}
	if ms := os.Getenv("RIVER_FETCH_COOLDOWN_MS"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil {
			return err
		}
		cfg.FetchCooldown = time.Duration(n) * time.Millisecond
	}
	if ms := os.Getenv("RIVER_FETCH_POLL_MS"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil {
			return err
		}
		cfg.FetchPollInterval = time.Duration(n) * time.Millisecond
	}
	// RIVER_RESCUE_AFTER_S (the "river-rescue30s" crash variant): running jobs are rescued after
	// that many seconds (default 1 h); River requires JobTimeout below it (default 1 min).
	if s := os.Getenv("RIVER_RESCUE_AFTER_S"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		cfg.RescueStuckJobsAfter = time.Duration(n) * time.Second
		cfg.JobTimeout = cfg.RescueStuckJobsAfter - 5*time.Second
	}
	c, err := river.NewClient(riverpgxv5.New(a.pool), cfg)
	if err != nil {
		return err
	}
	a.work = c
	return c.Start(ctx)
}

// Prepare opens every connection of the pool (acquired at once, then released).
func (a *adapter) Prepare(ctx context.Context, _ int) error {
	conns := make([]*pgxpool.Conn, 0, a.pool.Config().MaxConns)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for i := int32(0); i < a.pool.Config().MaxConns; i++ {
		c, err := a.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

func (a *adapter) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return a.work.Stop(ctx)
}

func main() {
	benchcli.Main(func(ctx context.Context, url string) (benchcli.Adapter, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = 40
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
		if err != nil {
			return nil, err
		}
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return nil, err
		}
		ins, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
		if err != nil {
			return nil, err
		}
		return &adapter{pool: pool, insert: ins}, nil
	})
}
