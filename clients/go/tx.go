package queuebox

/*
#include "queuebox.h"
*/
import "C"

import (
	"context"
	"encoding/json"
)

// Tx is the handler's transaction. It opens on first use; its writes commit together with
// the row's completion when the handler returns nil, and roll back on any other outcome.
// The handler must neither commit nor roll back. Parameters bind to $1, $2, ... after
// encoding/json, by the JSON text: an integer that fits 64 bits as bigint (a whole float64
// such as 4.0 is written 4); every other number (a float64 with a fraction, a json.Number
// such as "0.1234567890123456789012345", a *big.Int beyond int64) as exact numeric from its
// JSON text, never through a double; strings as text; bools as boolean;
// nil as a NULL whose type the statement decides; maps, slices and structs as jsonb.
// PostgreSQL's own assignment rules then apply, as they would from psql: a fraction into
// a bigint column rounds (4.5 stores 5), a number into a double precision column is the
// nearest double.
//
// Each method takes a ctx, as pgx's and database/sql's do: a done ctx refuses the statement
// (ErrCancelled, wrapping ctx's error) before it is sent. A statement already sent runs to
// its end, since the native library cannot interrupt it; pass the handler's ctx, which ends
// when the row's lease is lost or the shutdown grace ran out, after which the library
// refuses further statements of that row anyway.
type Tx struct {
	task *C.QbTask
}

func encodeParams(args []any) (string, error) {
	if args == nil {
		args = []any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "", &Error{Kind: KindInvalidInput, Message: "cannot encode the statement parameters: " + err.Error()}
	}
	return string(b), nil
}

// Exec runs a statement and returns the number of rows it affected.
func (tx *Tx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, waitCancelled("Exec", err)
	}
	params, err := encodeParams(args)
	if err != nil {
		return 0, err
	}
	return taskExecute(tx.task, sql, params)
}

// Query runs a query and returns its rows as column name → JSON-decoded value. Numbers
// are json.Number, so a numeric column comes back exactly, every digit (trailing zeros of
// the fraction dropped: 12.50 is 12.5); parse it with math/big or a decimal package, as
// Float64 rounds to the nearest double.
func (tx *Tx) Query(ctx context.Context, sql string, args ...any) ([]map[string]any, error) {
	var rows []map[string]any
	if err := tx.QueryInto(ctx, &rows, sql, args...); err != nil {
		return nil, err
	}
	return rows, nil
}

// QueryInto runs a query and decodes its rows (a JSON array of objects keyed by column
// name) into target, e.g. a *[]struct with json tags.
func (tx *Tx) QueryInto(ctx context.Context, target any, sql string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return waitCancelled("Query", err)
	}
	params, err := encodeParams(args)
	if err != nil {
		return err
	}
	text, err := taskQuery(tx.task, sql, params)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(stringReader(text))
	dec.UseNumber()
	if err := dec.Decode(target); err != nil {
		return &Error{Kind: KindInvalidInput, Message: "cannot decode the query rows: " + err.Error()}
	}
	return nil
}

// QueryRows runs a query in tx and returns its rows decoded into T by column name (encoding/json
// field names and tags), e.g. []Order from "SELECT id, total FROM orders": the typed form of
// Query. A json.Number field keeps a numeric column's exact digits.
func QueryRows[T any](ctx context.Context, tx *Tx, sql string, args ...any) ([]T, error) {
	var rows []T
	if err := tx.QueryInto(ctx, &rows, sql, args...); err != nil {
		return nil, err
	}
	return rows, nil
}
