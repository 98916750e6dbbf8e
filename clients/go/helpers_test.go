package queuebox_test

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// serverURL is QUEUEBOX_TEST_DATABASE_URL without its database name.
func serverURL(t testing.TB) string {
	u := os.Getenv("QUEUEBOX_TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("QUEUEBOX_TEST_DATABASE_URL is not set (source scripts/postgres.sh)")
	}
	return u[:strings.LastIndex(u, "/")]
}

// psql runs SQL on url through the psql client (never through the library under test)
// and returns its unaligned output.
func psql(t testing.TB, url, sql string) string {
	t.Helper()
	out, err := exec.Command("psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newDB creates a fresh database for one test, migrates it with the library's Migrate,
// and drops it when the test ends.
func newDB(t testing.TB) string {
	t.Helper()
	url := emptyDB(t)
	if err := queuebox.Migrate(t.Context(), url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return url
}

// emptyDB creates a fresh database with no tables for one test and drops it when the test
// ends.
func emptyDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("qb_go_%d_%d", os.Getpid(), rand.Int63())
	server := serverURL(t)
	psql(t, server+"/postgres", "CREATE DATABASE "+name)
	t.Cleanup(func() {
		_, _ = exec.Command("psql", server+"/postgres", "-X", "-q", "-c", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)").CombinedOutput()
	})
	return server + "/" + name
}

// insertRows adds n pull rows of source with keys k1..kn and payload {"n": i}.
func insertRows(t testing.TB, url, source string, n int) {
	t.Helper()
	psql(t, url, fmt.Sprintf(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
		SELECT '%s', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, %d) g`, source, n))
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
