package queuebox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// relayBinary is the `queuebox` binary 31-go.sh builds (QUEUEBOX_BIN), else the
// workspace's debug build. A missing binary fails the test as NOT RUN.
func relayBinary(t *testing.T) string {
	bin := os.Getenv("QUEUEBOX_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../target/debug/queuebox")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("NOT RUN: the queuebox binary is not built (%s; 31-go.sh builds it): %v", bin, err)
	}
	return bin
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type delivery struct {
	messageID, key, topic string
	body                  []byte
}

// Publish → delivery end to end: rows published in the application's pgx transaction are
// sent by the real relay binary to a real HTTP receiver with X-Message-Id equal to the id
// Publish returned; a rolled-back publish is never delivered.
func TestCommittedPublishIsDeliveredWithItsIDAndARolledBackOneNever(t *testing.T) {
	bin := relayBinary(t)
	url := newDB(t)
	var mu sync.Mutex
	var got []delivery
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Get("X-Message-Id"), r.Header.Get("X-Message-Key"), r.Header.Get("X-Topic"), body})
		mu.Unlock()
	}))
	defer rx.Close()
	config := filepath.Join(t.TempDir(), "queuebox.yaml")
	yaml := fmt.Sprintf(`server:
  httpPort: %d
  bindAddress: 127.0.0.1
  drainTimeoutMs: 2000
database:
  url: %s
  startupTimeoutMs: 60000
outbox:
  pollIntervalMs: 1000
  retryBaseDelayMs: 50
  claimTimeoutMs: 5000
  maxAttempts: 2
  shutdownTimeoutMs: 3000
destinations:
  rx:
    type: http
    baseUrl: %s
    path: /hooks
    timeoutMs: 3000
routes:
  - topicPattern: '**'
    destination: rx
`, freePort(t), url, rx.URL)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	relay := exec.Command(bin, "--config", config, "run")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEUEBOX_") {
			relay.Env = append(relay.Env, kv)
		}
	}
	relay.Env = append(relay.Env, "RUST_LOG=warn")
	var log bytes.Buffer
	relay.Stdout, relay.Stderr = &log, &log
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- relay.Wait() }()
	defer func() {
		_ = relay.Process.Kill()
		<-exited
	}()

	ctx := context.Background()
	pool := pgxPool(t, url)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack, err := queuebox.Publish(ctx, tx, "orders.rolled-back", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := queuebox.Publish(ctx, tx, "orders.created", map[string]int{"n": 2}, queuebox.WithKey("c-7"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committedAt := time.Now()
	delivered := func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the relay exited (%v):\n%s", err, log.String())
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	}
	waitFor(t, 30*time.Second, "the committed row delivered", delivered)
	// The relay wakes on the outbox NOTIFY; its poll interval (1 s) is only the fallback.
	t.Logf("delivered %s after the commit (relay poll interval 1 s)", time.Since(committedAt).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "the sent mark", func() bool {
		return psql(t, url, "SELECT state FROM outbox WHERE id = '"+committed+"'") == "sent"
	})
	time.Sleep(500 * time.Millisecond) // a rolled-back row would have been as due as the committed one
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1 (the rolled-back publish %s must never be sent): %+v", len(got), rolledBack, got)
	}
	d := got[0]
	if d.messageID != committed || d.key != "c-7" || d.topic != "orders.created" {
		t.Fatalf("delivery X-Message-Id %q, X-Message-Key %q, X-Topic %q; want %s, c-7, orders.created", d.messageID, d.key, d.topic, committed)
	}
	var body any
	if err := json.Unmarshal(d.body, &body); err != nil || !reflect.DeepEqual(body, map[string]any{"n": 2.0}) {
		t.Fatalf("body %s", d.body)
	}
}
