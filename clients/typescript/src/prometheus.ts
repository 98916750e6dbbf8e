/**
 * Worker metrics in the application's own prom-client `Registry`.
 *
 * `new QueueBoxMetrics(registry, worker)` registers the worker families (rows claimed,
 * completed, retried, dead and released, claims lost, claim errors, lease renewals, the claim
 * and handler durations as histograms, labelled by `source`) in the registry the application
 * already serves at `/metrics`, next to its own metrics. The native core keeps and encodes
 * them (`worker.metrics()` is the same text); each scrape reads that text and hands its
 * samples to prom-client as they are. One `QueueBoxMetrics` takes any number of workers
 * (`add`): a name may be registered only once per registry.
 *
 * prom-client itself is not imported (it is an optional peer dependency): the registry is
 * used through `registerMetric`, which every prom-client 15 `Registry` has.
 */

/** What this module needs of a prom-client `Registry`. */
export interface PromRegistry {
  registerMetric(metric: never): void;
}

/** What this module needs of a worker (`Worker` has it). */
export interface MetricsSource {
  metrics(): string | undefined;
}

type Labels = Record<string, string>;
interface Sample {
  metricName: string;
  labels: Labels;
  value: number;
}
interface Family {
  help: string;
  type: string;
  samples: Sample[];
}

/**
 * The core's worker families (core/src/worker/metrics.rs) as prom-client names them: a
 * counter by its sample name (`_total`). prom-client wants every name registered before a
 * scrape, while the core only has text once a worker runs, so the names are listed here;
 * test/prometheus.test.mjs fails when the core's text has a family this list lacks.
 */
export const WORKER_FAMILIES: readonly (readonly [name: string, type: "counter" | "histogram"])[] = [
  ["queuebox_worker_claimed_total", "counter"],
  ["queuebox_worker_claims_total", "counter"],
  ["queuebox_worker_completed_total", "counter"],
  ["queuebox_worker_retried_total", "counter"],
  ["queuebox_worker_dead_total", "counter"],
  ["queuebox_worker_released_total", "counter"],
  ["queuebox_worker_claims_lost_total", "counter"],
  ["queuebox_worker_claim_errors_total", "counter"],
  ["queuebox_worker_lease_renewals_total", "counter"],
  ["queuebox_worker_claim_duration_seconds", "histogram"],
  ["queuebox_worker_handler_duration_seconds", "histogram"],
];

/** A label value as the text format escapes it (`\\`, `\"`, `\n`). */
function unescape(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

function parseValue(v: string): number {
  if (v === "+Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  return Number(v);
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The families of one Prometheus text (0.0.4 or OpenMetrics), keyed by prom-client name. */
export function parseFamilies(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  let current: Family | undefined;
  for (const line of text.split("\n")) {
    if (line.startsWith("# HELP ")) {
      const rest = line.slice(7);
      const sp = rest.indexOf(" ");
      helps.set(rest.slice(0, sp), unescape(rest.slice(sp + 1)));
    } else if (line.startsWith("# TYPE ")) {
      const [base, type] = line.slice(7).split(" ");
      // OpenMetrics names a counter without `_total`; prom-client by its sample name.
      const name = type === "counter" && !base.endsWith("_total") ? `${base}_total` : base;
      current = { help: helps.get(base) ?? base, type, samples: [] };
      families.set(name, current);
    } else if (current && line !== "" && !line.startsWith("#")) {
      const m = SAMPLE.exec(line);
      if (!m) continue;
      const labels: Labels = {};
      for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]] = unescape(l[2]);
      current.samples.push({ metricName: m[1], labels, value: parseValue(m[3]) });
    }
  }
  return families;
}

/**
 * The QueueBox worker families registered in a prom-client registry; each scrape reads the
 * metrics of every worker added (a worker that has not run yet has none).
 */
export class QueueBoxMetrics {
  private readonly workers: MetricsSource[] = [];
  // The last text read from each worker and its families: one scrape reads every family,
  // and the text is parsed once per change, not once per family.
  private readonly parsed = new WeakMap<MetricsSource, { text: string; families: Map<string, Family> }>();

  constructor(registry: PromRegistry, ...workers: MetricsSource[]) {
    if (registry === null || typeof registry !== "object" || typeof registry.registerMetric !== "function") {
      throw new TypeError("QueueBoxMetrics: registry must be a prom-client Registry (it has no registerMetric)");
    }
    workers.forEach((w) => this.add(w));
    for (const [name, type] of WORKER_FAMILIES) {
      const get = async () => this.family(name, type);
      // The shape prom-client reads from a metric at scrape time (`get`), with what its
      // registry calls on every metric (`reset` from resetMetrics: the core owns the values).
      registry.registerMetric({ name, help: name, type, aggregator: "sum", get, reset() {} } as never);
    }
  }

  /** Collects `worker`'s metrics too. */
  add(worker: MetricsSource): void {
    if (worker === null || typeof worker !== "object" || typeof worker.metrics !== "function") {
      throw new TypeError("QueueBoxMetrics.add: worker must be a Worker (it has no metrics())");
    }
    this.workers.push(worker);
  }

  private family(name: string, type: string) {
    let help = name;
    const values: Sample[] = [];
    for (const w of this.workers) {
      const text = w.metrics();
      if (!text) continue;
      let p = this.parsed.get(w);
      if (p?.text !== text) this.parsed.set(w, (p = { text, families: parseFamilies(text) }));
      const f = p.families.get(name);
      if (!f) continue;
      help = f.help;
      // Another worker's samples carry their own source label.
      values.push(...f.samples);
    }
    return { name, help, type, values, aggregator: "sum" };
  }
}
