package queuebox

import (
	"errors"
	"fmt"
	"time"
)

// ErrorKind is the native library's status code (QB_ERR_* in queuebox.h): the codes and
// names of queuebox-core's ErrorKind, the one error-kind table (errors_table_test.go checks
// them against proto-docs/error-kinds.json exactly).
type ErrorKind int

// Kinds of Error. Compare with errors.Is against the Err* sentinels.
const (
	KindInternal        ErrorKind = 1
	KindClaimLost       ErrorKind = 2
	KindConnect         ErrorKind = 3
	KindSchemaMissing   ErrorKind = 4
	KindMigration       ErrorKind = 5
	KindDatabase        ErrorKind = 6
	KindConfig          ErrorKind = 7
	KindInvalidInput    ErrorKind = 8
	KindAlreadyFinished ErrorKind = 9
	KindCancelled       ErrorKind = 10
)

func (k ErrorKind) String() string {
	switch k {
	case KindInternal:
		return "internal"
	case KindClaimLost:
		return "claim_lost"
	case KindConnect:
		return "connect"
	case KindSchemaMissing:
		return "schema_missing"
	case KindMigration:
		return "migration"
	case KindDatabase:
		return "database"
	case KindConfig:
		return "config"
	case KindInvalidInput:
		return "invalid_input"
	case KindAlreadyFinished:
		return "already_finished"
	case KindCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error reported by the native library.
type Error struct {
	Kind ErrorKind
	// Code is the SQLSTATE of a database error or the option path of a configuration
	// error ("batchSize", "retry.baseDelayMs"); empty otherwise.
	Code string
	// Message is the library's text (passwords redacted).
	Message string
	// cause is what Unwrap returns: ctx's error for a call that stopped waiting.
	cause error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "queuebox: " + e.Kind.String()
	}
	return "queuebox: " + e.Message
}

// Unwrap gives the error's cause, when it has one: for a call whose ctx ended, ctx's error,
// so errors.Is(err, context.DeadlineExceeded) holds.
func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, ErrClaimLost) (and the other sentinels) match by kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == "" && t.Kind == e.Kind
}

// Sentinels for errors.Is.
var (
	ErrInternal        = &Error{Kind: KindInternal}
	ErrClaimLost       = &Error{Kind: KindClaimLost}
	ErrConnect         = &Error{Kind: KindConnect}
	ErrSchemaMissing   = &Error{Kind: KindSchemaMissing}
	ErrMigration       = &Error{Kind: KindMigration}
	ErrDatabase        = &Error{Kind: KindDatabase}
	ErrConfig          = &Error{Kind: KindConfig}
	ErrInvalidInput    = &Error{Kind: KindInvalidInput}
	ErrAlreadyFinished = &Error{Kind: KindAlreadyFinished}
	ErrCancelled       = &Error{Kind: KindCancelled}
)

// RetryError, returned by a handler (see Retry), retries the row after After instead of
// the policy's backoff.
type RetryError struct {
	After  time.Duration
	Reason string
}

func (e *RetryError) Error() string { return fmt.Sprintf("retry after %s: %s", e.After, e.Reason) }

// DeadError, returned by a handler (see Dead), dead-letters the row at once with Reason as
// its last_error. Err, when set, is the cause (DecodePayload's decoding error), for
// errors.Is and errors.As.
type DeadError struct {
	Reason string
	Err    error
}

func (e *DeadError) Error() string { return "dead: " + e.Reason }

// Unwrap returns Err.
func (e *DeadError) Unwrap() error { return e.Err }

// Retry asks for the row to be delivered again after `after` (negative means 0); the
// attempt counter still increases.
func Retry(after time.Duration) error {
	if after < 0 {
		after = 0
	}
	return &RetryError{After: after, Reason: "handler asked to retry after " + after.String()}
}

// RetryWithReason is Retry with the text stored as the row's last_error.
func RetryWithReason(after time.Duration, reason string) error {
	err := Retry(after).(*RetryError)
	err.Reason = reason
	return err
}

// Dead asks for the row to be dead-lettered with reason as its last_error.
func Dead(reason string) error { return &DeadError{Reason: reason} }

func asRetry(err error) (*RetryError, bool) {
	var r *RetryError
	return r, errors.As(err, &r)
}

func asDead(err error) (*DeadError, bool) {
	var d *DeadError
	return d, errors.As(err, &d)
}
