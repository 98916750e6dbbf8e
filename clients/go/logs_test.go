package queuebox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// captured is a slog.Handler that keeps every record it is given (at info and above).
type captured struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *captured) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

// find returns the attributes (as strings) of the first record at level whose message
// contains msg, and whether there was one.
func (c *captured) find(level slog.Level, msg string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.records {
		if r.Level == level && strings.Contains(r.Message, msg) {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			return attrs, true
		}
	}
	return nil, false
}

func TestUnreachableDatabaseIsLoggedAtWarnThroughSlog(t *testing.T) {
	logs := &captured{}
	_, err := queuebox.NewWorker(t.Context(), "postgres://qb@127.0.0.1:1/down", queuebox.Options{Source: "go-logs-down", Logger: slog.New(logs)})
	if !errors_Is(err, queuebox.ErrConnect) {
		t.Fatalf("NewWorker against a closed port: %v, want ErrConnect", err)
	}
	attrs, ok := logs.find(slog.LevelWarn, "database is unreachable")
	if !ok {
		t.Fatalf("no warn record about the unreachable database; got %d records", len(logs.records))
	}
	if attrs["source"] != "go-logs-down" || !strings.Contains(attrs["error"], "127.0.0.1:1") || attrs["target"] != "queuebox_core::worker" {
		t.Fatalf("attributes %v", attrs)
	}
}

func TestDeadLetteredMessageIsLoggedWithItsIDAndSource(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "go-logs-dead", 1)
	id := psql(t, url, "SELECT id FROM inbox WHERE source = 'go-logs-dead'")
	logs := &captured{}
	opts := quickOptions("go-logs-dead")
	opts.Logger = slog.New(logs)
	w := newWorker(t, url, opts)
	runUntil(t, w, func(context.Context, *queuebox.Message, *queuebox.Tx) error {
		return queuebox.Dead("poison pill")
	}, "the dead-letter record", func() bool {
		_, ok := logs.find(slog.LevelWarn, "dead-lettered")
		return ok
	})
	attrs, _ := logs.find(slog.LevelWarn, "dead-lettered")
	if attrs["message_id"] != id || attrs["source"] != "go-logs-dead" || attrs["reason"] != "poison pill" {
		t.Fatalf("attributes %v, want message_id %s, source go-logs-dead, reason poison pill", attrs, id)
	}
}

// A failing handler shows at warn, once per attempt that schedules a retry, naming the
// message and the error (at info it was hidden by slog's and most applications' defaults).
func TestFailedHandlerIsLoggedAtWarnOncePerAttempt(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "go-logs-fail", 1)
	id := psql(t, url, "SELECT id FROM inbox WHERE source = 'go-logs-fail'")
	logs := &captured{}
	opts := quickOptions("go-logs-fail")
	opts.Logger = slog.New(logs)
	opts.Retry = queuebox.RetryPolicy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, Jitter: queuebox.NoJitter()}
	w := newWorker(t, url, opts)
	var calls atomic.Int32
	runUntil(t, w, func(context.Context, *queuebox.Message, *queuebox.Tx) error {
		calls.Add(1)
		return errors.New("downstream unavailable")
	}, "the row to be dead", func() bool {
		return psql(t, url, "SELECT state FROM inbox") == "dead"
	})
	// Every call but the last schedules a retry; the last dead-letters the row.
	retried := int(calls.Load()) - 1
	failed := logs.all(slog.LevelWarn, "handler failed; retry scheduled")
	if retried < 2 || len(failed) != retried {
		t.Fatalf("%d warn records of a failed handler after %d retried calls, want one per retried call; records at any level with that message: %v",
			len(failed), retried, logs.all(slog.LevelDebug-4, "handler failed"))
	}
	for i, attrs := range failed {
		if attrs["message_id"] != id || attrs["source"] != "go-logs-fail" || attrs["error"] != "downstream unavailable" || attrs["attempt"] != fmt.Sprint(i+1) {
			t.Errorf("record %d: attributes %v, want message_id %s, source go-logs-fail, error downstream unavailable, attempt %d", i, attrs, id, i+1)
		}
	}
}

// all returns the attributes of every record whose message contains msg: at level, or at
// any level when level is below slog.LevelDebug.
func (c *captured) all(level slog.Level, msg string) []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]string
	for _, r := range c.records {
		if (r.Level == level || level < slog.LevelDebug) && strings.Contains(r.Message, msg) {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			out = append(out, attrs)
		}
	}
	return out
}
