package queuebox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

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
	_, err := queuebox.NewWorker("postgres://qb@127.0.0.1:1/down", queuebox.Options{Source: "go-logs-down", Logger: slog.New(logs)})
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
