/**
 * A claimed inbox message as a handler sees it (never the claim token). `T` is the payload's
 * type: what the worker's `validate` returns, else what you declare (`Worker<Order>`),
 * else `unknown`.
 */
export interface InboxMessage<T = unknown> {
  id: string;
  source: string;
  idempotencyKey: string;
  aggregateId: string | null;
  eventType: string | null;
  /** The stored JSON payload, parsed (and checked by the worker's `validate`, when given). */
  payload: T;
  headers: Record<string, string>;
  /** Failed attempts so far (0 on the first delivery). */
  attempt: number;
  correlationId: string | null;
  createdAt: Date;
  /**
   * The W3C trace context to continue the message's trace from (absent when the row has
   * none): the row's own, or, with `OTEL_EXPORTER_OTLP_ENDPOINT` set for the worker's
   * process, the core's `handle` span. Hand both values to your
   * OpenTelemetry propagator as the `traceparent` / `tracestate` headers.
   */
  trace?: { traceparent: string; tracestate: string | null };
}

/** The result of a query: rows as objects keyed by column name. */
export interface QueryResult<Row = Record<string, unknown>> {
  rows: Row[];
  rowCount: number;
}

/**
 * The handler's transaction, opened on first use. Writes made through it commit together
 * with the message's completion, or roll back when the handler throws. Placeholders are
 * positional (`$1`, `$2`, ...). Parameters are JSON values, each bound by its kind whatever
 * the same statement ran with before: `null` is NULL typed by the statement, booleans
 * boolean, strings text, an integer that fits 64 bits bigint, every other number (a
 * fraction, a `bigint` beyond 64 bits) exact `numeric` from its literal digits, objects and
 * arrays jsonb (a `bigint` inside keeps its digits too); PostgreSQL's assignment rules then
 * convert to the column's type. `bigint` values are accepted anywhere in `params`. Rows come
 * back through `JSON.parse`: a `numeric` column is a `number` (the nearest double; select
 * `v::text` to keep every digit).
 */
export interface Transaction {
  execute(sql: string, params?: readonly unknown[]): Promise<number>;
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
}

/**
 * A message handler. Return normally to complete the message (in the same transaction as
 * the writes made through `tx`); throw `Retry` or `Dead` to choose the outcome; any other
 * error is retried by the retry policy and dead-lettered at `retry.maxAttempts`. `signal`
 * aborts when the lease is lost or shutdown's grace runs out: stop then, nothing will be
 * completed.
 */
export type Handler<T = unknown> = (message: InboxMessage<T>, tx: Transaction, signal: AbortSignal) => unknown | Promise<unknown>;

/** Retry schedule: `min(baseDelayMs * 2^attempt, maxDelayMs)` ± `jitter`, dead at `maxAttempts`. */
export interface RetryOptions {
  /** Retries before dead-lettering (default 5; a row gets maxAttempts + 1 deliveries). */
  maxAttempts?: number;
  /** First retry delay (default 1000). */
  baseDelayMs?: number;
  /** Largest retry delay (default 300000). */
  maxDelayMs?: number;
  /** Fraction of the delay added or removed at random, 0..1 (default 0.2). */
  jitter?: number;
}

/**
 * Where the worker's records go: the core's (an unreachable database, lost claims, retries,
 * dead-lettered messages, dead-owner recovery) and the client's own warnings. `fields` holds
 * `message_id`, `source`, `topic`, `attempt`, `error`, `target`... A level whose method is
 * missing is not wanted (it is filtered out in the core, at no cost); `error` falls back to
 * `warn`. `console` itself is a valid Logger.
 */
export interface Logger {
  debug?(message: string, fields?: Record<string, unknown>): void;
  info?(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error?(message: string, fields?: Record<string, unknown>): void;
}

export interface WorkerOptions<T = unknown> {
  /** PostgreSQL URL of the database holding the inbox (required). */
  databaseUrl: string;
  /** The source whose pull rows this worker claims (required). */
  source: string;
  /**
   * Rows claimed at once and the most one worker holds. Unset, the core adapts it to
   * `concurrency`, as for every language (1024 up to 8 handlers, shrinking to 256 at 32,
   * then 2 × concurrency, at most 10000) and lets up to a
   * batch more finish their completion statement while the next claim runs;
   * `options.batchSize` says the value in force. Within the batch the worker holds what
   * the handlers' measured times call for: all of it for fast handlers, about
   * `concurrency` rows for slow ones.
   */
  batchSize?: number;
  /** Handlers running at once (default 1; at most batchSize). */
  concurrency?: number;
  /** Alias of `concurrency` (the name the C# client uses). */
  maxConcurrency?: number;
  /** Lease length in ms (default 30000); renewed every third of it. */
  leaseMs?: number;
  /** Wait between claims when idle, in ms (default 1000); LISTEN/NOTIFY wakes sooner. */
  pollIntervalMs?: number;
  /** How long shutdown waits for running handlers, in ms (default 30000). */
  shutdownGraceMs?: number;
  /** Wake on LISTEN/NOTIFY (default true). */
  listen?: boolean;
  retry?: RetryOptions;
  /**
   * Checks (and may convert) each payload before the handler runs; its return value is
   * `message.payload`, and its return type the payload type of `Worker<T>`. A zod schema's
   * `parse` fits as it is (`validate: Order.parse`; this package does not depend on zod).
   * When it throws, the handler does not run and the row is **dead-lettered at once** with
   * `last_error` `invalid payload: <the error's message>`: a payload that fails its schema fails
   * it on every attempt, so retries would only delay the dead letter. To retry instead (a
   * check that depends on something that may change), throw `Retry`; `Dead` keeps its own
   * reason.
   */
  validate?: (payload: unknown) => T;
  /** Where the worker's records go (default: warnings and errors to the console). */
  logger?: Logger;
  /**
   * An OpenTelemetry collector's base URL (`http://host:4318`): each message is handled in a
   * `handle` span exported there over OTLP/HTTP, and `message.trace` is that span's context.
   * Unset means `OTEL_EXPORTER_OTLP_ENDPOINT`, else no tracing.
   */
  otlpEndpoint?: string;
  /**
   * The OpenTelemetry tracer provider whose tracer wraps each handler call in a `CONSUMER`
   * span `handle <source>`, child of the row's trace context (`message.trace`). Unset means
   * the provider registered with `@opentelemetry/api` when `run` starts, if any; with none,
   * handlers run without a span of their own (the `otlpEndpoint` exporter still works).
   */
  tracerProvider?: TracerProviderLike;
  /**
   * A schema of your own (proto-docs/own-schema.md): the tables' names (`"schema.table"`
   * allowed) and renamed columns by mapping key, e.g.
   * `{ inbox: { idempotencyKey: "key" } }`. Claims, completions and `completeTx` use them.
   */
  outboxTableName?: string;
  inboxTableName?: string;
  columnMapping?: { outbox?: Record<string, string>; inbox?: Record<string, string> };
  /**
   * Periodic schedules this worker runs beside its claims until it stops: each tick enqueues
   * one pull row, once however many workers (and relays) run the same schedule, keyed
   * `schedule:<name>:<tick as RFC 3339 UTC with milliseconds>`. The core checks them; an error
   * names the field, e.g. `schedules[0].cron`.
   */
  schedules?: Schedule[];
}

/**
 * One periodic schedule (`WorkerOptions.schedules`): set exactly one of `cron` and `everyMs`.
 * Missed ticks (nothing ran the schedule) are never enqueued in a flood: see `missed`.
 */
export interface Schedule {
  /** Unique among the worker's schedules; part of every tick's idempotency key (at most 200 characters). */
  name: string;
  /** The source the ticks' rows are enqueued into (any source, not only the worker's). */
  source: string;
  /** A cron expression: five fields, or six with seconds first. */
  cron?: string;
  /** The IANA time zone `cron` is read in (default `UTC`); for `cron` only. */
  timeZone?: string;
  /** A fixed interval in ms (at least 100): ticks at its multiples since the Unix epoch. */
  everyMs?: number;
  /**
   * Every tick's row payload: required, any JSON value but `null` (the rows' payload column
   * holds a JSON document; a schedule without one is refused naming `schedules[i].payload`).
   */
  payload: unknown;
  /** The rows' priority (default 0). */
  priority?: number;
  /** The rows' headers. */
  headers?: Record<string, string>;
  /**
   * Ticks missed while nothing ran the schedule: `"latest"` (default) enqueues the most
   * recent one once, `"skip"` none.
   */
  missed?: "latest" | "skip";
}

/**
 * An `@opentelemetry/api` `TracerProvider` (named by shape so that this package's types do
 * not need `@opentelemetry/api` installed).
 */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

/** The options in force, defaults filled in by the core. */
export interface ResolvedOptions {
  source: string;
  batchSize: number;
  concurrency: number;
  leaseMs: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  listen: boolean;
  retry: Required<RetryOptions>;
}

export interface WorkerStats {
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  released: number;
  claimsLost: number;
  claimErrors: number;
}

export interface RunOptions {
  /** Aborting it shuts the worker down gracefully; `run` resolves when it is done. */
  signal?: AbortSignal;
}
