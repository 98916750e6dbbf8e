package queuebox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Typed payloads: a handler that takes its payload as a Go type, as River's Worker[T] takes
// its JobArgs. The payload is decoded with encoding/json before the handler runs; one that
// does not decode is dead-lettered at once (the stored payload cannot change, so a retry
// could only fail again), with a last_error naming the type and the field, as the Python,
// TypeScript and C# wrappers do.

// Job is a claimed message with its payload decoded as T. The embedded Message keeps the
// row's fields (ID, IdempotencyKey, Attempt, Headers, ...) and the raw Payload.
type Job[T any] struct {
	*Message
	// Args is the payload decoded into T with encoding/json (unknown JSON fields are
	// ignored, as json.Unmarshal does).
	Args T
}

// Validator is implemented by a payload type that checks its decoded value: when T (or *T)
// has Validate() error, DecodePayload calls it, and an error dead-letters the row as a
// payload that does not decode does.
type Validator interface {
	Validate() error
}

// DecodePayload decodes m's payload as a T and validates it (see Validator). A payload that
// does not decode, or that Validate refuses, is a *DeadError, so a handler that returns it
// dead-letters the row at once; its Reason names T and the field ("payload is not a valid
// shop.Order: field total: expected float64, got a JSON string"), and it unwraps to the
// encoding/json error (errors.As with *json.UnmarshalTypeError) or to Validate's.
//
// The handler forms with a typed job use it (Typed); call it yourself in a TaskHandler:
//
//	order, err := queuebox.DecodePayload[Order](task.Message)
//	if err != nil {
//		return err // dead-lettered at once
//	}
func DecodePayload[T any](m *Message) (T, error) {
	var v T
	if m == nil {
		return v, &Error{Kind: KindInvalidInput, Message: "message: is nil"}
	}
	if err := json.Unmarshal(m.Payload, &v); err != nil {
		return v, &DeadError{Reason: fmt.Sprintf("payload is not a valid %s: %s", typeName[T](), decodeDetail(err)), Err: err}
	}
	var check any = &v
	if _, ok := check.(Validator); !ok {
		check = v
	}
	if val, ok := check.(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, &DeadError{Reason: fmt.Sprintf("payload is not a valid %s: %v", typeName[T](), err), Err: err}
		}
	}
	return v, nil
}

// Typed adapts a handler of typed jobs to the handler form of each Run method: tx is the
// library's *Tx for Run, a pgx.Tx for RunPgx, a *sql.Tx for RunSQL.
//
//	err := w.RunPgx(ctx, pool, queuebox.Typed(func(ctx context.Context, job *queuebox.Job[Order], tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", job.Args.ID, job.Args.Total)
//		return err
//	}))
//
// A payload that does not decode into T (see DecodePayload) never reaches handler: the row is
// dead-lettered at once with a last_error naming T and the field. Everything else is the
// handler form's own behaviour.
func Typed[T any, X any](handler func(ctx context.Context, job *Job[T], tx X) error) func(ctx context.Context, msg *Message, tx X) error {
	return func(ctx context.Context, msg *Message, tx X) error {
		args, err := DecodePayload[T](msg)
		if err != nil {
			return err
		}
		return handler(ctx, &Job[T]{Message: msg, Args: args}, tx)
	}
}

func typeName[T any]() string {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer && t.Elem().Name() != "" {
		return t.Elem().String()
	}
	return t.String()
}

// decodeDetail says what of the payload did not fit, naming the field by its JSON path.
func decodeDetail(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return fmt.Sprintf("expected %s, got a JSON %s", typeErr.Type, typeErr.Value)
		}
		return fmt.Sprintf("field %s: expected %s, got a JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	return err.Error()
}
