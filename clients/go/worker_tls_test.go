package queuebox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// The worker against a PostgreSQL that accepts TLS with a client certificate only
// (scripts/postgres-tls.sh; scripts/test.d/31-go.sh starts it and exports
// QUEUEBOX_TEST_TLS_DATABASE_URL: sslmode=verify-full, sslrootcert, sslcert, sslkey). The
// library hands the URL to the Rust core as it is: Migrate and the worker connect with the
// URL alone, PostgreSQL's pg_stat_ssl shows the worker's sessions encrypted with the client
// certificate, and a wrong CA or a missing client certificate is refused with the core's
// wording.
func TestWorkerConnectsToTLSOnlyPostgresWithTheURLAlone(t *testing.T) {
	base := os.Getenv("QUEUEBOX_TEST_TLS_DATABASE_URL")
	if base == "" {
		t.Fatal("NOT RUN: QUEUEBOX_TEST_TLS_DATABASE_URL is not set (scripts/test.d/31-go.sh starts scripts/postgres-tls.sh and sets it)")
	}
	name := fmt.Sprintf("qb_go_tls_%d_%d", os.Getpid(), rand.Int63())
	// psql (libpq) speaks the same URL parameters; it sets up, the library under test does not.
	psql(t, strings.Replace(base, "/queuebox?", "/postgres?", 1), "CREATE DATABASE "+name)
	t.Cleanup(func() {
		_, _ = exec.Command("psql", strings.Replace(base, "/queuebox?", "/postgres?", 1), "-X", "-q", "-c", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)").CombinedOutput()
	})
	url := strings.Replace(base, "/queuebox?", "/"+name+"?", 1)
	if err := queuebox.Migrate(t.Context(), url); err != nil {
		t.Fatalf("migrate over TLS: %v", err)
	}
	insertRows(t, url, "tls_jobs", 1)

	w := newWorker(t, url, quickOptions("tls_jobs"))
	var sessions string
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		// The worker's own sessions, seen by the server while it holds this row.
		sessions = psql(t, url, `SELECT string_agg(DISTINCT s.ssl || ' ' || s.version || ' ' || coalesce(s.client_dn, '-'), ', ')
			FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
			WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()`)
		return nil
	}
	runUntil(t, w, handler, "the row processed over TLS", func() bool {
		return psql(t, url, "SELECT state FROM inbox WHERE source = 'tls_jobs'") == "processed"
	})
	if !strings.HasPrefix(sessions, "true TLSv1.3 /CN=postgres") || strings.Contains(sessions, "false") {
		t.Fatalf("the worker's sessions in pg_stat_ssl: %q, want every one true TLSv1.3 /CN=postgres", sessions)
	}
	t.Logf("pg_stat_ssl of the worker's sessions (ssl version client_dn): %s", sessions)

	// The core read sslrootcert and sslcert/sslkey from this URL: change them and it refuses.
	wrongCA := strings.Replace(url, "/ca.crt", "/other-ca.crt", 1)
	_, err := queuebox.NewWorker(t.Context(), wrongCA, quickOptions("tls_jobs"))
	if !errors.Is(err, queuebox.ErrConnect) || !strings.Contains(err.Error(), "not signed by a CA QueueBox trusts") {
		t.Fatalf("a wrong CA: want ErrConnect naming the CA, got %v", err)
	}
	noCert := url[:strings.Index(url, "&sslcert=")]
	start := time.Now()
	_, err = queuebox.NewWorker(t.Context(), noCert, quickOptions("tls_jobs"))
	if !errors.Is(err, queuebox.ErrConnect) || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("no client certificate: want ErrConnect naming it, got %v", err)
	}
	t.Logf("without sslcert/sslkey: %v", err)
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the refusal took %s, not at once", time.Since(start))
	}
}
