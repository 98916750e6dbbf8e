// Package queuebox is the Go client of QueueBox's inbox pull rows: write a handler, the
// native library (bindings/c, libqueuebox) claims rows, renews their leases, wakes on
// LISTEN/NOTIFY, applies the retry policy and completes each row inside the handler's
// transaction.
//
//	w, err := queuebox.NewWorker(url, queuebox.Options{Source: "orders", Concurrency: 4})
//	if err != nil { ... }
//	defer w.Close()
//	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
//		_, err := tx.Exec("INSERT INTO orders_seen (id) VALUES ($1)", m.ID)
//		return err // nil: the insert and the completion commit together
//	})
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
