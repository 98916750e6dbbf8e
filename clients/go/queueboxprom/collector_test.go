package queueboxprom_test

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/queueboxprom"
)

// psql runs SQL through the psql client, never through the package under test.
func psql(t *testing.T, url, sql string) string {
	t.Helper()
	out, err := exec.Command("psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newDB is a fresh migrated database, dropped when the test ends.
func newDB(t *testing.T) string {
	u := os.Getenv("QUEUEBOX_TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("QUEUEBOX_TEST_DATABASE_URL is not set (source scripts/postgres.sh)")
	}
	server := u[:strings.LastIndex(u, "/")]
	name := fmt.Sprintf("qb_goprom_%d_%d", os.Getpid(), rand.Int63())
	psql(t, server+"/postgres", "CREATE DATABASE "+name)
	t.Cleanup(func() {
		_, _ = exec.Command("psql", server+"/postgres", "-X", "-q", "-c", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)").CombinedOutput()
	})
	url := server + "/" + name
	if err := queuebox.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	return url
}

// handle runs a worker of source until n rows of it are processed (the handler fails each
// row's first attempt when fail is set, so the retry counters move too).
func handle(t *testing.T, url, source string, n int, fail bool) *queuebox.Worker {
	t.Helper()
	psql(t, url, fmt.Sprintf(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
		SELECT '%s', 'k' || g, '{}', 'pull' FROM generate_series(1, %d) g`, source, n))
	w, err := queuebox.NewWorker(t.Context(), url, queuebox.Options{Source: source, Concurrency: 2,
		PollInterval: 50 * time.Millisecond, Retry: queuebox.RetryPolicy{BaseDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(ctx context.Context, m *queuebox.Message, _ *queuebox.Tx) error {
			if fail && m.Attempt == 0 {
				return queuebox.Retry(0)
			}
			return nil
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for psql(t, url, "SELECT count(*) FROM inbox WHERE source = '"+source+"' AND state = 'processed'") != fmt.Sprint(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: rows not processed in 20 s", source)
		}
		time.Sleep(25 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return w
}

// find returns the series of name whose source label is source.
func find(families []*dto.MetricFamily, name, source string) *dto.Metric {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == source {
					return m
				}
			}
		}
	}
	return nil
}

// Two workers' collectors in the application's own registry, beside one of its own metrics:
// a Gather has each worker's counters and handler histogram under its source label, with the
// values of the rows the workers handled, and promhttp serves them with the rest.
func TestCollectorsRegisterInTheApplicationsRegistry(t *testing.T) {
	url := newDB(t)
	orders := handle(t, url, "orders", 3, false)
	emails := handle(t, url, "emails", 2, true)

	reg := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_requests_total", Help: "the app's own"})
	own.Inc()
	reg.MustRegister(own, queueboxprom.NewCollector(orders), queueboxprom.NewCollector(emails))
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, c := range []struct {
		name, source string
		want         float64
	}{
		{"queuebox_worker_completed_total", "orders", 3},
		{"queuebox_worker_claimed_total", "orders", 3},
		{"queuebox_worker_completed_total", "emails", 2},
		{"queuebox_worker_retried_total", "emails", 2},
		{"queuebox_worker_claimed_total", "emails", 4},
	} {
		m := find(families, c.name, c.source)
		if m == nil || m.GetCounter().GetValue() != c.want {
			t.Errorf("%s{source=%q}: want counter %v, got %v", c.name, c.source, c.want, m)
		}
	}
	h := find(families, "queuebox_worker_handler_duration_seconds", "orders")
	if h == nil || h.GetHistogram().GetSampleCount() != 3 || len(h.GetHistogram().GetBucket()) == 0 {
		t.Errorf("handler duration of orders: want a histogram of 3 samples with buckets, got %v", h)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{"app_requests_total 1\n", `queuebox_worker_completed_total{source="orders"} 3` + "\n", `queuebox_worker_retried_total{source="emails"} 2` + "\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape: %q missing from\n%s", want, body)
		}
	}

	// A closed worker's collector sends nothing, and the registry still gathers.
	_ = orders.Close()
	families, err = reg.Gather()
	if err != nil || find(families, "queuebox_worker_completed_total", "orders") != nil || find(families, "queuebox_worker_completed_total", "emails") == nil {
		t.Errorf("after closing the orders worker: %v, orders still there or emails gone", err)
	}
}
