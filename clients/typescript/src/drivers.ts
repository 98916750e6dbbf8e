/**
 * The application's own driver, recognised by the shape of the object it passes in (this
 * package imports no driver): node-postgres (`pg` `Client` / `PoolClient`, anything with
 * pg's `query(text, values)`) and Knex (an instance or a transaction: a function with
 * `raw`). Each driver only runs the SQL text the core rendered in its placeholder style and
 * reports how many rows it affected; none of them writes SQL.
 */
import { InvalidInput } from "./errors.js";

/** What node-postgres offers: `Client`, `PoolClient` (and `Pool`, for `publish` only). */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null }>;
}

/** What Knex offers: `knex` itself or the `trx` of `knex.transaction(async (trx) => …)`. */
export interface KnexQueryable {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
  readonly isTransaction?: boolean;
}

/** A connection or transaction of the application's driver. */
export type AppDb = PgQueryable | KnexQueryable;

/** The core's placeholder style names (`queuebox_core::app_tx::Placeholder`). */
export type Placeholder = "dollar" | "question";

export interface Driver {
  readonly name: "pg" | "knex";
  /** The style the core renders this driver's SQL in. */
  readonly placeholder: Placeholder;
  /** Runs one rendered statement; resolves to the rows it affected. */
  run(sql: string, params: readonly (string | null)[]): Promise<number>;
}

function describe(db: unknown): string {
  if (db === null) return "null";
  if (typeof db === "object" || typeof db === "function") return db.constructor?.name ?? typeof db;
  return typeof db;
}

function rowCount(result: unknown, driver: string): number {
  const n = (result as { rowCount?: unknown } | null | undefined)?.rowCount;
  if (typeof n !== "number") {
    throw new InvalidInput(`invalid input: db: ${driver} did not report rowCount (QueueBox runs on PostgreSQL through node-postgres)`);
  }
  return n;
}

/**
 * The driver of `db`. With `transaction`, refuses the objects on which every statement
 * commits on its own (a Knex instance, a pg `Pool`): a completion there would commit
 * without the business write.
 */
export function driverOf(db: unknown, { transaction = false } = {}): Driver {
  if (typeof db === "function" && typeof (db as { raw?: unknown }).raw === "function") {
    const knex = db as unknown as KnexQueryable;
    if (transaction && knex.isTransaction !== true) {
      throw new InvalidInput(
        "invalid input: db: a Knex instance commits every statement on its own; pass the transaction of knex.transaction(async (trx) => …)",
      );
    }
    return {
      name: "knex",
      placeholder: "question",
      run: async (sql, params) => rowCount(await knex.raw(sql, params), "Knex"),
    };
  }
  if (db !== null && typeof db === "object" && typeof (db as { query?: unknown }).query === "function") {
    const pg = db as PgQueryable & { totalCount?: unknown; idleCount?: unknown };
    if (transaction && typeof pg.totalCount === "number" && typeof pg.idleCount === "number") {
      throw new InvalidInput(
        "invalid input: db: a pg Pool runs each query on any free connection; pass the client of `await pool.connect()` inside BEGIN … COMMIT",
      );
    }
    return {
      name: "pg",
      placeholder: "dollar",
      run: async (sql, params) => rowCount(await pg.query(sql, params as unknown[]), "node-postgres"),
    };
  }
  throw new InvalidInput(`invalid input: db: expected a node-postgres Client/PoolClient or a Knex transaction, got ${describe(db)}`);
}
