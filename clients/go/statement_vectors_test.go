package queuebox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The statements of the conformance vectors (completion_statement, publish_statement) are
// what a wrapper runs; TestConformanceVectorsMatchThroughTheNativeLibrary checks the core
// renders them. Here the PostgreSQL cases in this package's placeholder style ($1) run,
// text and parameters exactly as the vectors give them, on the real server through both
// drivers this package supports, and do what they say (one row completed, every id inserted).

type statementCase struct {
	Name  string `json:"name"`
	Input struct {
		Backend     string `json:"backend"`
		Placeholder string `json:"placeholder"`
		ID          string `json:"id"`
		Token       string `json:"token"`
	} `json:"input"`
	Expected struct {
		SQL    string    `json:"sql"`
		Params []*string `json:"params"`
		IDs    []string  `json:"ids"`
	} `json:"expected"`
}

// dollarCases are the cases of a vector file for PostgreSQL in the $1 style that render a
// statement (not an error).
func dollarCases(t *testing.T, file string) []statementCase {
	t.Helper()
	text, err := os.ReadFile("../../proto-docs/vectors/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []statementCase }
	if err := json.Unmarshal(text, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []statementCase
	for _, c := range f.Cases {
		if c.Input.Backend == "postgres" && c.Input.Placeholder == "dollar" && c.Expected.SQL != "" {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no PostgreSQL $1 statement case", file)
	}
	return out
}

func vectorArgs(params []*string) []any {
	args := make([]any, len(params))
	for i, p := range params {
		if p != nil {
			args[i] = *p
		}
	}
	return args
}

// execBoth runs sql on a transaction of each driver and returns the rows affected by each;
// commit decides whether the transactions commit or roll back.
func execBoth(t *testing.T, url, query string, args []any, commit bool) (pgxRows, sqlRows int64) {
	t.Helper()
	ctx := context.Background()
	ptx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tag pgconn.CommandTag
	if tag, err = ptx.Exec(ctx, query, args...); err != nil {
		t.Fatalf("pgx: %v", err)
	}
	if commit {
		err = ptx.Commit(ctx)
	} else {
		err = ptx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	stx, err := sqlDB(t, url).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res sql.Result
	if res, err = stx.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("database/sql: %v", err)
	}
	n, _ := res.RowsAffected()
	if commit {
		err = stx.Commit()
	} else {
		err = stx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	return tag.RowsAffected(), n
}

func TestCompletionStatementVectorsRunOnBothDrivers(t *testing.T) {
	for _, c := range dollarCases(t, "completion_statement.json") {
		t.Run(c.Name, func(t *testing.T) {
			url := newDB(t)
			psql(t, url, `INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, claim_token, claimed_at, lease_expires_at)
				VALUES ('`+c.Input.ID+`', 's', 'k', '{}', 'pull', 'processing', '`+c.Input.Token+`', now(), now() + interval '1 minute')`)
			if p, s := execBoth(t, url, c.Expected.SQL, vectorArgs(c.Expected.Params), false); p != 1 || s != 1 {
				t.Fatalf("the claimed row: %d (pgx) and %d (database/sql) rows affected, want 1", p, s)
			}
			psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid()") // another owner
			if p, s := execBoth(t, url, c.Expected.SQL, vectorArgs(c.Expected.Params), false); p != 0 || s != 0 {
				t.Fatalf("a taken row: %d (pgx) and %d (database/sql) rows affected, want 0", p, s)
			}
		})
	}
}

func TestPublishStatementVectorsRunOnBothDrivers(t *testing.T) {
	for _, c := range dollarCases(t, "publish_statement.json") {
		t.Run(c.Name, func(t *testing.T) {
			url := newDB(t)
			want := len(c.Expected.IDs)
			p, _ := execBoth(t, url, c.Expected.SQL, vectorArgs(c.Expected.Params), false)
			if p != int64(want) {
				t.Fatalf("pgx: %d rows affected, want %d", p, want)
			}
			// Commit through database/sql only (the ids are fixed, so once).
			stx, err := sqlDB(t, url).BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stx.ExecContext(context.Background(), c.Expected.SQL, vectorArgs(c.Expected.Params)...); err != nil {
				t.Fatal(err)
			}
			if err := stx.Commit(); err != nil {
				t.Fatal(err)
			}
			got := psql(t, url, "SELECT string_agg(id::text, ',' ORDER BY sequence) FROM outbox WHERE state = 'pending'")
			if got != strings.Join(c.Expected.IDs, ",") {
				t.Fatalf("pending rows %s, want the vector's ids %v in order", got, c.Expected.IDs)
			}
		})
	}
}
