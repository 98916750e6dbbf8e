/** Stable error kinds of the core (`queuebox_core::ErrorKind::as_str`). */
export type ErrorKind =
  | "claim_lost"
  | "connect"
  | "schema_missing"
  | "migration"
  | "database"
  | "config"
  | "invalid_input"
  | "already_finished"
  | "cancelled";

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

const TAG = /^\[([a-z_]+)\] ([\s\S]*)$/;

/** Turns an error thrown by the native addon (`"[kind] message"`) into a typed error. */
export function fromNative(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  const m = TAG.exec(e.message);
  if (!m) return e;
  const kind = m[1] as ErrorKind;
  const err = kind === "claim_lost" ? new ClaimLost(m[2]) : new QueueBoxError(kind, m[2]);
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
