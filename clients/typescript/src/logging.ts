import native from "./native.js";
import type { Logger } from "./types.js";

/**
 * The core's log records in the application's logger. The core hands each record
 * `[level, target, message, fieldsJson]` to one JavaScript callback through a threadsafe
 * function; it runs on the event loop. A record whose `source` field names a worker made with a
 * `logger` option goes to that logger; the rest to the console default. The level filter
 * runs in the core, at the most verbose level any logger in use has a method for.
 */

/** The default: warnings and errors to the console. */
export const consoleLogger: Logger = {
  warn: (message, fields) => console.warn(`queuebox: ${message}`, fields ?? ""),
  error: (message, fields) => console.error(`queuebox: ${message}`, fields ?? ""),
};

const bySource = new Map<string, Logger>();
let installed = 0; // the core's minimum level installed; 0 before the first

/** The core's level (1 error .. 5 trace) that serves every method `logger` has. */
function coreLevel(logger: Logger): number {
  if (typeof logger.debug === "function") return 4;
  if (typeof logger.info === "function") return 3;
  return 2;
}

function deliver([level, target, message, fieldsJson]: [number, string, string, string]): void {
  const fields: Record<string, unknown> = { ...JSON.parse(fieldsJson), target };
  const logger = (typeof fields.source === "string" && bySource.get(fields.source)) || consoleLogger;
  const method =
    level <= 1 ? (logger.error ?? logger.warn) : level === 2 ? logger.warn : level === 3 ? logger.info : logger.debug;
  try {
    method?.call(logger, message, fields);
  } catch {
    // A throwing logger must not break the event loop's callback.
  }
}

/**
 * Sends the core's records of `source` to `logger` (the latest worker of a source wins) and
 * (re)installs forwarding at a level every logger in use is served by.
 */
export function registerLogger(source: string, logger: Logger | undefined): void {
  if (logger) bySource.set(source, logger);
  const want = Math.max(coreLevel(consoleLogger), ...[...bySource.values()].map(coreLevel));
  if (want !== installed) {
    native.setLogCallback(deliver, want);
    installed = want;
  }
}
