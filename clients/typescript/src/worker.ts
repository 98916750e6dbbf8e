import native, { type NativeTask, type NativeWorker } from "./native.js";
import { Completions } from "./completions.js";
import { call, callSync, Cancelled, ConfigError, Dead, InvalidInput, QueueBoxError, Retry } from "./errors.js";
import { consoleLogger, registerLogger } from "./logging.js";
import { traced } from "./otel.js";
import { encodeParams } from "./params.js";
import type { Handler, InboxMessage, Logger, QueryResult, ResolvedOptions, RunOptions, TracerProviderLike, Transaction, WorkerOptions, WorkerStats } from "./types.js";


/** The options as the core reads them (camelCase names; `databaseUrl` and `logger` stay here). */
function coreOptions(opts: WorkerOptions<unknown>): Record<string, unknown> {
  if (opts === null || typeof opts !== "object") throw new TypeError("Worker options must be an object.");
  const { databaseUrl: _url, logger: _logger, validate: _validate, tracerProvider: _tp, maxConcurrency, ...rest } = opts;
  const out: Record<string, unknown> = { ...rest };
  if (maxConcurrency !== undefined) {
    if (rest.concurrency !== undefined && rest.concurrency !== maxConcurrency) {
      throw new ConfigError("invalid configuration at `concurrency`: concurrency and maxConcurrency disagree");
    }
    out.concurrency = maxConcurrency;
  }
  for (const [k, v] of Object.entries(out)) if (v === undefined) delete out[k];
  if (Array.isArray(out.schedules)) out.schedules.forEach(checkScheduleNumbers);
  return out;
}

/**
 * Refuses the numbers of `schedules[i]` that JSON cannot carry: `JSON.stringify` writes NaN
 * and ±Infinity as `null` (the core would read the field as unset and blame the schedule as a
 * whole, or take the default priority) and throws a bare TypeError on a bigint.
 */
function checkScheduleNumbers(s: unknown, i: number): void {
  if (s === null || typeof s !== "object") return; // the core names `schedules[i]`
  for (const k of ["everyMs", "priority"] as const) {
    const v = (s as Record<string, unknown>)[k];
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new ConfigError(`invalid configuration at \`schedules[${i}].${k}\`: must be a finite number, got ${v}`);
    }
    if (typeof v === "bigint") throw new ConfigError(`invalid configuration at \`schedules[${i}].${k}\`: must be a number, not a bigint`);
  }
}

/**
 * The core's configuration error in this API's names: the core calls a schedule's interval
 * `every` (Go's, C#'s and Python's name for it); here it is `everyMs`. A schedule that has
 * an `every` key of its own keeps the name (the core refuses that key as written).
 */
function tsNames(e: unknown, schedules: unknown): unknown {
  if (!(e instanceof ConfigError)) return e;
  const text = e.message.replace(/`schedules\[(\d+)\]\.every`/g, (name, i: string) => {
    const s = Array.isArray(schedules) ? schedules[Number(i)] : undefined;
    return s !== null && typeof s === "object" && "every" in s ? name : `\`schedules[${i}].everyMs\``;
  });
  if (text === e.message) return e;
  const renamed = new ConfigError(text);
  renamed.stack = e.stack?.replace(e.message, text);
  return renamed;
}

/**
 * `handler` behind the payload check of `validate` (see `WorkerOptions.validate`): a failed
 * check throws `Dead`, which the worker's failure path turns into a dead letter.
 */
function validated<T>(handler: Handler<T>, validate: (payload: unknown) => T): Handler<unknown> {
  return (message, tx, signal) => {
    let payload: T;
    try {
      payload = validate(message.payload);
    } catch (e) {
      if (e instanceof Retry || e instanceof Dead) throw e;
      throw new Dead(`invalid payload: ${e instanceof Error ? e.message || e.name : String(e)}`);
    }
    (message as InboxMessage<unknown>).payload = payload;
    return handler(message as InboxMessage<T>, tx, signal);
  };
}

/** The messages of a batch (one JSON array text) as handlers see them. */
function parseMessages(json: string): InboxMessage[] {
  const all = JSON.parse(json);
  for (const m of all) m.createdAt = new Date(m.createdAt);
  return all as InboxMessage[];
}

class TaskTransaction implements Transaction {
  constructor(private readonly task: NativeTask) {}
  async execute(sql: string, params: readonly unknown[] = []): Promise<number> {
    return call(this.task.execute(sql, encodeParams(params)));
  }
  async query<Row = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
    const rows = JSON.parse(await call(this.task.query(sql, encodeParams(params)))) as Row[];
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
const RELEASE = Symbol("release");

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v !== null && (typeof v === "object" || typeof v === "function") && typeof (v as PromiseLike<unknown>).then === "function";
}

/**
 * Aborts the signal of each running handler whose task the core cancelled (lease lost,
 * shutdown's grace over): one pending `nextCancelled` call for the whole worker instead of
 * one Promise per task. Ends when the run closes it.
 */
async function watchCancelled(w: NativeWorker, aborts: Map<number, AbortController>): Promise<void> {
  for (;;) {
    const seqs = await w.nextCancelled();
    if (seqs.length === 0) return;
    for (const seq of seqs) aborts.get(seq)?.abort(new Cancelled("the lease was lost or shutdown's grace ran out"));
  }
}

/**
 * A pull worker: claims rows of one source, runs the handler on each and completes,
 * retries or dead-letters it. Claims, lease renewal, backoff and shutdown run in the Rust
 * core; this class only moves messages between the core and your handler.
 */
export class Worker<T = unknown> {
  /** The options in force (defaults filled in, validated by the core). */
  readonly options: ResolvedOptions;
  private readonly databaseUrl: string;
  private readonly coreJson: string;
  private readonly logger: Logger;
  private readonly validate: ((payload: unknown) => T) | undefined;
  private readonly tracerProvider: TracerProviderLike | undefined;
  private native: NativeWorker | undefined;
  private running = false;

  constructor(options: WorkerOptions<T>) {
    const core = coreOptions(options);
    if (options.validate !== undefined && typeof options.validate !== "function") {
      throw new ConfigError("invalid configuration at `validate`: must be a function (payload: unknown) => T");
    }
    this.validate = options.validate;
    if (options.tracerProvider !== undefined && typeof options.tracerProvider?.getTracer !== "function") {
      throw new ConfigError("invalid configuration at `tracerProvider`: must be an OpenTelemetry TracerProvider (it has no getTracer)");
    }
    this.tracerProvider = options.tracerProvider;
    if (typeof options.databaseUrl !== "string" || options.databaseUrl.trim() === "") {
      throw new ConfigError("invalid configuration at `databaseUrl`: is required");
    }
    // What run() passes: the options as given, so that an unset batch stays the core's
    // adaptive one (not the resolved number, which the core reads as explicit).
    this.coreJson = JSON.stringify(core);
    try {
      this.options = JSON.parse(callSync(() => native.resolveOptions(this.coreJson)));
    } catch (e) {
      throw tsNames(e, core.schedules);
    }
    this.databaseUrl = options.databaseUrl;
    this.logger = options.logger ?? consoleLogger;
    registerLogger(this.options.source, options.logger);
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
  async run(typedHandler: Handler<T>, { signal }: RunOptions = {}): Promise<void> {
    if (typeof typedHandler !== "function") throw new TypeError("The handler must be a function.");
    // Without `validate` the payload is the parsed JSON as it is: `T` is what you declared.
    const checked = this.validate ? validated(typedHandler, this.validate) : (typedHandler as Handler<unknown>);
    if (this.running) throw new InvalidInput("invalid input: this worker is already running");
    this.running = true;
    try {
      if (signal?.aborted) return;
      // In a span of the application's tracer when it has one (the payload check included).
      const handler = await traced(checked, this.options.source, this.tracerProvider);
      // The native worker hands out up to its whole batch (one crossing carries many rows
      // even at concurrency 1); this loop runs at most `concurrency` handlers at once.
      const w = await call(native.connectWorker(this.databaseUrl, this.coreJson));
      this.native = w;
      // Handlers still running and finishes other than a batched completion.
      const inFlight = new Set<Promise<void>>();
      const track = (p: Promise<void>) => {
        const tracked: Promise<void> = p.finally(() => inFlight.delete(tracked));
        inFlight.add(tracked);
      };
      const completions = new Completions(w, this.logger);
      const aborts = new Map<number, AbortController>();
      const watching = watchCancelled(w, aborts);
      // Handed out, not started yet (a handler slot was not free).
      const queued: { task: NativeTask; message: InboxMessage; seq: number }[] = [];
      let handling = 0;
      let stopping: Promise<number> | undefined;
      const releaseQueued = () => {
        // Never started: back to pending at once, no attempt spent (as the core does with
        // the rows it claimed and never handed out).
        for (const { task, message } of queued.splice(0)) track(this.finish(task, message, RELEASE));
      };
      const stop = () => {
        stopping ??= w.shutdown();
        releaseQueued();
        wake?.(); // the next nextBatch answers null
      };
      // A slot free and nothing queued: time to ask for more. Asking only then claims when
      // the Rust worker would (a free slot wants work), not while every slot is busy.
      const wantsWork = () => handling < this.options.concurrency && queued.length === 0;
      let wake: (() => void) | undefined;
      const startQueued = () => {
        while (handling < this.options.concurrency && queued.length > 0) {
          const { task, message, seq } = queued.shift()!;
          // A lease lost while it waited: give it up without running the handler.
          const p = task.isCancelled() ? this.finish(task, message, CANCELLED) : this.runOne(task, message, seq, handler, aborts, completions);
          if (p) {
            handling++;
            track(p.finally(() => {
              handling--;
              startQueued();
              if (wake && wantsWork()) wake();
            }));
          }
        }
      };
      signal?.addEventListener("abort", stop, { once: true });
      try {
        for (;;) {
          if (!stopping && !wantsWork()) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
          }
          // One crossing hands out a batch: whatever the core has claimed, up to the batch.
          const batch = await call(w.nextBatch(this.options.batchSize));
          if (!batch) break;
          const messages = parseMessages(batch.messagesJson);
          batch.tasks.forEach((task, i) => queued.push({ task, message: messages[i], seq: (batch.firstSeq + i) >>> 0 }));
          if (stopping) releaseQueued();
          else startQueued();
        }
      } finally {
        signal?.removeEventListener("abort", stop);
        stop();
        await stopping;
        await Promise.all(inFlight);
        await completions.idle();
        w.closeCancelled();
        await watching;
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * Runs the handler on one task. A success goes to the batched completions and returns
   * nothing to wait for; a handler that returns a promise, a failure or a cancellation
   * returns the promise of its finish.
   */
  private runOne(
    task: NativeTask,
    message: InboxMessage,
    seq: number,
    handler: Handler,
    aborts: Map<number, AbortController>,
    completions: Completions,
  ): Promise<void> | undefined {
    tasks.set(message, task);
    const controller = new AbortController();
    const started = performance.now();
    let returned: unknown;
    try {
      returned = handler(message, new TaskTransaction(task), controller.signal);
    } catch (error) {
      completions.ran(performance.now() - started);
      completions.report();
      return this.finish(task, message, { ok: false, error });
    }
    if (!isThenable(returned)) {
      completions.ran(performance.now() - started);
      completions.add(task, message.id);
      return undefined;
    }
    // Still running: `nextCancelled` may abort it (lease lost, shutdown's grace over).
    aborts.set(seq, controller);
    const cancelled = new Promise<typeof CANCELLED>((resolve) =>
      controller.signal.addEventListener("abort", () => resolve(CANCELLED), { once: true }),
    );
    if (task.isCancelled()) controller.abort(new Cancelled("the lease was lost or shutdown's grace ran out"));
    const work = Promise.resolve(returned).then(
      () => ({ ok: true as const }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    return Promise.race([work, cancelled]).then((result) => {
      aborts.delete(seq);
      completions.ran(performance.now() - started);
      if (result !== CANCELLED && result.ok) {
        completions.add(task, message.id);
        return undefined;
      }
      completions.report();
      return this.finish(task, message, result);
    });
  }

  /**
   * Finishes a task whose handler failed, that was cancelled, or that is released without
   * running (shutdown), one native call each.
   */
  private async finish(task: NativeTask, message: InboxMessage, result: typeof CANCELLED | typeof RELEASE | { ok: false; error: unknown }): Promise<void> {
    try {
      if (result === CANCELLED) {
        // Lease lost or grace over: write nothing; the row comes back after its lease.
        await task.abandon();
      } else if (result === RELEASE) {
        await call(task.release());
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
