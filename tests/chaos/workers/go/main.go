// The chaos ledger's pull worker in Go, on github.com/alternayte/queuebox/clients/go (cgo over
// libqueuebox, bindings/c): the twin of tests/chaos/worker (Rust). One line per handler call
// on stdout — {"id", "key", "attempt"}, a tab, the payload exactly as the core handed it over
// (json.RawMessage, compacted) — then the row is completed. Stops on SIGTERM.
//
//	queuebox-chaos-worker-go <database-url> <source> <lease-ms>
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: queuebox-chaos-worker-go <database-url> <source> <lease-ms>")
		os.Exit(2)
	}
	leaseMS, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease-ms:", err)
		os.Exit(2)
	}
	w, err := queuebox.NewWorker(context.Background(), os.Args[1], queuebox.Options{
		Source: os.Args[2], BatchSize: 20, Concurrency: 4, LeaseMS: leaseMS,
		PollInterval: 100 * time.Millisecond, ShutdownGrace: 2 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	defer w.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var out sync.Mutex
	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		meta, err := json.Marshal(map[string]any{"id": m.ID, "key": m.IdempotencyKey, "attempt": m.Attempt})
		if err != nil {
			return err
		}
		var payload bytes.Buffer
		if err := json.Compact(&payload, m.Payload); err != nil {
			return err
		}
		// One unbuffered write per line: a line the harness reads is a call that happened.
		out.Lock()
		defer out.Unlock()
		_, err = fmt.Fprintf(os.Stdout, "%s\t%s\n", meta, payload.Bytes())
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}
