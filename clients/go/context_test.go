package queuebox_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// silentServer accepts TCP connections on 127.0.0.1 and never answers: a database that
// hangs, so a connect waits until its caller gives up.
func silentServer(t *testing.T) (url string, closeAll func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	closeAll = func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
		held = nil
	}
	t.Cleanup(closeAll)
	return "postgres://postgres@" + ln.Addr().String() + "/silent", closeAll
}

// NewWorker and Migrate wait on the network; their ctx bounds that wait. Against a server
// that never answers each returns once ctx's deadline passed, with an error matching both
// ErrCancelled and context.DeadlineExceeded, and the abandoned native call is cleaned up
// once the connection ends.
func TestNewWorkerAndMigrateReturnWhenCtxEnds(t *testing.T) {
	url, closeAll := silentServer(t)
	calls := map[string]func(ctx context.Context) error{
		"NewWorker": func(ctx context.Context) error {
			w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "s"})
			if w != nil {
				w.Close()
			}
			return err
		},
		"Migrate": func(ctx context.Context) error { return queuebox.Migrate(ctx, url) },
	}
	for name, call := range calls {
		const deadline = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		started := time.Now()
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(deadline + 2*time.Second):
			cancel()
			t.Fatalf("%s still waiting 2 s after its ctx's deadline", name)
		}
		cancel()
		took := time.Since(started)
		if took < deadline {
			t.Errorf("%s returned after %s, before its ctx ended: %v", name, took, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, queuebox.ErrCancelled) {
			t.Errorf("%s: want an error matching ErrCancelled and context.DeadlineExceeded, got %v", name, err)
		}
		t.Logf("%s returned %s after its ctx's deadline: %v", name, took-deadline, err)
	}
	if n := queuebox.AbandonedCalls(); n != 2 {
		t.Errorf("want the 2 native calls still running (the server never answered), got %d", n)
	}
	closeAll()
	waitFor(t, 10*time.Second, "the abandoned calls to end once the server hung up", func() bool {
		return queuebox.AbandonedCalls() == 0
	})

	// A ctx that is already done starts nothing.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, call := range calls {
		if err := call(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: want context.Canceled, got %v", name, err)
		}
	}
	if n := queuebox.AbandonedCalls(); n != 0 {
		t.Errorf("a cancelled ctx started %d native calls", n)
	}
}

// Tx's statements take a ctx: a done one refuses the statement before it is sent, so
// nothing of it is written.
func TestTxRefusesAStatementOnADoneCtx(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE effects (k text)")
	insertRows(t, url, "ctxjobs", 1)
	w, err := queuebox.NewWorker(t.Context(), url, quickOptions("ctxjobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var execErr, queryErr error
	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, execErr = tx.Exec(done, "INSERT INTO effects VALUES ($1)", m.IdempotencyKey)
		_, queryErr = tx.Query(done, "SELECT 1 AS one")
		// The handler's own ctx still works in the same transaction.
		_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ('after')")
		stop()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]error{"Exec": execErr, "Query": queryErr} {
		if !errors.Is(e, context.Canceled) || !errors.Is(e, queuebox.ErrCancelled) {
			t.Errorf("%s on a cancelled ctx: want ErrCancelled wrapping context.Canceled, got %v", name, e)
		}
	}
	if got := psql(t, url, "SELECT string_agg(k, ',') FROM effects"); got != "after" {
		t.Errorf("effects: want only the statement of the live ctx (after), got %q", got)
	}
}
