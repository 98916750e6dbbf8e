package queuebox

/*
#include "queuebox.h"
*/
import "C"

import (
	"encoding/json"
)

// Tx is the handler's transaction. It opens on first use; its writes commit together with
// the row's completion when the handler returns nil, and roll back on any other outcome.
// The handler must neither commit nor roll back. Parameters bind to $1, $2, ...: strings
// as text, integers as bigint, floats as double precision, bools, nil as NULL, and
// anything else as jsonb (after encoding/json).
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
func (tx *Tx) Exec(sql string, args ...any) (int64, error) {
	params, err := encodeParams(args)
	if err != nil {
		return 0, err
	}
	return taskExecute(tx.task, sql, params)
}

// Query runs a query and returns its rows as column name → JSON-decoded value (numbers
// are json.Number).
func (tx *Tx) Query(sql string, args ...any) ([]map[string]any, error) {
	var rows []map[string]any
	if err := tx.QueryInto(&rows, sql, args...); err != nil {
		return nil, err
	}
	return rows, nil
}

// QueryInto runs a query and decodes its rows (a JSON array of objects keyed by column
// name) into target, e.g. a *[]struct with json tags.
func (tx *Tx) QueryInto(target any, sql string, args ...any) error {
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
