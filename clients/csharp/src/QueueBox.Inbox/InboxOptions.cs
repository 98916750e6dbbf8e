using System;
using System.Collections.Generic;

namespace QueueBox.Inbox
{
    /// <summary>Settings of an <see cref="InboxWorker"/>. A null property keeps the core's
    /// default; the core validates every value and names the offending field in a
    /// <see cref="QueueBoxConfigException"/>.</summary>
    public sealed class InboxOptions
    {
        /// <summary>The source whose pull rows the worker claims (required).</summary>
        public string Source { get; set; }
        /// <summary>Rows per claim and the most held at once. Null leaves it to the core, which
        /// adapts it to MaxConcurrency (32 × MaxConcurrency, at least 1024, at most 10 000) and
        /// keeps about MaxConcurrency rows claimed ahead of slow handlers.</summary>
        public int? BatchSize { get; set; }
        /// <summary>Handlers running at once, at most BatchSize (core default 1).</summary>
        public int? MaxConcurrency { get; set; }
        /// <summary>Lease in milliseconds, renewed every third by the core (default 30 000).</summary>
        public int? LeaseMs { get; set; }
        /// <summary>Idle wait before claiming again (default 1 s); LISTEN/NOTIFY wakes sooner.</summary>
        public TimeSpan? PollInterval { get; set; }
        /// <summary>Wait for running handlers at shutdown before cancelling them (default 30 s).</summary>
        public TimeSpan? ShutdownGrace { get; set; }
        /// <summary>LISTEN/NOTIFY wake-ups (default true).</summary>
        public bool? Listen { get; set; }
        /// <summary>Retry policy for handler exceptions; null keeps the default (5 attempts, 1 s doubling to 5 min, ±20 %).</summary>
        public InboxRetryPolicy RetryPolicy { get; set; }
        /// <summary>Receives the native library's log records about this worker's source (an
        /// unreachable database, lost claims, retries, dead-lettered messages); null sends them
        /// to <see cref="QueueBoxLogging.Default"/>.</summary>
        public IQueueBoxLogger Logger { get; set; }
        /// <summary>An OpenTelemetry collector's base URL (<c>http://host:4318</c>): each
        /// message is handled in a <c>handle</c> span exported there over OTLP/HTTP, and
        /// <see cref="InboxMessage.Traceparent"/> is that span's context. Null means
        /// <c>OTEL_EXPORTER_OTLP_ENDPOINT</c>, else no tracing.</summary>
        public string OtlpEndpoint { get; set; }
        /// <summary>A schema of your own (proto-docs/own-schema.md): the outbox table's name
        /// ("schema.table" allowed); null keeps QueueBox's own.</summary>
        public string OutboxTableName { get; set; }
        /// <summary>The inbox table's name ("schema.table" allowed); null keeps QueueBox's own.</summary>
        public string InboxTableName { get; set; }
        /// <summary>Renamed columns by mapping key (proto-docs/own-schema.md)
        /// (<c>Inbox["idempotencyKey"] = "key"</c>); claims, completions and the statements
        /// handed to your transaction use them.</summary>
        public InboxColumnMapping ColumnMapping { get; set; }
        /// <summary>Periodic schedules the worker runs beside its claims until it stops: each
        /// tick enqueues one pull row, once however many workers (and relays) run the same
        /// schedule, keyed <c>schedule:&lt;name&gt;:&lt;tick as RFC 3339 UTC with milliseconds&gt;</c>.
        /// The core checks them and names a bad field (<c>schedules[0].cron</c>).</summary>
        public IList<Schedule> Schedules { get; set; }

        internal string ToJson()
        {
            var m = new Dictionary<string, object>();
            m["source"] = Source;
            // The worker's loop queues what the core hands out and runs MaxConcurrency
            // handlers itself (InboxWorker.RunLoopAsync, HandOut.cs).
            m["handOut"] = true;
            if (BatchSize.HasValue) m["batchSize"] = (long)BatchSize.Value;
            if (MaxConcurrency.HasValue) m["concurrency"] = (long)MaxConcurrency.Value;
            if (LeaseMs.HasValue) m["leaseMs"] = (long)LeaseMs.Value;
            if (PollInterval.HasValue) m["pollIntervalMs"] = (long)PollInterval.Value.TotalMilliseconds;
            if (ShutdownGrace.HasValue) m["shutdownGraceMs"] = (long)ShutdownGrace.Value.TotalMilliseconds;
            if (Listen.HasValue) m["listen"] = Listen.Value;
            if (RetryPolicy != null)
            {
                var r = new Dictionary<string, object>();
                if (RetryPolicy.MaxAttempts.HasValue) r["maxAttempts"] = (long)RetryPolicy.MaxAttempts.Value;
                if (RetryPolicy.BaseDelay.HasValue) r["baseDelayMs"] = (long)RetryPolicy.BaseDelay.Value.TotalMilliseconds;
                if (RetryPolicy.MaxDelay.HasValue) r["maxDelayMs"] = (long)RetryPolicy.MaxDelay.Value.TotalMilliseconds;
                if (RetryPolicy.Jitter.HasValue) r["jitter"] = RetryPolicy.Jitter.Value;
                m["retry"] = r;
            }
            if (OtlpEndpoint != null) m["otlpEndpoint"] = OtlpEndpoint;
            if (OutboxTableName != null) m["outboxTableName"] = OutboxTableName;
            if (InboxTableName != null) m["inboxTableName"] = InboxTableName;
            if (ColumnMapping != null)
            {
                var mapping = new Dictionary<string, object>();
                if (ColumnMapping.Outbox != null) mapping["outbox"] = Columns(ColumnMapping.Outbox);
                if (ColumnMapping.Inbox != null) mapping["inbox"] = Columns(ColumnMapping.Inbox);
                m["columnMapping"] = mapping;
            }
            if (Schedules != null)
            {
                var list = new List<object>();
                foreach (var s in Schedules) list.Add(s == null ? null : s.ToCore());
                m["schedules"] = list;
            }
            return Json.Serialize(m);
        }

        private static Dictionary<string, object> Columns(IDictionary<string, string> columns)
        {
            var d = new Dictionary<string, object>();
            foreach (var kv in columns) d[kv.Key] = kv.Value;
            return d;
        }
    }

    /// <summary>One periodic schedule (<see cref="InboxOptions.Schedules"/>): set exactly one
    /// of <see cref="Cron"/> and <see cref="Every"/>.</summary>
    public sealed class Schedule
    {
        /// <summary>Unique among the worker's schedules; part of every tick's idempotency key
        /// (at most 200 characters).</summary>
        public string Name { get; set; }
        /// <summary>The source the ticks' rows are enqueued into (any source, not only the worker's).</summary>
        public string Source { get; set; }
        /// <summary>A cron expression: five fields, or six with seconds first.</summary>
        public string Cron { get; set; }
        /// <summary>The IANA time zone <see cref="Cron"/> is read in (null: UTC); for Cron only.</summary>
        public string TimeZone { get; set; }
        /// <summary>A fixed interval (at least 100 ms, whole milliseconds): ticks at its
        /// multiples since the Unix epoch.</summary>
        public TimeSpan? Every { get; set; }
        /// <summary>Every tick's row payload, required: a value <see cref="Json"/> writes
        /// (string, number, bool, dictionary, list), not null (a schedule without one is
        /// refused naming <c>schedules[i].payload</c>).</summary>
        public object Payload { get; set; }
        /// <summary>The rows' priority (null: 0).</summary>
        public int? Priority { get; set; }
        /// <summary>The rows' headers.</summary>
        public IDictionary<string, string> Headers { get; set; }
        /// <summary>Ticks missed while nothing ran the schedule (null: <see cref="ScheduleMissed.Latest"/>).</summary>
        public ScheduleMissed? Missed { get; set; }

        // The core's names; it validates every value.
        internal Dictionary<string, object> ToCore()
        {
            var o = new Dictionary<string, object>();
            if (Name != null) o["name"] = Name;
            if (Source != null) o["source"] = Source;
            if (Cron != null) o["cron"] = Cron;
            if (TimeZone != null) o["timeZone"] = TimeZone;
            if (Every.HasValue) o["everyMs"] = (long)Every.Value.TotalMilliseconds;
            o["payload"] = Payload;
            if (Priority.HasValue) o["priority"] = (long)Priority.Value;
            if (Headers != null)
            {
                var h = new Dictionary<string, object>();
                foreach (var kv in Headers) h[kv.Key] = kv.Value;
                o["headers"] = h;
            }
            if (Missed.HasValue) o["missed"] = Missed.Value == ScheduleMissed.Skip ? "skip" : "latest";
            return o;
        }
    }

    /// <summary>What a schedule does with ticks that passed while nothing ran it.</summary>
    public enum ScheduleMissed
    {
        /// <summary>Enqueue the most recent missed tick once; drop the older ones.</summary>
        Latest,
        /// <summary>Enqueue none; wait for the next tick.</summary>
        Skip,
    }

    /// <summary>Renamed columns of each table: mapping key → column name.</summary>
    public sealed class InboxColumnMapping
    {
        public IDictionary<string, string> Outbox { get; set; }
        public IDictionary<string, string> Inbox { get; set; }
    }

    /// <summary>The retry schedule, applied by the core: retry after
    /// min(BaseDelay × 2^attempt, MaxDelay) ± Jitter, dead once MaxAttempts failures are spent.</summary>
    public sealed class InboxRetryPolicy
    {
        public int? MaxAttempts { get; set; }
        public TimeSpan? BaseDelay { get; set; }
        public TimeSpan? MaxDelay { get; set; }
        public double? Jitter { get; set; }
    }

    /// <summary>A worker's counters.</summary>
    public sealed class InboxStats
    {
        public ulong Claimed { get; internal set; }
        public ulong Completed { get; internal set; }
        public ulong Retried { get; internal set; }
        public ulong Dead { get; internal set; }
        public ulong Released { get; internal set; }
        public ulong ClaimsLost { get; internal set; }
        public ulong ClaimErrors { get; internal set; }
        public ulong InFlight { get; internal set; }
    }
}
