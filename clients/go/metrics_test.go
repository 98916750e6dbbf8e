package queuebox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// After handling real rows, the worker's metrics (kept in the native library) count them,
// in Metrics and through MetricsHandler as a Prometheus scrape sees them.
func TestMetricsCountHandledRows(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "metered", 3)
	w := newWorker(t, url, quickOptions("metered"))
	runUntil(t, w, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error { return nil },
		"three rows processed", func() bool { return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "3" })
	text := w.Metrics()
	for _, want := range []string{
		"queuebox_worker_completed_total{source=\"metered\"} 3\n",
		"queuebox_worker_claimed_total{source=\"metered\"} 3\n",
		"queuebox_worker_handler_duration_seconds_count{source=\"metered\"} 3\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%q not in\n%s", want, text)
		}
	}
	srv := httptest.NewServer(w.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != queuebox.MetricsContentType {
		t.Errorf("content type %q", ct)
	}
	if !strings.Contains(string(body), "queuebox_worker_completed_total{source=\"metered\"} 3\n") {
		t.Errorf("scrape:\n%s", body)
	}
	_ = w.Close()
	if got := w.Metrics(); got != "" {
		t.Errorf("a closed worker's metrics: %q", got)
	}
}
