// Type-level checks of typed payloads, compiled by test/types.test.mjs with `tsc --noEmit`.
// Each `@ts-expect-error` must be an error: if the payload type were `any` (or the generics
// lost), the line would compile and tsc would report the unused directive.
import { Worker, type InboxMessage, type Handler } from "@alternayte/queuebox-inbox";

interface Order {
  orderId: string;
  total: number;
}

// A schema in zod's shape (`parse(data: unknown): T`) without depending on zod.
const OrderSchema = {
  parse(data: unknown): Order {
    const o = data as Order;
    if (typeof o?.orderId !== "string" || typeof o?.total !== "number") throw new Error("not an Order");
    return o;
  },
};

// 1. `validate` alone decides T: no annotation, no cast.
const inferred = new Worker({ databaseUrl: "postgres://x", source: "orders", validate: OrderSchema.parse });
void inferred.run((m) => {
  const total: number = m.payload.total;
  const id: string = m.payload.orderId;
  // @ts-expect-error -- not a field of Order
  void m.payload.missing;
  // @ts-expect-error -- total is a number
  const wrong: string = m.payload.total;
  void [total, id, wrong];
});

// 2. Declared without validation: payload is what was declared.
const declared = new Worker<Order>({ databaseUrl: "postgres://x", source: "orders" });
void declared.run(async (m: InboxMessage<Order>) => {
  void (m.payload.total + 1);
});

// 3. validate's type and the declared type must agree.
// @ts-expect-error -- validate returns an Order, not a string
new Worker<string>({ databaseUrl: "postgres://x", source: "orders", validate: OrderSchema.parse });

// 4. Untyped stays unknown (no silent any).
const plain = new Worker({ databaseUrl: "postgres://x", source: "orders" });
void plain.run((m) => {
  // @ts-expect-error -- unknown payload: narrow it or give the worker a type
  void m.payload.total;
});

// 5. A handler typed for another payload is refused.
const forStrings: Handler<string> = (m) => void m.payload.toUpperCase();
// @ts-expect-error -- the worker's payloads are Orders
void inferred.run(forStrings);

// 6. postgres.js's own types are accepted where a db goes.
import postgres from "postgres";
import { completeTx, enqueue } from "@alternayte/queuebox-inbox";
const sql = postgres("postgres://x");
void inferred.run((m) => sql.begin(async (tx) => {
  await enqueue(tx, "next", { orderId: m.payload.orderId });
  await completeTx(tx, m);
}));

// 7. Kysely's own types too.
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
const kdb = new Kysely<{ orders: { id: string } }>({ dialect: new PostgresDialect({ pool: new pg.Pool() }) });
void inferred.run((m) => kdb.transaction().execute(async (trx) => {
  await enqueue(trx, "next", { orderId: m.payload.orderId });
  await completeTx(trx, m);
}));
