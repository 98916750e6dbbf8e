package queuebox_test

// Contract item 13 (proto-docs/client-contract.md): mapped table and column names. A worker given the
// names of a schema of its own (core/tests/fixtures/own_schema.sql: tables shop."order" and
// shop."user", reserved-word columns) claims, completes and retries there, and the
// statement it hands the application (CompleteTx) names the same table.

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/jackc/pgx/v5"
)

// ownSchemaDB creates a database holding the fixture schema (no QueueBox migration) and
// returns its URL and the worker options naming it.
func ownSchemaDB(t *testing.T, source string) (string, queuebox.Options) {
	t.Helper()
	url := emptyDB(t)
	ddl, err := os.ReadFile("../../core/tests/fixtures/own_schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	psql(t, url, string(ddl))
	raw, err := os.ReadFile("../../core/tests/fixtures/own_schema_names.json")
	if err != nil {
		t.Fatal(err)
	}
	var names struct {
		OutboxTableName string
		InboxTableName  string
		ColumnMapping   struct{ Outbox, Inbox map[string]string }
	}
	if err := json.Unmarshal(raw, &names); err != nil {
		t.Fatal(err)
	}
	o := quickOptions(source)
	o.OutboxTableName, o.InboxTableName = names.OutboxTableName, names.InboxTableName
	o.ColumnMapping = queuebox.ColumnMapping{Outbox: names.ColumnMapping.Outbox, Inbox: names.ColumnMapping.Inbox}
	return url, o
}

func TestContractItem13MappedNames(t *testing.T) {
	url, opts := ownSchemaDB(t, "named")
	psql(t, url, `INSERT INTO shop."user" ("from", "key", payload, consumption)
		VALUES ('named', 'n1', '{"n": 1}', 'pull'), ('named', 'n2', '{"n": 2}', 'pull')`)
	w := newWorker(t, url, opts)
	seen := make(chan string, 4)
	runUntil(t, w, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		seen <- m.IdempotencyKey
		return nil
	}, "both rows processed in shop.user", func() bool {
		return psql(t, url, `SELECT count(*) FROM shop."user" WHERE status = 'processed'`) == "2"
	})
	if len(seen) != 2 {
		t.Fatalf("handled %d rows, want 2", len(seen))
	}

	// The application's own transaction: the completion statement names shop."user".
	psql(t, url, `INSERT INTO shop."user" ("from", "key", payload, consumption) VALUES ('named', 'n3', '{"n": 3}', 'pull')`)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w2 := newWorker(t, url, opts)
	runUntilTasks(t, w2, func(ctx context.Context, task *queuebox.Task) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return queuebox.CompleteTx(ctx, tx, task)
		})
	}, "n3 completed in the application's transaction", func() bool {
		return psql(t, url, `SELECT status FROM shop."user" WHERE "key" = 'n3'`) == "processed"
	})

	// A misspelt mapping key is refused, naming it.
	bad := opts
	bad.ColumnMapping.Inbox = map[string]string{"sourse": "from"}
	if _, err := queuebox.NewWorker(t.Context(), url, bad); err == nil || !strings.Contains(err.Error(), "sourse") {
		t.Fatalf("want an error naming the key sourse, got %v", err)
	}
}
