// Types of the native addon (kept in step with bindings/node/src/lib.rs; `npm run
// build:native` also writes the generated native.generated.d.ts for comparison).
declare namespace native {
  class Database {
    execute(sql: string, paramsJson?: string | null): Promise<number>;
    query(sql: string, paramsJson?: string | null): Promise<string>;
    executeScript(sql: string): Promise<number>;
    enqueue(messageJson: string): Promise<string>;
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
  class NativeWorker {
    next(): Promise<NativeTask | null>;
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
  /** The outbox insert of a JSON array of messages, as JSON text `{sql, params, expect, ids}`. */
  function publishStatement(messagesJson: string, placeholder: string, backend?: string | null): string;
}
export = native;
