/**
 * Stable error kinds of the core: `queuebox_core::ErrorKind`, the one table of QueueBox
 * (proto-docs/error-kinds.json; test/errors.test.mjs checks this list against it exactly).
 */
export const ERROR_KINDS = [
  "claim_lost",
  "connect",
  "schema_missing",
  "migration",
  "database",
  "config",
  "invalid_input",
  "already_finished",
  "cancelled",
] as const;

/** One of {@link ERROR_KINDS}. */
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** An error raised by the QueueBox core; `kind` says what a caller can act on. */
export class QueueBoxError extends Error {
  readonly kind: ErrorKind;
  constructor(kind: ErrorKind, message: string) {
    super(message);
    this.name = "QueueBoxError";
    this.kind = kind;
  }
}

/** A fenced write matched no row: the lease expired or another worker owns the row. */
export class ClaimLost extends QueueBoxError {
  constructor(message: string) {
    super("claim_lost", message);
    this.name = "ClaimLost";
  }
}

/** The database could not be reached (refused, timed out, TLS, or unavailable mid-call). */
export class ConnectError extends QueueBoxError {
  constructor(message: string) {
    super("connect", message);
    this.name = "ConnectError";
  }
}

/** A QueueBox table is missing: run the migrations. */
export class SchemaMissing extends QueueBoxError {
  constructor(message: string) {
    super("schema_missing", message);
    this.name = "SchemaMissing";
  }
}

/** The migration history disagrees with this build. */
export class MigrationError extends QueueBoxError {
  constructor(message: string) {
    super("migration", message);
    this.name = "MigrationError";
  }
}

/** A statement failed. */
export class DatabaseError extends QueueBoxError {
  constructor(message: string) {
    super("database", message);
    this.name = "DatabaseError";
  }
}

/** An option is invalid; the message names it. */
export class ConfigError extends QueueBoxError {
  constructor(message: string) {
    super("config", message);
    this.name = "ConfigError";
  }
}

/** A value given by the caller is invalid. */
export class InvalidInput extends QueueBoxError {
  constructor(message: string) {
    super("invalid_input", message);
    this.name = "InvalidInput";
  }
}

/** The task was already completed, retried, dead-lettered, released or abandoned. */
export class AlreadyFinished extends QueueBoxError {
  constructor(message: string) {
    super("already_finished", message);
    this.name = "AlreadyFinished";
  }
}

/** The task was cancelled (lease lost or shutdown grace over); it may only be abandoned. */
export class Cancelled extends QueueBoxError {
  constructor(message: string) {
    super("cancelled", message);
    this.name = "Cancelled";
  }
}

/** The error class of each kind. */
export const ERROR_CLASSES: { readonly [K in ErrorKind]: new (message: string) => QueueBoxError } = {
  claim_lost: ClaimLost,
  connect: ConnectError,
  schema_missing: SchemaMissing,
  migration: MigrationError,
  database: DatabaseError,
  config: ConfigError,
  invalid_input: InvalidInput,
  already_finished: AlreadyFinished,
  cancelled: Cancelled,
};

/** The typed error of `kind` with `message`. */
export function errorOf(kind: ErrorKind, message: string): QueueBoxError {
  return new ERROR_CLASSES[kind](message);
}

/**
 * Thrown by a handler to retry its message: after `delayMs` when given, otherwise after
 * the retry policy's backoff (dead once the attempts are spent).
 */
export class Retry extends Error {
  readonly delayMs: number | undefined;
  constructor(reason = "retry requested by the handler", options: { delayMs?: number } = {}) {
    super(reason);
    this.name = "Retry";
    const d = options.delayMs;
    if (d !== undefined && (!Number.isFinite(d) || d < 0)) {
      throw new RangeError(`Retry delayMs must be a finite number >= 0, got ${d}`);
    }
    this.delayMs = d === undefined ? undefined : Math.round(d);
  }
}

/** Thrown by a handler to dead-letter its message at once with `reason`. */
export class Dead extends Error {
  constructor(reason = "dead-lettered by the handler") {
    super(reason);
    this.name = "Dead";
  }
}

function isKind(code: unknown): code is ErrorKind {
  return typeof code === "string" && (ERROR_KINDS as readonly string[]).includes(code);
}

/**
 * Turns an error thrown by the native addon into a typed error. The addon sets the error's
 * `code` to the core's kind name natively (bindings/node `Typed`); anything else passes
 * through unchanged.
 */
export function fromNative(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  const code = (e as Error & { code?: unknown }).code;
  if (!isKind(code)) return e;
  const err = errorOf(code, e.message);
  if (e.stack) err.stack = `${err.name}: ${err.message}\n${e.stack.split("\n").slice(1).join("\n")}`;
  return err;
}

/** Awaits a native call, rethrowing its error as a typed one. */
export async function call<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw fromNative(e);
  }
}

/** Runs a synchronous native call, rethrowing its error as a typed one. */
export function callSync<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw fromNative(e);
  }
}
