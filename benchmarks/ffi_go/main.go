// Command ffi_go is the Go side of benchmarks/ffi_bench.sh: the Go wrapper's Worker.Run
// with a no-op handler over `rows` pull rows of `source`, timed from start until every row
// is processed. Usage: ffi_go <database url> <source> <rows> <batch> <concurrency>
// (batch 0: unset, the core's adaptive batch).
// Prints one line: rows_per_sec=<n> seconds=<s>.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-migrate" {
		if err := queuebox.Migrate(context.Background(), os.Args[2]); err != nil {
			log.Fatal(err)
		}
		return
	}
	rows, _ := strconv.ParseUint(os.Args[3], 10, 64)
	batch, _ := strconv.Atoi(os.Args[4])
	conc, _ := strconv.Atoi(os.Args[5])
	w, err := queuebox.NewWorker(context.Background(), os.Args[1], queuebox.Options{Source: os.Args[2], BatchSize: batch, Concurrency: conc, PollInterval: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started := time.Now()
	go func() {
		for w.Stats().Completed < rows {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	if err := w.Run(ctx, func(context.Context, *queuebox.Message, *queuebox.Tx) error { return nil }); err != nil {
		log.Fatal(err)
	}
	secs := time.Since(started).Seconds()
	fmt.Printf("rows_per_sec=%.1f seconds=%.3f\n", float64(rows)/secs, secs)
}
