import type { NativeTask, NativeWorker } from "./native.js";
import type { Logger } from "./types.js";

/** Kinds of a completion that wrote nothing on purpose: fenced out, finished already, or cancelled. */
const QUIET = new Set(["claim_lost", "already_finished", "cancelled"]);

/**
 * Completes the tasks whose handlers succeeded in batches: every task added in one turn of
 * the event loop goes to the addon in one `completeAll` call (one Promise, one batched
 * statement in the core) instead of one `complete()` Promise per row. Each task keeps its
 * own fence, so a lost claim fails only that task; nothing waits for the answer but
 * {@link Completions.idle}.
 */
export class Completions {
  private tasks: NativeTask[] = [];
  private ids: string[] = [];
  private scheduled = false;
  private readonly flushing = new Set<Promise<void>>();
  /** Handlers finished since the last report, and their time in all (milliseconds). */
  private ranCount = 0;
  private ranMs = 0;

  constructor(
    private readonly worker: NativeWorker,
    private readonly logger: Logger,
  ) {}

  /** Queues `task` (of message `id`) for the next batch, sent once this turn's handlers are done. */
  add(task: NativeTask, id: string): void {
    this.tasks.push(task);
    this.ids.push(id);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * Counts one handler's run (any outcome) for the next report to the core, which sizes what
   * it claims ahead of the handlers by their time (the core cannot see it: they run here).
   */
  ran(ms: number): void {
    this.ranCount++;
    this.ranMs += ms;
  }

  /** Reports the runs counted so far (with each batch of completions, and on a failure). */
  report(): void {
    if (this.ranCount === 0) return;
    this.worker.handlersTook(this.ranCount, this.ranMs / 1000);
    this.ranCount = 0;
    this.ranMs = 0;
  }

  /** Resolves once every queued completion has been answered. */
  async idle(): Promise<void> {
    while (this.scheduled || this.flushing.size > 0) {
      if (this.scheduled) await new Promise((resolve) => setImmediate(resolve));
      await Promise.all(this.flushing);
    }
  }

  private flush(): void {
    this.scheduled = false;
    this.report();
    const { tasks, ids } = this;
    this.tasks = [];
    this.ids = [];
    const p = this.worker.completeAll(tasks).then(
      (results) => {
        results.forEach((e, i) => {
          // The core settled the task either way; a failed one's row returns after its lease.
          if (e && !QUIET.has(e.code)) this.warn(ids[i], `${e.code}: ${e.message}`);
        });
      },
      async (e: unknown) => {
        ids.forEach((id) => this.warn(id, String(e)));
        await Promise.all(tasks.map((t) => t.abandon()));
      },
    );
    const tracked: Promise<void> = p.finally(() => this.flushing.delete(tracked));
    this.flushing.add(tracked);
  }

  private warn(id: string, error: string): void {
    this.logger.warn("could not finish the message; it will be redelivered after its lease", { id, error });
  }
}
