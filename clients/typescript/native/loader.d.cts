// Types of the native addon (kept in step with bindings/node/src/lib.rs; `npm run
// build:native` also writes the generated native.generated.d.ts for comparison).
declare namespace native {
  class Database {
    execute(sql: string, paramsJson?: string | null): Promise<number>;
    query(sql: string, paramsJson?: string | null): Promise<string>;
    executeScript(sql: string): Promise<number>;
    enqueue(messageJson: string): Promise<string>;
    cancel(table: string, targetJson: string): Promise<string>;
    close(): Promise<void>;
  }
  class NativeTask {
    messageJson(): string;
    execute(sql: string, paramsJson?: string | null): Promise<number>;
    query(sql: string, paramsJson?: string | null): Promise<string>;
    complete(): Promise<void>;
    fail(error: string): Promise<string>;
    retry(delayMs: number, error: string): Promise<void>;
    dead(reason: string): Promise<void>;
    release(): Promise<void>;
    abandon(): Promise<void>;
    isCancelled(): boolean;
    cancelled(): Promise<boolean>;
    /** The fenced completion for the application's driver, as JSON text `{sql, params, expect}`. */
    completionStatement(placeholder: string): string;
    /** Reports that the application's completion matched no row: settles the task and throws `claim_lost`. */
    claimLost(): void;
  }
  /** Tasks handed out by one `nextBatch` call; `tasks[i]` has the sequence number `firstSeq + i` (mod 2^32). */
  interface TaskBatch {
    tasks: NativeTask[];
    /** The messages of `tasks` in order, as one JSON array text. */
    messagesJson: string;
    firstSeq: number;
  }
  /** Why one task of `completeAll` did not complete (`code` is the core's kind name). */
  interface FinishError {
    code: string;
    message: string;
  }
  class NativeWorker {
    next(): Promise<NativeTask | null>;
    /** Up to `max` claimed tasks in one call; `null` once shutdown has begun. */
    nextBatch(max: number): Promise<TaskBatch | null>;
    /** Completes the tasks together, each under its own fence: `null` per completed task, else why not. */
    completeAll(tasks: NativeTask[]): Promise<Array<FinishError | null>>;
    /** Sequence numbers of handed-out tasks cancelled since the last call; empty after `closeCancelled()`. */
    /** How long `rows` handlers ran in all (seconds); sizes what the worker claims ahead of them. */
    handlersTook(rows: number, seconds: number): void;
    nextCancelled(): Promise<number[]>;
    closeCancelled(): void;
    shutdown(): Promise<number>;
    isStopping(): boolean;
    inFlight(): number;
    statsJson(): string;
    /** The worker's metrics in the Prometheus text format 0.0.4. */
    metricsText(): string;
    optionsJson(): string;
  }
  function connectDatabase(databaseUrl: string, maxConnections?: number | null): Promise<Database>;
  function connectWorker(databaseUrl: string, optionsJson: string): Promise<NativeWorker>;
  function evaluate(kind: string, inputJson: string): string;
  function migrate(databaseUrl: string): Promise<string[]>;
  function resolveOptions(optionsJson: string): string;
  /** The core's log records at `minLevel` (1 error .. 5 trace) and more severe; `null` stops them. */
  function setLogCallback(
    callback: ((record: [level: number, target: string, message: string, fieldsJson: string]) => void) | null,
    minLevel: number,
  ): void;
  /** The outbox insert of a JSON array of messages, as JSON text `{sql, params, expect, ids}`. */
  function publishStatement(messagesJson: string, placeholder: string, backend?: string | null): string;
  /** The enqueue of pull rows of a JSON array of messages, as JSON text `{sql, params, expect: "enqueue_rows"}`. */
  function enqueueStatement(messagesJson: string, placeholder: string, backend?: string | null): string;
}
export = native;
