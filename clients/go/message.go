package queuebox

import (
	"encoding/json"
	"time"
)

// Message is a claimed inbox row as the handler sees it (never the claim token).
type Message struct {
	ID             string            `json:"id"`
	Source         string            `json:"source"`
	IdempotencyKey string            `json:"idempotencyKey"`
	AggregateID    *string           `json:"aggregateId"`
	EventType      *string           `json:"eventType"`
	Payload        json.RawMessage   `json:"payload"`
	Headers        map[string]string `json:"headers"`
	// Attempt counts failed deliveries so far (0 on the first).
	Attempt       int       `json:"attempt"`
	CorrelationID *string   `json:"correlationId"`
	CreatedAt     time.Time `json:"createdAt"`
	// Trace is the W3C trace context to continue the message's trace from (nil when the
	// row has none): the row's own, or, with OTEL_EXPORTER_OTLP_ENDPOINT set for the
	// worker's process, the core's "handle" span. Pass it to your OpenTelemetry
	// propagator as the traceparent/tracestate headers.
	Trace *TraceContext `json:"trace,omitempty"`
}

// TraceContext is a validated W3C trace context.
type TraceContext struct {
	Traceparent string  `json:"traceparent"`
	Tracestate  *string `json:"tracestate"`
}

// UnmarshalPayload decodes the JSON payload into target.
func (m *Message) UnmarshalPayload(target any) error { return json.Unmarshal(m.Payload, target) }
