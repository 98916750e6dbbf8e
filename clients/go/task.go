package queuebox

/*
#include "queuebox.h"
*/
import "C"

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// The handler forms where the application owns the transaction. The worker still claims,
// renews and fences in the core; the completion runs in the application's transaction
// through CompleteTx. Handler (worker.go) remains the zero-setup form whose transaction
// the library owns.

// Task is a claimed row handed to a TaskHandler: its message, and the claim CompleteTx
// fences on (the claim token itself stays in the core).
type Task struct {
	Message *Message
	native  *C.QbTask
	// lost is set when CompleteTx matched no row; the worker then abandons the row.
	lost atomic.Bool
	// returned is set once the handler returned (the native task is about to be freed).
	returned atomic.Bool
}

// TaskHandler processes one task with the application's own transaction:
//
//	tx, err := pool.Begin(ctx)
//	... business writes on tx ...
//	if err := queuebox.CompleteTx(ctx, tx, task); err != nil { return err }
//	return tx.Commit(ctx)
//
// Return nil after committing. Returning nil without having called CompleteTx lets the
// core complete the row itself (on its own connection, not in your transaction). Retry,
// Dead or any other error (with your transaction rolled back) are the same outcomes as a
// Handler's; an ErrClaimLost from CompleteTx leaves the row to its new owner.
type TaskHandler func(ctx context.Context, task *Task) error

// RunTasks is Run for a TaskHandler.
func (w *Worker) RunTasks(ctx context.Context, handler TaskHandler) error {
	if handler == nil {
		return &Error{Kind: KindInvalidInput, Message: "the handler is mandatory"}
	}
	return w.run(ctx, handler)
}

// PgxBeginner is where RunPgx begins each handler's transaction: *pgxpool.Pool, *pgx.Conn.
type PgxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// PgxHandler processes one message in a pgx transaction begun on the application's pool.
// It must neither commit nor roll back: nil commits its writes together with the row's
// completion, any other result rolls them back (see Handler for the outcomes).
type PgxHandler func(ctx context.Context, msg *Message, tx pgx.Tx) error

// RunPgx is Run with the application's pgx pool: for each message it begins a transaction
// on db, runs handler, then CompleteTx and Commit.
func (w *Worker) RunPgx(ctx context.Context, db PgxBeginner, handler PgxHandler) error {
	if db == nil || handler == nil {
		return &Error{Kind: KindInvalidInput, Message: "RunPgx: the pool and the handler are mandatory"}
	}
	return w.run(ctx, func(ctx context.Context, task *Task) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		// A no-op after Commit; runs even when ctx was cancelled (lost lease, shutdown).
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if err := handler(ctx, task.Message, tx); err != nil {
			return err
		}
		if err := CompleteTx(ctx, tx, task); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// SQLBeginner is where RunSQL begins each handler's transaction: *sql.DB, *sql.Conn.
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// SQLHandler is PgxHandler for database/sql.
type SQLHandler func(ctx context.Context, msg *Message, tx *sql.Tx) error

// RunSQL is RunPgx for database/sql (a PostgreSQL driver such as pgx's stdlib).
func (w *Worker) RunSQL(ctx context.Context, db SQLBeginner, handler SQLHandler) error {
	if db == nil || handler == nil {
		return &Error{Kind: KindInvalidInput, Message: "RunSQL: the database and the handler are mandatory"}
	}
	return w.run(ctx, func(ctx context.Context, task *Task) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }() // ErrTxDone after Commit
		if err := handler(ctx, task.Message, tx); err != nil {
			return err
		}
		if err := CompleteTx(ctx, tx, task); err != nil {
			return err
		}
		return tx.Commit()
	})
}
