package queuebox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Enqueueing pull rows (jobs for a pull source's workers) in the application's transaction:
// the core validates the messages (source, idempotency key, payload, headers by the inbox's
// rules, priority, max attempts, delay or scheduled time) and renders one statement for all
// of them; this file only collects the options into the core's JSON, runs the statement on
// tx and reads its (n, id, duplicate) rows.

// EnqueueOption sets an optional field of a pull message. It is the same type as
// PublishOption: WithHeader, WithHeaders, WithMaxAttempts, WithDelay and WithScheduledAt
// apply to both; WithIdempotencyKey, WithAggregateID, WithEventType, WithCorrelationID and
// WithPriority to Enqueue only, WithKey and WithAggregateType to Publish only (the core
// refuses a field that does not belong, naming it).
type EnqueueOption = PublishOption

// WithIdempotencyKey deduplicates the row within its source: enqueueing the same key again
// stores nothing and returns the stored row's id with Duplicate set. Trimmed; at most 255
// characters. Without it every Enqueue is a new row (the key is the row's id).
func WithIdempotencyKey(key string) EnqueueOption {
	return func(f publishFields) { f["idempotency_key"] = key }
}

// WithAggregateID orders the row within its aggregate: rows of one aggregate are handled one
// at a time, in enqueue order, whatever their priorities.
func WithAggregateID(id string) EnqueueOption {
	return func(f publishFields) { f["aggregate_id"] = id }
}

// WithEventType sets the row's event type (handed to the handler as Message.EventType).
func WithEventType(eventType string) EnqueueOption {
	return func(f publishFields) { f["event_type"] = eventType }
}

// WithCorrelationID sets the row's correlation id (at most 128 characters).
func WithCorrelationID(id string) EnqueueOption {
	return func(f publishFields) { f["correlation_id"] = id }
}

// WithPriority sets the row's priority within its source, -32767 to 32767 (default 0): a
// higher priority is claimed first. An aggregate's order comes before priorities.
func WithPriority(p int) EnqueueOption { return func(f publishFields) { f["priority"] = p } }

// EnqueueMessage is one message of EnqueueMany.
type EnqueueMessage struct {
	// Source is the pull source whose workers claim the row.
	Source string
	// Payload is encoded with encoding/json; pass a json.RawMessage for JSON you encoded.
	Payload any
	Options []EnqueueOption
}

// NewEnqueueMessage builds an EnqueueMessage.
func NewEnqueueMessage(source string, payload any, opts ...EnqueueOption) EnqueueMessage {
	return EnqueueMessage{Source: source, Payload: payload, Options: opts}
}

// Enqueued is the outcome of one enqueued message.
type Enqueued struct {
	// ID is the row's id: the new row's, or for a duplicate the stored row's.
	ID string
	// Duplicate: (source, idempotency key) was stored already (by an earlier or a concurrent
	// transaction, or an earlier message of the same call); nothing was inserted.
	Duplicate bool
}

// Enqueue reads a result, so its tx needs a query method: database/sql's *sql.Tx, *sql.Conn
// and *sql.DB (SQLQuerier), or pgx v5's pgx.Tx, *pgx.Conn, *pgxpool.Pool and pgxpool.Tx
// (PgxQuerier): the same values Publish takes.

// SQLQuerier is the database/sql side of Enqueue's tx.
type SQLQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// PgxQuerier is the pgx v5 side of Enqueue's tx.
type PgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Enqueue stores one pull row for source's workers in the application's transaction tx (see
// SQLQuerier and PgxQuerier). The row is claimable only once tx commits; a rolled-back tx leaves none.
func Enqueue(ctx context.Context, tx Executor, source string, payload any, opts ...EnqueueOption) (Enqueued, error) {
	out, err := EnqueueMany(ctx, tx, []EnqueueMessage{NewEnqueueMessage(source, payload, opts...)})
	if err != nil {
		return Enqueued{}, err
	}
	return out[0], nil
}

// EnqueueMany stores the messages with one statement in tx and returns one outcome per
// message, in order. Bad input is an ErrInvalidInput naming the message and field
// ("messages[2].priority must be ..."), and nothing is stored.
func EnqueueMany(ctx context.Context, tx Executor, messages []EnqueueMessage) ([]Enqueued, error) {
	input, err := encodeMessages(len(messages), func(i int) (string, string, any, []PublishOption) {
		return "source", messages[i].Source, messages[i].Payload, messages[i].Options
	})
	if err != nil {
		return nil, err
	}
	text, err := enqueueStatement(input, placeholder)
	if err != nil {
		return nil, err
	}
	st, err := parseStatement(text)
	if err != nil {
		return nil, err
	}
	if st.Expect != "enqueue_rows" {
		return nil, &Error{Kind: KindInternal, Message: "the enqueue statement expects " + st.Expect}
	}
	return st.queryEnqueued(ctx, tx, len(messages))
}

// queryEnqueued runs st on tx and reads its (n, id, duplicate) rows into one outcome per
// message.
func (st *statement) queryEnqueued(ctx context.Context, tx Executor, count int) ([]Enqueued, error) {
	args := make([]any, len(st.Params))
	for i, p := range st.Params {
		if p != nil {
			args[i] = *p
		}
	}
	out := make([]Enqueued, count)
	seen := make([]bool, count)
	got := 0
	read := func(n int64, id string, duplicate bool) error {
		if n < 0 || n >= int64(count) || seen[n] {
			return &Error{Kind: KindInternal, Message: fmt.Sprintf("the enqueue returned row n = %d for %d messages", n, count)}
		}
		seen[n] = true
		out[n] = Enqueued{ID: id, Duplicate: duplicate}
		got++
		return nil
	}
	switch db := tx.(type) {
	case PgxQuerier:
		rows, err := db.Query(ctx, st.SQL, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				n   int64
				id  string
				dup bool
			)
			if err := rows.Scan(&n, &id, &dup); err != nil {
				return nil, err
			}
			if err := read(n, id, dup); err != nil {
				return nil, err
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	case *sql.Tx:
		if db == nil {
			return nil, invalidQueryTx(tx)
		}
		if err := sqlQueryEnqueued(ctx, db, st.SQL, args, read); err != nil {
			return nil, err
		}
	case SQLQuerier:
		if err := sqlQueryEnqueued(ctx, db, st.SQL, args, read); err != nil {
			return nil, err
		}
	default:
		return nil, invalidQueryTx(tx)
	}
	if got != count {
		return nil, &Error{Kind: KindInternal, Message: fmt.Sprintf("the enqueue returned %d rows for %d messages", got, count)}
	}
	return out, nil
}

func sqlQueryEnqueued(ctx context.Context, db SQLQuerier, query string, args []any, read func(int64, string, bool) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n   int64
			id  string
			dup bool
		)
		if err := rows.Scan(&n, &id, &dup); err != nil {
			return err
		}
		if err := read(n, id, dup); err != nil {
			return err
		}
	}
	return rows.Err()
}

func invalidQueryTx(tx Executor) error {
	return &Error{Kind: KindInvalidInput, Message: fmt.Sprintf("tx: %T is neither a database/sql transaction (QueryContext) nor a pgx one (Query); see queuebox.Enqueue", tx)}
}
