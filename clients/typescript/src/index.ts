export { Worker } from "./worker.js";
export { QueueBoxMetrics, type PromRegistry, type MetricsSource } from "./prometheus.js";
export {
  Database,
  migrate,
  evaluate,
  type NewMessage,
  type InboxCancelTarget,
  type OutboxCancelTarget,
  type CancelCounts,
} from "./database.js";
export {
  completeTx,
  publish,
  publishMany,
  enqueue,
  enqueueMany,
  type OutboxMessage,
  type PublishOptions,
  type EnqueueOptions,
  type EnqueueMessage,
  type Enqueued,
} from "./app-tx.js";
export type { AppDb, KnexQueryable, PgQueryable, DrizzleQueryable, PostgresJsQueryable, KyselyQueryable, PrismaQueryable } from "./drivers.js";
export {
  QueueBoxError,
  ClaimLost,
  ConnectError,
  SchemaMissing,
  MigrationError,
  DatabaseError,
  ConfigError,
  InvalidInput,
  AlreadyFinished,
  Cancelled,
  ERROR_KINDS,
  ERROR_CLASSES,
  Retry,
  Dead,
  type ErrorKind,
} from "./errors.js";
export type {
  Handler,
  InboxMessage,
  Logger,
  QueryResult,
  ResolvedOptions,
  RetryOptions,
  RunOptions,
  Schedule,
  TracerProviderLike,
  Transaction,
  WorkerOptions,
  WorkerStats,
} from "./types.js";
