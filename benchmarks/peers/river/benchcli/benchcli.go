// Package benchcli is the CLI shared by the Go adapters of benchmarks/peers/run.sh (same
// contract as every adapter, see ../harness.py):
//
//	drain URL N CONC | latency URL RATE SECS CONC | enqueue URL N | work URL CONC SLEEP_MS LOG
package benchcli

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Payload is every job's payload: its number and, for the latency run, the insert time.
type Payload struct {
	N int64   `json:"n"`
	T float64 `json:"t"`
}

// Preparer is an Adapter that opens its connections before a drain's clock starts.
type Preparer interface {
	Prepare(ctx context.Context, conc int) error
}

// Adapter is one queue system. Start must not block; Stop stops the workers gracefully.
type Adapter interface {
	Enqueue(ctx context.Context, n int) error
	EnqueueOne(ctx context.Context, p Payload) error
	Start(ctx context.Context, conc int, handler func(ctx context.Context, p Payload)) error
	Stop(ctx context.Context) error
}

// NowMs is the wall clock in milliseconds.
func NowMs() float64 { return float64(time.Now().UnixMicro()) / 1000 }

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func atoi(s string) int { n, err := strconv.Atoi(s); must(err); return n }

func pct(v []float64, q float64) float64 { return v[int(float64(len(v)-1)*q+0.5)] }

func emit(v any) { b, _ := json.Marshal(v); fmt.Println(string(b)) }

// Main runs the mode named on the command line against the adapter setup returns.
func Main(setup func(ctx context.Context, url string) (Adapter, error)) {
	ctx := context.Background()
	a := os.Args[1:]
	ad, err := setup(ctx, a[1])
	must(err)
	switch a[0] {
	case "enqueue":
		must(ad.Enqueue(ctx, atoi(a[2])))
	case "drain":
		n, conc := atoi(a[2]), atoi(a[3])
		// With PEERS_PREENQUEUED the harness has inserted the rows (`enqueue`) and run VACUUM
		// ANALYZE; the clock starts once the adapter's connections are open.
		if os.Getenv("PEERS_PREENQUEUED") == "" {
			must(ad.Enqueue(ctx, n))
		}
		if p, ok := ad.(Preparer); ok {
			must(p.Prepare(ctx, conc))
		}
		var done atomic.Int64
		all := make(chan time.Time, 1)
		t0 := time.Now()
		must(ad.Start(ctx, conc, func(context.Context, Payload) {
			if done.Add(1) == int64(n) {
				all <- time.Now()
			}
		}))
		t1 := <-all
		secs := t1.Sub(t0).Seconds()
		must(ad.Stop(ctx))
		emit(map[string]any{"rows_per_s": float64(n) / secs, "seconds": secs, "handled": done.Load()})
	case "latency":
		rate, secs, conc := float64(atoi(a[2])), float64(atoi(a[3])), atoi(a[4])
		total := int(rate * secs)
		var mu sync.Mutex
		var lat []float64
		must(ad.Start(ctx, conc, func(_ context.Context, p Payload) {
			d := NowMs() - p.T
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}))
		time.Sleep(time.Second)
		t0 := time.Now()
		for i := 0; i < total; i++ {
			time.Sleep(time.Until(t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			must(ad.EnqueueOne(ctx, Payload{N: int64(i), T: NowMs()}))
		}
		offered := float64(total) / time.Since(t0).Seconds()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			k := len(lat)
			mu.Unlock()
			if k >= total {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		must(ad.Stop(ctx))
		mu.Lock()
		v := append([]float64(nil), lat...)
		mu.Unlock()
		sort.Float64s(v)
		emit(map[string]any{"n": len(v), "expected": total, "offered_per_s": offered, "p50": pct(v, 0.5), "p95": pct(v, 0.95), "p99": pct(v, 0.99), "max": v[len(v)-1]})
	case "work":
		conc, sleepMs := atoi(a[2]), atoi(a[3])
		f, err := os.OpenFile(a[4], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		must(err)
		must(ad.Start(ctx, conc, func(ctx context.Context, p Payload) {
			fmt.Fprintf(f, "S %d %.1f\n", p.N, NowMs())
			time.Sleep(time.Duration(sleepMs) * time.Millisecond)
			fmt.Fprintf(f, "D %d %.1f\n", p.N, NowMs())
		}))
		select {}
	default:
		log.Fatalf("unknown mode %s", a[0])
	}
}
