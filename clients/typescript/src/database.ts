import native, { type NativeDatabase } from "./native.js";
import { call, callSync } from "./errors.js";
import { encodeParams } from "./params.js";
import type { QueryResult } from "./types.js";

/** A pull row to store (see `Database.enqueue`). */
export interface NewMessage {
  source: string;
  idempotencyKey: string;
  payload: unknown;
  aggregateId?: string | null;
  eventType?: string | null;
  headers?: Record<string, string>;
  correlationId?: string | null;
}

/**
 * Pull inbox rows to cancel (see `Database.cancelInbox`): one row by `id`, or within
 * `source` the row of an idempotency `key`, or every pending row of an `aggregate`. Give
 * exactly one of `id`, `key` and `aggregate`; `source` is required with `key` or `aggregate`.
 */
export interface InboxCancelTarget {
  id?: string;
  source?: string;
  key?: string;
  aggregate?: string;
}

/**
 * Outbox rows to cancel (see `Database.cancelOutbox`): one row by `id`, or every pending row
 * of a `key` (the outbox's ordering key), optionally only those of `topic`.
 */
export interface OutboxCancelTarget {
  id?: string;
  topic?: string;
  key?: string;
}

/** What a cancel did with the rows it named (all zeros when it matched none). */
export interface CancelCounts {
  /** Pending (or scheduled, or waiting for a retry) rows now `cancelled`. */
  cancelled: number;
  /** Rows being handled: left to finish or fail normally. */
  inFlight: number;
  /** Rows already terminal (processed/sent, dead, or cancelled before): unchanged. */
  finished: number;
  /** Inbox push rows: the relay forwards them, they are never cancelled. */
  push: number;
}

/**
 * A small connection pool run by the core: enqueue pull rows (deduplicated on
 * `(source, idempotencyKey)`), cancel pending rows, and run statements outside a handler.
 */
export class Database {
  private constructor(private readonly db: NativeDatabase) {}

  static async connect(databaseUrl: string, options: { maxConnections?: number } = {}): Promise<Database> {
    return new Database(await call(native.connectDatabase(databaseUrl, options.maxConnections ?? null)));
  }

  /** Stores a pull row; `duplicate` is true when the key was already there. */
  async enqueue(message: NewMessage): Promise<{ id: string; duplicate: boolean }> {
    return JSON.parse(await call(this.db.enqueue(JSON.stringify(message))));
  }

  /**
   * Cancels the pending pull rows `target` names (what `queuebox cancel inbox` does): in one
   * statement of the core, so a row being handled is counted in `inFlight` and left to
   * finish, and nothing is cancelled twice. A target that names no row rejects with
   * `InvalidInput` naming the missing field.
   */
  async cancelInbox(target: InboxCancelTarget): Promise<CancelCounts> {
    return JSON.parse(await call(this.db.cancel("inbox", JSON.stringify(target))));
  }

  /** Cancels the pending outbox rows `target` names (what `queuebox cancel outbox` does). */
  async cancelOutbox(target: OutboxCancelTarget): Promise<CancelCounts> {
    return JSON.parse(await call(this.db.cancel("outbox", JSON.stringify(target))));
  }

  /**
   * One statement in its own transaction; resolves to the affected row count. Parameters
   * bind as in a handler's `Transaction` (a `bigint` as its exact integer).
   */
  async execute(sql: string, params: readonly unknown[] = []): Promise<number> {
    return call(this.db.execute(sql, encodeParams(params)));
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
    const rows = JSON.parse(await call(this.db.query(sql, encodeParams(params)))) as Row[];
    return { rows, rowCount: rows.length };
  }

  /** SQL text outside a transaction (several statements, no parameters), e.g. CREATE DATABASE. */
  executeScript(sql: string): Promise<number> {
    return call(this.db.executeScript(sql));
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

/** Applies the QueueBox migrations to the database; resolves to the names applied now. */
export function migrate(databaseUrl: string): Promise<string[]> {
  return call(native.migrate(databaseUrl));
}

/**
 * Runs one conformance vector case (`proto-docs/vectors/*.json`) through the core's real
 * functions and returns its output.
 */
export function evaluate(kind: string, input: unknown): unknown {
  return JSON.parse(callSync(() => native.evaluate(kind, JSON.stringify(input))));
}
