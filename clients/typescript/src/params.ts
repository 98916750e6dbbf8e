/**
 * Statement parameters as the JSON text the core reads (`tx.execute`, `tx.query`,
 * `Database.execute`, `Database.query`).
 *
 * The core binds each JSON value by its kind: `null` untyped (the statement gives it its
 * type), booleans boolean, strings text, objects and arrays jsonb, an integer that fits 64
 * bits bigint, and every other number as exact `numeric` from its literal text.
 * `JSON.stringify` throws on a `bigint`; here a bigint is written as its exact integer
 * literal, at top level and inside objects and arrays. Everything else is written as
 * `JSON.stringify` writes it (`toJSON`, `undefined` in an array as `null`, ...), except a
 * `NaN` or infinite number: JSON.stringify writes `null`, which would store a NULL where the
 * application meant a number, so it is refused with an `InvalidInput` naming the parameter.
 * `JSON.rawJSON` would do the bigints, but Node 20 does not have it.
 */
import { InvalidInput } from "./errors.js";

/** `params` (JSON values; a `bigint` anywhere in them) as one JSON array text, each `bigint` as its exact digits. */
export function encodeParams(params: readonly unknown[]): string {
  if (!Array.isArray(params)) throw new TypeError("params must be an array");
  return value("", params, [], "") ?? "null";
}

/** One value as `JSON.stringify` serializes a property (undefined: left out), bigints exact. */
function value(key: string, v: unknown, stack: object[], path: string): string | undefined {
  // Before toJSON: a `BigInt.prototype.toJSON` patched in by an application (a common
  // workaround) would otherwise make the number a string.
  if (typeof v === "bigint") return v.toString();
  if (v !== null && (typeof v === "object" || typeof v === "function") && typeof (v as { toJSON?: unknown }).toJSON === "function") {
    v = (v as { toJSON(key: string): unknown }).toJSON(key);
    if (typeof v === "bigint") return v.toString();
  }
  if (v instanceof Number || v instanceof String || v instanceof Boolean || v instanceof BigInt) v = v.valueOf();
  switch (typeof v) {
    case "bigint":
      return v.toString();
    case "number":
      if (!Number.isFinite(v)) {
        throw new InvalidInput(`parameter ${path} is ${v}: JSON has no such number, and sending null would store a NULL`);
      }
      return JSON.stringify(v);
    case "string":
    case "boolean":
      return JSON.stringify(v);
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (v === null) return "null";
  const obj = v as object;
  if (stack.includes(obj)) throw new TypeError("Converting circular structure to JSON");
  stack.push(obj);
  try {
    if (Array.isArray(obj)) {
      const items: string[] = [];
      // An index loop, not map: a hole in a sparse array is `null`, as JSON.stringify writes it.
      // The outermost array is the parameter list: its items are $1, $2, ...
      for (let i = 0; i < obj.length; i++) {
        const at = stack.length === 1 ? `$${i + 1}` : `${path}[${i}]`;
        items.push(value(String(i), obj[i], stack, at) ?? "null");
      }
      return `[${items.join(",")}]`;
    }
    const parts: string[] = [];
    for (const k of Object.keys(obj)) {
      const s = value(k, (obj as Record<string, unknown>)[k], stack, `${path}[${JSON.stringify(k)}]`);
      if (s !== undefined) parts.push(`${JSON.stringify(k)}:${s}`);
    }
    return `{${parts.join(",")}}`;
  } finally {
    stack.pop();
  }
}
