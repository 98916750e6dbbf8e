/**
 * The application's own driver, recognised by the shape of the object it passes in (this
 * package imports no driver up front): node-postgres (`pg` `Client` / `PoolClient`, anything
 * with pg's `query(text, values)`), Knex (an instance or a transaction: a function with
 * `raw`) and Drizzle ORM on node-postgres (a database or the `tx` of `db.transaction`: an
 * object with `execute` and `transaction`; `drizzle-orm` is imported only when one is
 * used), and postgres.js (its `sql` or the `sql` of `sql.begin(async (sql) => …)`: a
 * function with `unsafe` and `begin` or `savepoint`) and Kysely on node-postgres (a `Kysely`
 * or the `trx` of `db.transaction().execute(async (trx) => …)`: an object with
 * `executeQuery` and `isTransaction`; `kysely` is imported only when one is used), and
 * Prisma (a `PrismaClient` or the `tx` of `prisma.$transaction(async (tx) => …)`: an object
 * with `$executeRawUnsafe` and `$queryRawUnsafe`). Each driver only runs the SQL text the
 * core rendered in its placeholder style and
 * reports how many rows it affected; none of them writes SQL.
 */
import { InvalidInput } from "./errors.js";

/** What node-postgres offers: `Client`, `PoolClient` (and `Pool`, for `publish` only). */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows?: unknown[] }>;
}

/** What Knex offers: `knex` itself or the `trx` of `knex.transaction(async (trx) => …)`. */
export interface KnexQueryable {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
  readonly isTransaction?: boolean;
}

/**
 * What Drizzle ORM (node-postgres) offers: the database of `drizzle(pool)` or the `tx` of
 * `db.transaction(async (tx) => …)`, which alone has `rollback`.
 */
export interface DrizzleQueryable {
  // Typed loosely on purpose: Drizzle's own signatures are generic over its schema, and any
  // database or transaction of it must be accepted here.
  execute: (...args: never[]) => PromiseLike<unknown>;
  transaction: (...args: never[]) => unknown;
  rollback?: (...args: never[]) => unknown;
}

/**
 * What postgres.js offers: `postgres(url)` itself (with `begin`) or the `sql` of
 * `sql.begin(async (sql) => …)` (with `savepoint`). `unsafe` runs the core's text with its
 * parameters bound (never interpolated).
 */
export interface PostgresJsQueryable {
  // Typed loosely on purpose: postgres.js's own types are generic over its options.
  unsafe: (query: string, parameters?: never[]) => PromiseLike<unknown>;
  typed?: (...args: never[]) => unknown;
  begin?: (...args: never[]) => unknown;
  savepoint?: (...args: never[]) => unknown;
}

/**
 * What Kysely (PostgresDialect) offers: the `Kysely` instance or the `trx` of
 * `db.transaction().execute(async (trx) => …)`, whose `isTransaction` is true.
 */
export interface KyselyQueryable {
  // Typed loosely on purpose: Kysely's own signatures are generic over its schema.
  executeQuery: (...args: never[]) => PromiseLike<unknown>;
  readonly isTransaction: boolean;
}

/**
 * What Prisma offers: the `PrismaClient` or the `tx` of `prisma.$transaction(async (tx) =>
 * …)` (an interactive transaction), which has no `$connect` / `$disconnect`. Its raw calls
 * bind the core's parameters (never interpolated).
 */
export interface PrismaQueryable {
  // Typed loosely on purpose: Prisma's own signatures are generated per schema.
  $executeRawUnsafe: (query: string, ...values: never[]) => PromiseLike<unknown>;
  $queryRawUnsafe: (query: string, ...values: never[]) => PromiseLike<unknown>;
  $disconnect?: (...args: never[]) => unknown;
}

/** A connection or transaction of the application's driver. */
export type AppDb = PgQueryable | KnexQueryable | DrizzleQueryable | PostgresJsQueryable | KyselyQueryable | PrismaQueryable;

/** The core's placeholder style names (`queuebox_core::app_tx::Placeholder`). */
export type Placeholder = "dollar" | "question";

export interface Driver {
  readonly name: "pg" | "knex" | "drizzle" | "postgres.js" | "kysely" | "prisma";
  /** The style the core renders this driver's SQL in. */
  readonly placeholder: Placeholder;
  /** Runs one rendered statement; resolves to the rows it affected. */
  run(sql: string, params: readonly (string | null)[]): Promise<number>;
  /** Runs one rendered query; resolves to its rows as the driver returns them. */
  rows(sql: string, params: readonly (string | null)[]): Promise<Record<string, unknown>[]>;
}

function describe(db: unknown): string {
  if (db === null) return "null";
  if (typeof db === "object" || typeof db === "function") return db.constructor?.name ?? typeof db;
  return typeof db;
}

function rowsOf(result: unknown, driver: string): Record<string, unknown>[] {
  const rows = (result as { rows?: unknown } | null | undefined)?.rows;
  if (!Array.isArray(rows)) {
    throw new InvalidInput(`invalid input: db: ${driver} did not return rows (QueueBox runs on PostgreSQL through node-postgres)`);
  }
  return rows as Record<string, unknown>[];
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
  if (
    typeof db === "function" &&
    typeof (db as { unsafe?: unknown }).unsafe === "function" &&
    (typeof (db as { begin?: unknown }).begin === "function" || typeof (db as { savepoint?: unknown }).savepoint === "function")
  ) {
    const pgjs = db as unknown as PostgresJsQueryable;
    // Only the sql of sql.begin has savepoint; the top-level sql runs each query on any
    // connection of its pool, committing at once.
    if (transaction && typeof pgjs.savepoint !== "function") {
      throw new InvalidInput("invalid input: db: a postgres.js sql commits every statement on its own; pass the sql of sql.begin(async (sql) => …)");
    }
    // Every parameter goes as text (OID 25), which the core's SQL casts: left untyped,
    // postgres.js asks the server for the types and then JSON-encodes a string again for a
    // jsonb parameter (a JSON string scalar instead of the array the core wrote).
    const typed = pgjs.typed as unknown as ((value: string, oid: number) => unknown) | undefined;
    if (typeof typed !== "function") throw new InvalidInput("invalid input: db: looks like postgres.js, but has no sql.typed (postgres.js 3.4 or later needed)");
    // Resolves to an array of rows carrying `count` (the affected rows).
    const unsafe = (text: string, params: readonly (string | null)[]) =>
      (pgjs.unsafe as unknown as (q: string, p: unknown[]) => PromiseLike<unknown>).call(
        pgjs,
        text,
        params.map((p) => (p === null ? null : typed.call(pgjs, p, 25))),
      );
    return {
      name: "postgres.js",
      placeholder: "dollar",
      run: async (text, params) => {
        const n = ((await unsafe(text, params)) as { count?: unknown } | null)?.count;
        if (typeof n !== "number") throw new InvalidInput("invalid input: db: postgres.js did not report count");
        return n;
      },
      rows: async (text, params) => {
        const rows = await unsafe(text, params);
        if (!Array.isArray(rows)) throw new InvalidInput("invalid input: db: postgres.js did not return rows");
        return rows as Record<string, unknown>[];
      },
    };
  }
  if (
    db !== null &&
    typeof db === "object" &&
    typeof (db as { $executeRawUnsafe?: unknown }).$executeRawUnsafe === "function" &&
    typeof (db as { $queryRawUnsafe?: unknown }).$queryRawUnsafe === "function"
  ) {
    const prisma = db as PrismaQueryable;
    // An interactive transaction's client lacks the client's lifecycle methods; on the
    // client itself every raw call runs on any connection of its pool and commits at once.
    if (transaction && typeof prisma.$disconnect === "function") {
      throw new InvalidInput("invalid input: db: a PrismaClient commits every statement on its own; pass the tx of prisma.$transaction(async (tx) => …)");
    }
    const executeRaw = prisma.$executeRawUnsafe as unknown as (q: string, ...values: unknown[]) => PromiseLike<unknown>;
    const queryRaw = prisma.$queryRawUnsafe as unknown as (q: string, ...values: unknown[]) => PromiseLike<unknown>;
    return {
      name: "prisma",
      placeholder: "dollar",
      run: async (text, params) => {
        const n = await executeRaw.call(prisma, text, ...params);
        if (typeof n !== "number") throw new InvalidInput("invalid input: db: Prisma's $executeRawUnsafe did not resolve to a row count");
        return n;
      },
      rows: async (text, params) => {
        // Prisma reads int8 as bigint and keeps uuid and boolean as they are: what the
        // callers' reading of the result takes.
        const rows = await queryRaw.call(prisma, text, ...params);
        if (!Array.isArray(rows)) throw new InvalidInput("invalid input: db: Prisma's $queryRawUnsafe did not return rows");
        return rows as Record<string, unknown>[];
      },
    };
  }
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
      rows: async (sql, params) => rowsOf(await knex.raw(sql, params), "Knex"),
    };
  }
  if (
    db !== null &&
    typeof db === "object" &&
    typeof (db as { executeQuery?: unknown }).executeQuery === "function" &&
    typeof (db as { isTransaction?: unknown }).isTransaction === "boolean"
  ) {
    const kysely = db as KyselyQueryable;
    if (transaction && kysely.isTransaction !== true) {
      throw new InvalidInput(
        "invalid input: db: a Kysely instance commits every statement on its own; pass the trx of db.transaction().execute(async (trx) => …)",
      );
    }
    const executeQuery = kysely.executeQuery as unknown as (query: unknown) => PromiseLike<{ rows?: unknown; numAffectedRows?: unknown }>;
    const run = async (text: string, params: readonly (string | null)[]) => executeQuery.call(kysely, await kyselyQuery(text, params));
    return {
      name: "kysely",
      // The PostgresDialect hands the text to node-postgres as it is.
      placeholder: "dollar",
      run: async (text, params) => {
        const n = (await run(text, params))?.numAffectedRows;
        if (typeof n !== "bigint") throw new InvalidInput("invalid input: db: Kysely did not report numAffectedRows (QueueBox runs on its PostgresDialect)");
        return Number(n);
      },
      rows: async (text, params) => rowsOf(await run(text, params), "Kysely"),
    };
  }
  if (
    db !== null &&
    typeof db === "object" &&
    typeof (db as { execute?: unknown }).execute === "function" &&
    typeof (db as { transaction?: unknown }).transaction === "function"
  ) {
    const drizzle = db as DrizzleQueryable;
    if (transaction && typeof drizzle.rollback !== "function") {
      throw new InvalidInput(
        "invalid input: db: a Drizzle database commits every statement on its own; pass the tx of db.transaction(async (tx) => …)",
      );
    }
    const execute = drizzle.execute as unknown as (query: unknown) => PromiseLike<unknown>;
    return {
      name: "drizzle",
      placeholder: "question",
      run: async (text, params) => rowCount(await execute.call(drizzle, await drizzleQuery(text, params)), "Drizzle"),
      // On node-postgres, `execute` resolves to pg's result: its `rows` are the query's.
      rows: async (text, params) => rowsOf(await execute.call(drizzle, await drizzleQuery(text, params)), "Drizzle"),
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
      rows: async (sql, params) => rowsOf(await pg.query(sql, params as unknown[]), "node-postgres"),
    };
  }
  throw new InvalidInput(
    `invalid input: db: expected a node-postgres Client/PoolClient, a Knex transaction, a Drizzle tx, a Kysely trx, a postgres.js sql.begin transaction or a Prisma $transaction tx, got ${describe(db)}`,
  );
}

/**
 * The core's `?`-placeholder text as a Drizzle `SQL` object: the text between placeholders
 * raw, each value a bound parameter. The core renders no other `?` (Knex relies on the same).
 * `drizzle-orm` is the application's own copy, resolved only when a Drizzle handle is used.
 */
async function drizzleQuery(text: string, params: readonly (string | null)[]): Promise<unknown> {
  let orm: { sql: DrizzleSqlTag };
  try {
    orm = (await import("drizzle-orm")) as unknown as { sql: DrizzleSqlTag };
  } catch {
    throw new InvalidInput("invalid input: db: looks like Drizzle, but the drizzle-orm package cannot be imported");
  }
  const { sql } = orm;
  const parts = text.split("?");
  if (parts.length !== params.length + 1) {
    throw new InvalidInput(`invalid input: the statement has ${parts.length - 1} placeholders for ${params.length} parameters`);
  }
  const query = sql.empty();
  parts.forEach((part, i) => {
    query.append(sql.raw(part));
    if (i < params.length) query.append(sql`${params[i]}`);
  });
  return query;
}

/** The part of drizzle-orm's `sql` tag used above (the package has no types of its own here). */
interface DrizzleSql {
  append(part: DrizzleSql): DrizzleSql;
}
interface DrizzleSqlTag {
  (strings: TemplateStringsArray, ...values: unknown[]): DrizzleSql;
  empty(): DrizzleSql;
  raw(text: string): DrizzleSql;
}

/**
 * The core's text and parameters as a Kysely `CompiledQuery` (its own `CompiledQuery.raw`,
 * so plugins and executors see a query they know). `kysely` is the application's own copy,
 * resolved only when a Kysely handle is used.
 */
async function kyselyQuery(text: string, params: readonly (string | null)[]): Promise<unknown> {
  let mod: { CompiledQuery: { raw(sql: string, parameters: unknown[]): unknown } };
  try {
    mod = (await import("kysely")) as unknown as typeof mod;
  } catch {
    throw new InvalidInput("invalid input: db: looks like Kysely, but the kysely package cannot be imported");
  }
  return mod.CompiledQuery.raw(text, [...params]);
}
