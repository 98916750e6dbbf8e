package queuebox

import (
	"encoding/json"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Options of a Worker. Zero values mean the core's defaults; the core validates the rest
// and names the offending field in an ErrConfig error (Error.Code).
type Options struct {
	// Source whose pull rows the worker claims (required).
	Source string
	// BatchSize: the most rows the worker holds at once, queued for a handler or running.
	// Zero leaves it to the core, which adapts it to Concurrency (32 × Concurrency, at least
	// 1024, at most 10000: Run's loop adds its own time per row, so it needs more rows in
	// flight than the Rust worker) and lets up to a batch more finish their completion
	// statement while the next claim runs. Within it the worker holds what the handlers'
	// measured times call for: all of it for fast handlers, about Concurrency rows for slow
	// ones (README "Worker options").
	BatchSize int
	// Concurrency: handlers running at once, at most BatchSize (default 1).
	Concurrency int
	// Lease of a claimed row (default 30 s), renewed every third of it by the core.
	// LeaseMS is the same in milliseconds; Lease wins when both are set.
	Lease   time.Duration
	LeaseMS int
	// PollInterval: how long an idle worker waits before claiming again (default 1 s);
	// LISTEN/NOTIFY wakes it sooner.
	PollInterval time.Duration
	// ShutdownGrace: how long a stopping worker waits for running handlers before
	// cancelling their contexts (default 30 s).
	ShutdownGrace time.Duration
	// DisableListen turns LISTEN/NOTIFY wake-ups off (polling only).
	DisableListen bool
	// Retry is the policy for handler errors (defaults: 5 attempts, 1 s doubling to 5 min, ±20 %).
	Retry RetryPolicy
	// OutboxTableName, InboxTableName and ColumnMapping name a schema of your own
	// (proto-docs/own-schema.md): a table may be "schema.table"; ColumnMapping renames columns by
	// that page's mapping keys (ColumnMapping.Inbox["idempotencyKey"] = "key"). Empty means
	// QueueBox's own names. The core validates them, naming the key.
	OutboxTableName string
	InboxTableName  string
	ColumnMapping   ColumnMapping
	// OTLPEndpoint is an OpenTelemetry collector's base URL (http://host:4318): each
	// message is handled in a "handle" span exported there, and Message.Trace carries
	// that span's context. Empty means OTEL_EXPORTER_OTLP_ENDPOINT, else no tracing.
	OTLPEndpoint string
	// TracerProvider's tracer wraps each handler call in a CONSUMER span "handle <source>",
	// child of the row's trace context (Message.Trace), with the span in the handler's ctx.
	// Nil means the application's otel.GetTracerProvider() when it set one
	// (otel.SetTracerProvider) before Run; with none, handlers run without a span of their
	// own (OTLPEndpoint still works).
	TracerProvider trace.TracerProvider
	// Schedules the worker's process runs beside its claims, from NewWorker until Close:
	// each tick enqueues one pull row, once however many workers and relays run the same
	// schedule (the tick's time is in the row's idempotency key; docs/operations.md,
	// "Schedules"). The core validates them, naming schedules[i].field.
	Schedules []Schedule
	// Logger receives the native library's records about this worker's source (an
	// unreachable database, lost claims, retries, dead-lettered messages); nil means the
	// logger of SetLogger, or slog.Default(). See logs.go.
	Logger *slog.Logger
}

// Schedule is a periodic schedule: a Cron expression (five fields, or six with seconds
// first) read in TimeZone (an IANA name; default UTC), or a fixed interval Every (at least
// 100 ms, ticking at its multiples since the Unix epoch); exactly one of the two. Each tick
// enqueues a pull row of Source with Payload (JSON-encoded; required, and not nil: a
// schedule without one is refused naming schedules[i].payload), Priority and Headers. Missed
// is "latest" (default: at start, enqueue the most recent tick missed while nothing ran)
// or "skip" (none).
type Schedule struct {
	Name     string
	Source   string
	Cron     string
	TimeZone string
	Every    time.Duration
	Payload  any
	Priority int
	Headers  map[string]string
	Missed   string
}

func (s Schedule) toJSON() map[string]any {
	m := map[string]any{"name": s.Name, "source": s.Source, "payload": s.Payload}
	if s.Cron != "" {
		m["cron"] = s.Cron
	}
	if s.TimeZone != "" {
		m["timeZone"] = s.TimeZone
	}
	if s.Every != 0 {
		m["everyMs"] = millis(s.Every)
	}
	if s.Priority != 0 {
		m["priority"] = s.Priority
	}
	if len(s.Headers) > 0 {
		m["headers"] = s.Headers
	}
	if s.Missed != "" {
		m["missed"] = s.Missed
	}
	return m
}

// ColumnMapping renames the columns of each table: mapping key → column name.
type ColumnMapping struct {
	Outbox map[string]string
	Inbox  map[string]string
}

// RetryPolicy of handler errors; applied by the core. Zero values mean defaults.
type RetryPolicy struct {
	// MaxAttempts: failed attempts before the row is dead (default 5; a row gets
	// MaxAttempts+1 deliveries).
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	// Jitter in [0, 1]; nil means the default 0.2. Use NoJitter for 0.
	Jitter *float64
}

// NoJitter is a zero jitter for RetryPolicy.Jitter.
func NoJitter() *float64 { z := 0.0; return &z }

func millis(d time.Duration) int64 { return d.Milliseconds() }

// optionsJSON renders the options in the native library's JSON (proto-docs/ffi.md).
func (o Options) optionsJSON() (string, error) {
	// handOut: Run queues the batches the core hands out and runs Concurrency handlers on
	// them itself, reporting their times (WorkerOptions::hand_out in the core).
	m := map[string]any{"source": o.Source, "handOut": true}
	if o.BatchSize != 0 {
		m["batchSize"] = o.BatchSize
	}
	if o.Concurrency != 0 {
		m["concurrency"] = o.Concurrency
	}
	switch {
	case o.Lease != 0:
		m["leaseMs"] = millis(o.Lease)
	case o.LeaseMS != 0:
		m["leaseMs"] = o.LeaseMS
	}
	if o.PollInterval != 0 {
		m["pollIntervalMs"] = millis(o.PollInterval)
	}
	if o.ShutdownGrace != 0 {
		m["shutdownGraceMs"] = millis(o.ShutdownGrace)
	}
	if o.DisableListen {
		m["listen"] = false
	}
	r := map[string]any{}
	if o.Retry.MaxAttempts != 0 {
		r["maxAttempts"] = o.Retry.MaxAttempts
	}
	if o.Retry.BaseDelay != 0 {
		r["baseDelayMs"] = millis(o.Retry.BaseDelay)
	}
	if o.Retry.MaxDelay != 0 {
		r["maxDelayMs"] = millis(o.Retry.MaxDelay)
	}
	if o.Retry.Jitter != nil {
		r["jitter"] = *o.Retry.Jitter
	}
	if len(r) > 0 {
		m["retry"] = r
	}
	if o.OutboxTableName != "" {
		m["outboxTableName"] = o.OutboxTableName
	}
	if o.InboxTableName != "" {
		m["inboxTableName"] = o.InboxTableName
	}
	if o.OTLPEndpoint != "" {
		m["otlpEndpoint"] = o.OTLPEndpoint
	}
	if len(o.ColumnMapping.Outbox)+len(o.ColumnMapping.Inbox) > 0 {
		mapping := map[string]any{}
		if len(o.ColumnMapping.Outbox) > 0 {
			mapping["outbox"] = o.ColumnMapping.Outbox
		}
		if len(o.ColumnMapping.Inbox) > 0 {
			mapping["inbox"] = o.ColumnMapping.Inbox
		}
		m["columnMapping"] = mapping
	}
	if len(o.Schedules) > 0 {
		list := make([]map[string]any, len(o.Schedules))
		for i, s := range o.Schedules {
			list[i] = s.toJSON()
		}
		m["schedules"] = list
	}
	b, err := json.Marshal(m)
	return string(b), err
}
