import native, { type NativeTask, type NativeWorker } from "./native.js";
import { call, callSync, Cancelled, ConfigError, Dead, InvalidInput, QueueBoxError, Retry } from "./errors.js";
import type { Handler, InboxMessage, Logger, QueryResult, ResolvedOptions, RunOptions, Transaction, WorkerOptions, WorkerStats } from "./types.js";

const consoleLogger: Logger = {
  warn: (message, fields) => console.warn(`queuebox: ${message}`, fields ?? ""),
};

/** The options as the core reads them (camelCase names; `databaseUrl` and `logger` stay here). */
function coreOptions(opts: WorkerOptions): Record<string, unknown> {
  if (opts === null || typeof opts !== "object") throw new TypeError("Worker options must be an object.");
  const { databaseUrl: _url, logger: _logger, maxConcurrency, ...rest } = opts;
  const out: Record<string, unknown> = { ...rest };
  if (maxConcurrency !== undefined) {
    if (rest.concurrency !== undefined && rest.concurrency !== maxConcurrency) {
      throw new ConfigError("invalid configuration at `concurrency`: concurrency and maxConcurrency disagree");
    }
    out.concurrency = maxConcurrency;
  }
  for (const [k, v] of Object.entries(out)) if (v === undefined) delete out[k];
  return out;
}

function parseMessage(json: string): InboxMessage {
  const m = JSON.parse(json);
  m.createdAt = new Date(m.createdAt);
  return m as InboxMessage;
}

class TaskTransaction implements Transaction {
  constructor(private readonly task: NativeTask) {}
  execute(sql: string, params: unknown[] = []): Promise<number> {
    return call(this.task.execute(sql, JSON.stringify(params)));
  }
  async query<Row = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<QueryResult<Row>> {
    const rows = JSON.parse(await call(this.task.query(sql, JSON.stringify(params)))) as Row[];
    return { rows, rowCount: rows.length };
  }
}

/** The claimed task behind each message handed to a handler (for `completeTx`). */
const tasks = new WeakMap<InboxMessage, NativeTask>();

/** The task of a message a handler received; anything else is refused naming `message`. */
export function nativeTaskOf(message: InboxMessage): NativeTask {
  const task = message !== null && typeof message === "object" ? tasks.get(message) : undefined;
  if (!task) throw new InvalidInput("invalid input: message: not a message a Worker handed to a handler");
  return task;
}

const CANCELLED = Symbol("cancelled");
const never = new Promise<never>(() => {});

/**
 * A pull worker: claims rows of one source, runs the handler on each and completes,
 * retries or dead-letters it. Claims, lease renewal, backoff and shutdown run in the Rust
 * core; this class only moves messages between the core and your handler.
 */
export class Worker {
  /** The options in force (defaults filled in, validated by the core). */
  readonly options: ResolvedOptions;
  private readonly databaseUrl: string;
  private readonly logger: Logger;
  private native: NativeWorker | undefined;
  private running = false;

  constructor(options: WorkerOptions) {
    const core = coreOptions(options);
    if (typeof options.databaseUrl !== "string" || options.databaseUrl.trim() === "") {
      throw new ConfigError("invalid configuration at `databaseUrl`: is required");
    }
    this.options = JSON.parse(callSync(() => native.resolveOptions(JSON.stringify(core))));
    this.databaseUrl = options.databaseUrl;
    this.logger = options.logger ?? consoleLogger;
  }

  /** Counters of the current (or last) run. */
  stats(): WorkerStats | undefined {
    return this.native ? JSON.parse(this.native.statsJson()) : undefined;
  }

  /**
   * The worker's metrics in the Prometheus text format 0.0.4 (serve it with Content-Type
   * `text/plain; version=0.0.4; charset=utf-8` from the application's own HTTP server):
   * rows claimed, completed, retried, dead and released, claims lost, claim errors, lease
   * renewals, and the claim and handler durations as histograms, labelled by source. The
   * native core keeps and encodes them. Undefined before the first run.
   */
  metrics(): string | undefined {
    return this.native ? this.native.metricsText() : undefined;
  }

  /**
   * Runs `handler` on every claimed message until `signal` aborts, then shuts down
   * gracefully: stops claiming, releases claimed rows that never started, waits up to
   * `shutdownGraceMs` for running handlers and abandons the rest (their leases expire and
   * another worker redelivers them). Rejects only when the worker cannot start or the
   * schema is missing.
   */
  async run(handler: Handler, { signal }: RunOptions = {}): Promise<void> {
    if (typeof handler !== "function") throw new TypeError("The handler must be a function.");
    if (this.running) throw new InvalidInput("invalid input: this worker is already running");
    this.running = true;
    try {
      if (signal?.aborted) return;
      const w = await call(native.connectWorker(this.databaseUrl, JSON.stringify(coreOptions({ ...this.options, databaseUrl: this.databaseUrl }))));
      this.native = w;
      let stopping: Promise<number> | undefined;
      const stop = () => {
        stopping ??= w.shutdown();
      };
      signal?.addEventListener("abort", stop, { once: true });
      const inFlight = new Set<Promise<void>>();
      try {
        for (;;) {
          const task = await call(w.next());
          if (!task) break;
          const p: Promise<void> = this.runOne(task, handler).finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
      } finally {
        signal?.removeEventListener("abort", stop);
        stop();
        await stopping;
        await Promise.all(inFlight);
      }
    } finally {
      this.running = false;
    }
  }

  private async runOne(task: NativeTask, handler: Handler): Promise<void> {
    const message = parseMessage(task.messageJson());
    tasks.set(message, task);
    const controller = new AbortController();
    const cancelled = task.cancelled().then((c) => {
      if (!c) return never;
      controller.abort(new Cancelled("the lease was lost or shutdown's grace ran out"));
      return CANCELLED;
    });
    const work = (async () => handler(message, new TaskTransaction(task), controller.signal))().then(
      () => ({ ok: true as const }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const result = await Promise.race([work, cancelled]);
    try {
      if (result === CANCELLED) {
        // Lease lost or grace over: write nothing; the row comes back after its lease.
        await task.abandon();
      } else if (result.ok) {
        await call(task.complete());
      } else if (result.error instanceof Retry) {
        const e = result.error;
        await call<unknown>(e.delayMs === undefined ? task.fail(e.message) : task.retry(e.delayMs, e.message));
      } else if (result.error instanceof Dead) {
        await call(task.dead(result.error.message));
      } else {
        const e = result.error;
        await call(task.fail(e instanceof Error ? e.message || e.name : String(e)));
      }
    } catch (e) {
      // Nothing was written: fenced out, finished already, or cancelled meanwhile (the core
      // then abandoned the task itself; a cancelled task may only be abandoned).
      if (e instanceof QueueBoxError && (e.kind === "claim_lost" || e.kind === "already_finished" || e.kind === "cancelled")) return;
      this.logger.warn("could not finish the message; it will be redelivered after its lease", { id: message.id, error: String(e) });
      await task.abandon();
    }
  }
}
