package queuebox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The application's own transaction: CompleteTx and Publish run, on the application's
// connection, the statement the core rendered (proto-docs/sql-contract.md) with the
// parameters it gave. No SQL is written here: this file only binds and reads results.

// Executor is the application's transaction (or connection) that CompleteTx and Publish
// run on. Two shapes are accepted, checked when called:
//   - database/sql: *sql.Tx, and *sql.Conn or *sql.DB (anything with SQLExecutor's
//     ExecContext), with a PostgreSQL driver ($1 placeholders: pgx's stdlib, lib/pq);
//   - pgx v5: pgx.Tx, *pgx.Conn, *pgxpool.Pool, pgxpool.Tx (PgxExecutor's Exec).
//
// Anything else is ErrInvalidInput naming "tx".
type Executor = any

// SQLExecutor is the database/sql side of Executor.
type SQLExecutor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// PgxExecutor is the pgx v5 side of Executor.
type PgxExecutor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// placeholder is the style the core renders for both Executor shapes: $1, $2, ...
const placeholder = "dollar"

// statement is a rendered statement as the core gives it. Every parameter is text or
// NULL (the SQL casts them), so each driver binds plain strings.
type statement struct {
	SQL    string    `json:"sql"`
	Params []*string `json:"params"`
	IDs    []string  `json:"ids"`
	Expect string    `json:"expect"`
}

func parseStatement(text string) (*statement, error) {
	var st statement
	if err := json.Unmarshal([]byte(text), &st); err != nil || st.SQL == "" {
		return nil, &Error{Kind: KindInternal, Message: fmt.Sprintf("cannot decode the statement from the native library (%v): %s", err, text)}
	}
	return &st, nil
}

// exec runs st on tx and returns the rows it affected.
func (st *statement) exec(ctx context.Context, tx Executor) (int64, error) {
	args := make([]any, len(st.Params))
	for i, p := range st.Params {
		if p != nil {
			args[i] = *p
		}
	}
	switch db := tx.(type) {
	case PgxExecutor:
		tag, err := db.Exec(ctx, st.SQL, args...)
		if err != nil {
			return 0, err
		}
		return tag.RowsAffected(), nil
	case *sql.Tx:
		if db == nil {
			return 0, invalidTx(tx)
		}
		return sqlExec(ctx, db, st.SQL, args)
	case SQLExecutor:
		return sqlExec(ctx, db, st.SQL, args)
	}
	return 0, invalidTx(tx)
}

func sqlExec(ctx context.Context, db SQLExecutor, query string, args []any) (int64, error) {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func invalidTx(tx Executor) error {
	return &Error{Kind: KindInvalidInput, Message: fmt.Sprintf("tx: %T is neither a database/sql transaction (ExecContext) nor a pgx one (Exec); see queuebox.Executor", tx)}
}

// CompleteTx marks the task's row processed inside the application's transaction tx, so
// that it commits (or rolls back) together with the application's own writes. Call it
// last, just before committing; the handler then returns nil and the core leaves the row
// to tx: it stops renewing the lease (the completion holds the row lock until tx ends)
// and does not complete the row itself.
//
// When the claim was lost (the lease expired and another worker took the row) the
// statement matches no row and CompleteTx returns an ErrClaimLost error: return it from
// the handler without committing, so tx and the business writes roll back. A driver error
// is returned as it is (e.g. a *pgconn.PgError).
func CompleteTx(ctx context.Context, tx Executor, task *Task) error {
	if task == nil || task.native == nil {
		return &Error{Kind: KindInvalidInput, Message: "task: is nil (use the *Task a TaskHandler receives)"}
	}
	if task.returned.Load() {
		return &Error{Kind: KindAlreadyFinished, Message: "task: its handler already returned; call CompleteTx inside the handler"}
	}
	text, err := taskCompletionStatement(task.native, placeholder)
	if err != nil {
		return err
	}
	st, err := parseStatement(text)
	if err != nil {
		return err
	}
	n, err := st.exec(ctx, tx)
	if err != nil {
		return err
	}
	if n != 1 {
		task.lost.Store(true)
		// The core counts and logs the loss and gives the error to raise.
		if err := taskClaimLost(task.native); err != nil {
			return err
		}
		return &Error{Kind: KindClaimLost, Message: fmt.Sprintf("claim lost on inbox row %s", task.Message.ID)}
	}
	return nil
}
