package queuebox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Publishing to the outbox in the application's transaction: the core validates the
// messages (topic, key, headers by the relay's rules, max attempts, delay or scheduled
// time), generates each row's id and renders one INSERT for all of them; this file only
// collects the options into the core's JSON and runs the statement on tx.

// PublishOption sets an optional field of an outbox message (the With* functions). Values
// are checked by the core, which names the bad field ("messages[0].max_attempts must be
// between 1 and ...").
type PublishOption func(fields publishFields)

// publishFields is one message as the core reads it (publish_statement's JSON object).
type publishFields map[string]any

// WithKey sets the message key (partition / ordering key at the broker; at most 255 characters).
func WithKey(key string) PublishOption { return func(f publishFields) { f["key"] = key } }

// WithHeaders sets the message headers (merged with earlier WithHeader/WithHeaders).
// Framing, hop-by-hop and relay-owned headers and control characters are refused.
func WithHeaders(headers map[string]string) PublishOption {
	return func(f publishFields) {
		h, _ := f["headers"].(map[string]string)
		if h == nil {
			h = map[string]string{}
		}
		for k, v := range headers {
			h[k] = v
		}
		f["headers"] = h
	}
}

// WithHeader sets one header.
func WithHeader(name, value string) PublishOption {
	return WithHeaders(map[string]string{name: value})
}

// WithAggregateType sets the outbox row's aggregate type.
func WithAggregateType(aggregateType string) PublishOption {
	return func(f publishFields) { f["aggregate_type"] = aggregateType }
}

// WithMaxAttempts sets how many failed deliveries the relay allows (at least 1; default 5).
func WithMaxAttempts(n int) PublishOption { return func(f publishFields) { f["max_attempts"] = n } }

// WithDelay makes the row due after d (whole milliseconds) counted from the database's
// clock at insert time. Not together with WithScheduledAt.
func WithDelay(d time.Duration) PublishOption {
	return func(f publishFields) { f["delay_ms"] = d.Milliseconds() }
}

// WithScheduledAt makes the row due at t. Not together with WithDelay.
func WithScheduledAt(t time.Time) PublishOption {
	return func(f publishFields) { f["scheduled_at"] = t.Format(time.RFC3339Nano) }
}

// OutboxMessage is one message of PublishMany.
type OutboxMessage struct {
	Topic string
	// Payload is encoded with encoding/json; pass a json.RawMessage for JSON you encoded.
	Payload any
	Options []PublishOption
}

// NewOutboxMessage builds an OutboxMessage.
func NewOutboxMessage(topic string, payload any, opts ...PublishOption) OutboxMessage {
	return OutboxMessage{Topic: topic, Payload: payload, Options: opts}
}

// Publish inserts one outbox message in the application's transaction tx (see Executor)
// and returns its id (the X-Message-Id the relay delivers it with). The row is visible to
// the relay only once tx commits; a rolled-back tx publishes nothing.
func Publish(ctx context.Context, tx Executor, topic string, payload any, opts ...PublishOption) (string, error) {
	ids, err := PublishMany(ctx, tx, []OutboxMessage{NewOutboxMessage(topic, payload, opts...)})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// PublishMany inserts the messages with one statement in tx and returns their ids in
// order. Bad input is an ErrInvalidInput naming the message and field
// ("messages[3].topic: must not be empty"), and nothing is inserted.
func PublishMany(ctx context.Context, tx Executor, messages []OutboxMessage) ([]string, error) {
	input, err := encodeMessages(len(messages), func(i int) (string, string, any, []PublishOption) {
		return "topic", messages[i].Topic, messages[i].Payload, messages[i].Options
	})
	if err != nil {
		return nil, err
	}
	text, err := publishStatement(input, placeholder)
	if err != nil {
		return nil, err
	}
	st, err := parseStatement(text)
	if err != nil {
		return nil, err
	}
	n, err := st.exec(ctx, tx)
	if err != nil {
		return nil, err
	}
	if n != int64(len(st.IDs)) || len(st.IDs) != len(messages) {
		return nil, &Error{Kind: KindInternal, Message: fmt.Sprintf("the publish inserted %d rows for %d messages (%d ids)", n, len(messages), len(st.IDs))}
	}
	return st.IDs, nil
}

// encodeMessages is the core's JSON array of n messages for publish and enqueue: message i
// gives its naming field (topic or source) and value, its payload (encoded with
// encoding/json) and its options. Errors name the message: "messages[3].payload: ...".
func encodeMessages(n int, message func(i int) (field, value string, payload any, opts []PublishOption)) (string, error) {
	if n == 0 {
		return "", &Error{Kind: KindInvalidInput, Message: "messages: must not be empty"}
	}
	rows := make([]publishFields, n)
	for i := range rows {
		field, value, payload, opts := message(i)
		encoded, err := json.Marshal(payload)
		if err != nil {
			return "", &Error{Kind: KindInvalidInput, Message: fmt.Sprintf("messages[%d].payload: cannot be encoded as JSON: %v", i, err)}
		}
		row := publishFields{field: value, "payload": json.RawMessage(encoded)}
		for _, opt := range opts {
			if opt != nil {
				opt(row)
			}
		}
		rows[i] = row
	}
	input, err := json.Marshal(rows)
	if err != nil {
		return "", &Error{Kind: KindInvalidInput, Message: "messages: " + err.Error()}
	}
	return string(input), nil
}
