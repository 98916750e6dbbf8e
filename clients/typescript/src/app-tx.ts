/**
 * Your transaction, your driver: complete a claimed message, publish outbox rows and enqueue
 * pull rows inside
 * the application's own transaction, on its own node-postgres client or Knex transaction,
 * so its repository code and QueueBox's rows share one commit.
 *
 * The core renders every statement (SQL text in the driver's placeholder style, parameters
 * as text, how to read the result) and keeps the fence; this module runs the statement on
 * the driver it was given and reads the affected-row count (`./drivers.ts`).
 */
import native from "./native.js";
import { callSync, ClaimLost, DatabaseError, InvalidInput, QueueBoxError } from "./errors.js";
import { driverOf, type AppDb } from "./drivers.js";
import { nativeTaskOf } from "./worker.js";
import type { InboxMessage } from "./types.js";

/** Options of an outbox row; everything but `topic` and `payload`. */
export interface PublishOptions {
  /** Ordering / partition key (`X-Message-Key`, the Kafka record key); at most 255 characters. */
  key?: string | null;
  /** Sent with the message; the relay's header rules apply (no framing or relay-owned names). */
  headers?: Record<string, string> | null;
  aggregateType?: string | null;
  /** Dead-letter ceiling, at least 1 (default 5). */
  maxAttempts?: number;
  /** Not delivered before this many ms after the insert (database clock). Not with `scheduledAt`. */
  delayMs?: number;
  /** Not delivered before this time. Not with `delayMs`. */
  scheduledAt?: Date | string;
}

/** One outbox row for {@link publishMany}. */
export interface OutboxMessage extends PublishOptions {
  topic: string;
  /** Any JSON value but null. */
  payload: unknown;
}

/** Options of a pull row; everything but `source` and `payload`. */
export interface EnqueueOptions {
  /**
   * Deduplicates the row within its source: the same key again stores nothing and resolves
   * to the stored row's id with `duplicate: true`. Trimmed; at most 255 characters. Left
   * out, every call is a new row.
   */
  idempotencyKey?: string | null;
  /** Claimed first when higher, -32767..32767 (default 0). An aggregate's order comes first. */
  priority?: number;
  /** Rows of one aggregate are handled one at a time, in enqueue order. */
  aggregateId?: string | null;
  /** Handed to the handler as `message.eventType`. */
  eventType?: string | null;
  /** Handed to the handler as `message.correlationId`; at most 128 characters. */
  correlationId?: string | null;
  /** Handed to the handler as `message.headers`; the inbox's header rules apply. */
  headers?: Record<string, string> | null;
  /** Dead-letter ceiling, at least 1 (default: the worker's retry policy decides). */
  maxAttempts?: number;
  /** Not claimed before this many ms after the insert (database clock). Not with `scheduledAt`. */
  delayMs?: number;
  /** Not claimed before this time. Not with `delayMs`. */
  scheduledAt?: Date | string;
}

/** One pull row for {@link enqueueMany}. */
export interface EnqueueMessage<T = unknown> extends EnqueueOptions {
  /** The pull source whose workers claim the row. */
  source: string;
  /** Any JSON value. */
  payload: T;
}

/** The outcome of one enqueued message. */
export interface Enqueued {
  /** The new row's id, or for a duplicate the stored row's. */
  id: string;
  /**
   * `(source, idempotencyKey)` was stored already (by an earlier or concurrent transaction,
   * or an earlier message of the same call): nothing was inserted.
   */
  duplicate: boolean;
}

/** A statement the core rendered for the application's driver. */
interface Statement {
  sql: string;
  params: (string | null)[];
  expect: "one_row_affected" | "rows_affected" | "enqueue_rows";
  ids?: string[];
}

const CORE_NAMES: Record<string, string> = {
  aggregateType: "aggregate_type",
  maxAttempts: "max_attempts",
  delayMs: "delay_ms",
  scheduledAt: "scheduled_at",
  idempotencyKey: "idempotency_key",
  aggregateId: "aggregate_id",
  eventType: "event_type",
  correlationId: "correlation_id",
};
const JS_NAMES = new Map(Object.entries(CORE_NAMES).map(([js, core]) => [core, js]));

/** A message as the core reads it (its field names); other keys go through for the core to refuse. */
function coreMessage(m: object, at: string): Record<string, unknown> {
  if (m === null || typeof m !== "object") throw new InvalidInput(`invalid input: ${at} must be an object`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(m)) {
    if (v === undefined) continue;
    if (k === "scheduledAt" && v instanceof Date) {
      if (Number.isNaN(v.getTime())) throw new InvalidInput(`invalid input: ${at}.scheduledAt is an invalid Date`);
      out.scheduled_at = v.toISOString();
    } else {
      out[CORE_NAMES[k] ?? k] = v;
    }
  }
  return out;
}

/** The core names fields as its JSON does; say the names this API takes. */
function jsNames(e: unknown, single: boolean): unknown {
  if (!(e instanceof QueueBoxError)) return e;
  let text = e.message.replace(
    /\b(aggregate_type|max_attempts|delay_ms|scheduled_at|idempotency_key|aggregate_id|event_type|correlation_id)\b/g,
    (n) => JS_NAMES.get(n) ?? n,
  );
  if (single) text = text.replace(/messages\[0\]\.?/g, "");
  if (text === e.message) return e;
  const renamed = new (e.constructor as new (message: string) => QueueBoxError)(text);
  renamed.stack = e.stack?.replace(e.message, text);
  return renamed;
}

function render(
  kind: "publishStatement" | "enqueueStatement",
  messages: object[],
  placeholder: string,
  single: boolean,
): Statement {
  if (!Array.isArray(messages)) throw new InvalidInput("invalid input: messages must be an array");
  const json = JSON.stringify(messages.map((m, i) => coreMessage(m, single ? "message" : `messages[${i}]`)));
  try {
    return JSON.parse(callSync(() => native[kind](json, placeholder)));
  } catch (e) {
    throw jsNames(e, single);
  }
}

async function runPublish(db: AppDb, messages: OutboxMessage[], single: boolean): Promise<string[]> {
  const driver = driverOf(db);
  const st = render("publishStatement", messages, driver.placeholder, single);
  const ids = st.ids ?? [];
  const n = await driver.run(st.sql, st.params);
  if (n !== ids.length) throw new DatabaseError(`database error during outbox publish: inserted ${n} rows of ${ids.length}`);
  return ids;
}

/** Messages whose completion ran (one row affected) in an application transaction. */
const completed = new WeakSet<InboxMessage>();

/**
 * Completes `message` inside the application's transaction on `db`: the row turns
 * `processed` when that transaction commits, together with the business write. From here
 * on the worker no longer renews the lease nor completes the row itself, so commit soon.
 *
 * Rejects with {@link ClaimLost} when the lease was lost (another worker owns the row):
 * let it reach your transaction so the business write rolls back. `db` is the pg client
 * inside `BEGIN … COMMIT` or the Knex `trx`; `message` is the one the handler received.
 */
export async function completeTx(db: AppDb, message: InboxMessage): Promise<void> {
  const driver = driverOf(db, { transaction: true });
  const task = nativeTaskOf(message);
  const st: Statement = JSON.parse(callSync(() => task.completionStatement(driver.placeholder)));
  const n = await driver.run(st.sql, st.params);
  if (n === 1) {
    completed.add(message);
    return;
  }
  if (completed.has(message)) {
    // Run twice in one transaction: the first run already took the claim, so this one
    // matches no row. Not a lost claim; the application's transaction still fails, so a
    // transaction that rolled back and lost the claim meanwhile commits nothing either.
    // (A new transaction after a rollback completes again: its run affects the row.)
    throw new InvalidInput("invalid input: message: completeTx already completed this message; it runs once per transaction (a second run in the same transaction, or after it committed, matches no row)");
  }
  // The core settles the task, counts and logs the lost claim, and throws ClaimLost naming
  // the row.
  callSync(() => task.claimLost());
  throw new ClaimLost(`claim lost on inbox row ${message.id}`); // not reached: claimLost throws
}

/**
 * Writes one outbox row in the application's transaction on `db` (a pg client or Knex
 * transaction; on a pg `Pool` or the Knex instance it commits at once); resolves to the
 * row's id. Nothing is delivered unless that transaction commits.
 */
export async function publish(db: AppDb, topic: string, payload: unknown, options: PublishOptions = {}): Promise<string> {
  if (options === null || typeof options !== "object") throw new InvalidInput("invalid input: options must be an object");
  const [id] = await runPublish(db, [{ ...options, topic, payload }], true);
  return id;
}

/** Writes many outbox rows with one statement; resolves to their ids in order. */
export async function publishMany(db: AppDb, messages: OutboxMessage[]): Promise<string[]> {
  return runPublish(db, messages, false);
}

async function runEnqueue(db: AppDb, messages: EnqueueMessage[], single: boolean): Promise<Enqueued[]> {
  const driver = driverOf(db);
  const st = render("enqueueStatement", messages, driver.placeholder, single);
  if (st.expect !== "enqueue_rows") throw new DatabaseError(`database error during enqueue: the statement expects ${st.expect}`);
  const rows = await driver.rows(st.sql, st.params);
  // One (n, id, duplicate) row per message; `n` (int8) may come back as a string.
  const out: Enqueued[] = new Array(messages.length);
  for (const row of rows) {
    const n = Number(row.n);
    if (!Number.isInteger(n) || n < 0 || n >= messages.length || out[n] !== undefined) {
      throw new DatabaseError(`database error during enqueue: row n = ${String(row.n)} for ${messages.length} messages`);
    }
    out[n] = { id: String(row.id), duplicate: row.duplicate === true || row.duplicate === "t" };
  }
  if (rows.length !== messages.length) {
    throw new DatabaseError(`database error during enqueue: ${rows.length} result rows for ${messages.length} messages`);
  }
  return out;
}

/**
 * Stores one pull row for `source`'s workers in the application's transaction on `db` (the
 * same objects as {@link publish}). Workers claim it only once that transaction commits; a
 * rollback leaves nothing. With an `idempotencyKey` already stored for `source`, nothing is
 * inserted and the result is the stored row's id with `duplicate: true`.
 */
export async function enqueue<T = unknown>(db: AppDb, source: string, payload: T, options: EnqueueOptions = {}): Promise<Enqueued> {
  if (options === null || typeof options !== "object") throw new InvalidInput("invalid input: options must be an object");
  const [one] = await runEnqueue(db, [{ ...options, source, payload }], true);
  return one;
}

/**
 * Stores many pull rows with one statement; resolves to one outcome per message, in order.
 * A bad message rejects with `InvalidInput` naming it (`messages[2].priority: …`) and
 * nothing is stored.
 */
export async function enqueueMany(db: AppDb, messages: EnqueueMessage[]): Promise<Enqueued[]> {
  return runEnqueue(db, messages, false);
}
