// Package queuebox is the Go client of QueueBox: consume inbox pull rows and publish
// outbox rows inside the application's own database transaction (pgx v5 or database/sql).
// The native library (bindings/c, libqueuebox) claims rows, renews their leases, wakes on
// LISTEN/NOTIFY, applies the retry policy and renders the completion and publish
// statements; this package runs them on the application's connection.
//
//	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "orders", Concurrency: 4})
//	if err != nil { ... }
//	defer w.Close()
//	err = w.RunPgx(ctx, pool, func(ctx context.Context, m *queuebox.Message, tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "INSERT INTO orders_seen (id) VALUES ($1)", m.ID); err != nil {
//			return err
//		}
//		_, err := queuebox.Publish(ctx, tx, "orders.seen", m.Payload)
//		return err // nil: the insert, the publish and the completion commit together
//	})
//
// Files: worker.go (Worker, Run with the library-owned Tx of tx.go), task.go (RunPgx,
// RunSQL, RunTasks: the application-owned transaction), apptx.go (Executor, CompleteTx),
// publish.go (Publish, PublishMany), enqueue.go (Enqueue, EnqueueMany), typed.go (Typed,
// Job[T], DecodePayload: payloads as Go types), message.go, options.go, errors.go, native*.go
// (the only files that call the C ABI). The queueboxprom package registers a worker's
// metrics in the application's Prometheus registry.
//
// Linking: the released module carries the header and a static libqueuebox.a per platform
// (lib/linux_amd64, lib/linux_arm64 when built), picked by cgo build tags, so `go get` and
// `go build` need nothing else than a C compiler (cgo). Inside this repository lib/ is
// absent: build the library with `cargo build -p queuebox-c --release` and point cgo at it,
//
//	CGO_LDFLAGS="-L$REPO/target/release -Wl,-rpath,$REPO/target/release" go build ./...
//
// See clients/go/README.md.
package queuebox
