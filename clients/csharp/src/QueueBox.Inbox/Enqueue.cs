using System;
using System.Collections.Generic;
using System.Data;
using System.Data.Common;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Options of an enqueued pull row; null keeps the column's default.</summary>
    public class EnqueueOptions
    {
        /// <summary>Deduplicates the row within its source: enqueueing the same key again stores
        /// nothing and returns the stored row's id with <see cref="Enqueued.Duplicate"/> set.
        /// Trimmed; at most 255 characters. Without it every enqueue is a new row.</summary>
        public string IdempotencyKey { get; set; }
        /// <summary>-32767 to 32767 (default 0): a higher priority is claimed first, after the
        /// order within an aggregate.</summary>
        public int? Priority { get; set; }
        /// <summary>Rows of one aggregate are handled one at a time, in enqueue order.</summary>
        public string AggregateId { get; set; }
        /// <summary>Handed to the handler as <see cref="InboxMessage.EventType"/>.</summary>
        public string EventType { get; set; }
        /// <summary>At most 128 characters.</summary>
        public string CorrelationId { get; set; }
        /// <summary>Checked by the inbox's header rules.</summary>
        public IDictionary<string, string> Headers { get; set; }
        /// <summary>Dead-letter ceiling, at least 1.</summary>
        public int? MaxAttempts { get; set; }
        /// <summary>Not claimed before this long after the insert (database clock). Not with ScheduledAt.</summary>
        public TimeSpan? Delay { get; set; }
        /// <summary>Not claimed before this time. Not with Delay.</summary>
        public DateTimeOffset? ScheduledAt { get; set; }
    }

    /// <summary>One row of <see cref="InboxQueue.EnqueueManyAsync(DbTransaction, IEnumerable{EnqueueMessage}, CancellationToken)"/>.</summary>
    public sealed class EnqueueMessage : EnqueueOptions
    {
        public EnqueueMessage() { }

        public EnqueueMessage(string source, object payload)
        {
            Source = source;
            Payload = payload;
        }

        /// <summary>Required: the pull source whose workers claim the row.</summary>
        public string Source { get; set; }
        /// <summary>Required: a value <see cref="Json"/> writes, or a <see cref="JsonText"/>.</summary>
        public object Payload { get; set; }
    }

    /// <summary>The outcome of one enqueued message.</summary>
    public struct Enqueued
    {
        public Enqueued(Guid id, bool duplicate)
        {
            Id = id;
            Duplicate = duplicate;
        }

        /// <summary>The new row's id, or for a duplicate the stored row's.</summary>
        public Guid Id { get; private set; }
        /// <summary>(source, idempotency key) was stored already (by an earlier or concurrent
        /// transaction, or an earlier message of the same call): nothing was inserted.</summary>
        public bool Duplicate { get; private set; }

        /// <summary><c>var (id, duplicate) = await InboxQueue.EnqueueAsync(...)</c>.</summary>
        public void Deconstruct(out Guid id, out bool duplicate)
        {
            id = Id;
            duplicate = Duplicate;
        }

        public override string ToString() { return Id + (Duplicate ? " (duplicate)" : ""); }
    }

    /// <summary>Enqueues pull rows (work for a pull source's workers) inside the application's
    /// own ADO.NET transaction: they become claimable only if it commits. The core validates
    /// every message (an error names <c>messages[i].field</c>) and renders one statement for
    /// all of them; this class runs it and reads its (n, id, duplicate) rows.</summary>
    public static class InboxQueue
    {
        /// <summary>Enqueues one row in <paramref name="tx"/>.</summary>
        public static async Task<Enqueued> EnqueueAsync(DbTransaction tx, string source, object payload, EnqueueOptions options = null,
                                                       CancellationToken cancellationToken = default(CancellationToken))
        {
            return (await EnqueueManyAsync(tx, new[] { Message(source, payload, options) }, cancellationToken).ConfigureAwait(false))[0];
        }

        /// <summary>Enqueues one row on <paramref name="connection"/> outside any transaction
        /// (the statement commits by itself).</summary>
        public static async Task<Enqueued> EnqueueAsync(DbConnection connection, string source, object payload, EnqueueOptions options = null,
                                                       CancellationToken cancellationToken = default(CancellationToken))
        {
            return (await EnqueueManyAsync(connection, new[] { Message(source, payload, options) }, cancellationToken).ConfigureAwait(false))[0];
        }

        /// <summary>Enqueues the rows in <paramref name="tx"/> with one statement; one outcome
        /// per message, in order. Placeholder style and database come from the connection's provider.</summary>
        public static Task<IReadOnlyList<Enqueued>> EnqueueManyAsync(DbTransaction tx, IEnumerable<EnqueueMessage> messages,
                                                                    CancellationToken cancellationToken = default(CancellationToken))
        {
            DbConnection c = AppStatement.ConnectionOf(tx);
            return RunAsync(c, tx, messages, Providers.PlaceholderFor(c), Providers.BackendFor(c), true, cancellationToken);
        }

        /// <summary>As above with the placeholder style and database given (a provider not detected, or an override).</summary>
        public static Task<IReadOnlyList<Enqueued>> EnqueueManyAsync(DbTransaction tx, IEnumerable<EnqueueMessage> messages,
                                                                    SqlPlaceholder placeholder, SqlBackend backend,
                                                                    CancellationToken cancellationToken = default(CancellationToken))
        {
            return RunAsync(AppStatement.ConnectionOf(tx), tx, messages, placeholder, backend, true, cancellationToken);
        }

        /// <summary>Enqueues the rows on <paramref name="connection"/> outside any transaction.</summary>
        public static Task<IReadOnlyList<Enqueued>> EnqueueManyAsync(DbConnection connection, IEnumerable<EnqueueMessage> messages,
                                                                    CancellationToken cancellationToken = default(CancellationToken))
        {
            if (connection == null) throw new ArgumentNullException("connection");
            return RunAsync(connection, null, messages, Providers.PlaceholderFor(connection), Providers.BackendFor(connection), true, cancellationToken);
        }

        /// <summary>Blocking <see cref="EnqueueAsync(DbTransaction, string, object, EnqueueOptions, CancellationToken)"/>
        /// (runs the provider's synchronous calls, no thread hop).</summary>
        public static Enqueued Enqueue(DbTransaction tx, string source, object payload, EnqueueOptions options = null)
        {
            return EnqueueMany(tx, new[] { Message(source, payload, options) })[0];
        }

        /// <summary>Blocking <see cref="EnqueueManyAsync(DbTransaction, IEnumerable{EnqueueMessage}, CancellationToken)"/>.</summary>
        public static IReadOnlyList<Enqueued> EnqueueMany(DbTransaction tx, IEnumerable<EnqueueMessage> messages)
        {
            DbConnection c = AppStatement.ConnectionOf(tx);
            // With sync = true every step completes synchronously, so the task is already done.
            return RunAsync(c, tx, messages, Providers.PlaceholderFor(c), Providers.BackendFor(c), false, CancellationToken.None).GetAwaiter().GetResult();
        }

        private static EnqueueMessage Message(string source, object payload, EnqueueOptions o)
        {
            var m = new EnqueueMessage(source, payload);
            if (o != null)
            {
                m.IdempotencyKey = o.IdempotencyKey;
                m.Priority = o.Priority;
                m.AggregateId = o.AggregateId;
                m.EventType = o.EventType;
                m.CorrelationId = o.CorrelationId;
                m.Headers = o.Headers;
                m.MaxAttempts = o.MaxAttempts;
                m.Delay = o.Delay;
                m.ScheduledAt = o.ScheduledAt;
            }
            return m;
        }

        private static async Task<IReadOnlyList<Enqueued>> RunAsync(DbConnection connection, DbTransaction tx, IEnumerable<EnqueueMessage> messages,
                                                                    SqlPlaceholder placeholder, SqlBackend backend, bool async,
                                                                    CancellationToken cancellationToken)
        {
            if (messages == null) throw new ArgumentNullException("messages");
            var list = new List<object>();
            foreach (EnqueueMessage m in messages) list.Add(ToJson(m, list.Count));
            AppStatement st = AppStatement.Parse(Render(Json.Serialize(list), placeholder, backend), placeholder);
            if (st.Expect != "enqueue_rows")
                throw new QueueBoxException(QueueBoxErrorKind.Internal, null, "the enqueue statement expects " + st.Expect);
            int count = list.Count;
            var outcomes = new Enqueued?[count];
            using (DbCommand cmd = st.Command(connection, tx))
            using (DbDataReader r = async ? await cmd.ExecuteReaderAsync(cancellationToken).ConfigureAwait(false) : cmd.ExecuteReader())
            {
                while (async ? await r.ReadAsync(cancellationToken).ConfigureAwait(false) : r.Read())
                {
                    long n = Convert.ToInt64(r.GetValue(0), System.Globalization.CultureInfo.InvariantCulture);
                    if (n < 0 || n >= count || outcomes[n].HasValue)
                        throw new QueueBoxException(QueueBoxErrorKind.Internal, null, "the enqueue returned row n = " + n + " for " + count + " messages");
                    outcomes[n] = new Enqueued(ReadGuid(r.GetValue(1)), ReadBool(r.GetValue(2)));
                }
            }
            var result = new List<Enqueued>(count);
            foreach (Enqueued? e in outcomes)
            {
                if (!e.HasValue)
                    throw new QueueBoxException(QueueBoxErrorKind.Internal, null, "the enqueue returned fewer rows than the " + count + " messages");
                result.Add(e.Value);
            }
            return result;
        }

        // `id` is text on PostgreSQL and uniqueidentifier on SQL Server.
        private static Guid ReadGuid(object v)
        {
            if (v is Guid) return (Guid)v;
            return Guid.Parse(Convert.ToString(v, System.Globalization.CultureInfo.InvariantCulture));
        }

        // `duplicate` is boolean, but drivers differ: psqlODBC hands booleans out as the
        // characters "1"/"0" by default (its BoolsAsChar setting), others as bit or bool.
        private static bool ReadBool(object v)
        {
            if (v is bool) return (bool)v;
            var s = v as string;
            if (s != null)
            {
                switch (s.Trim().ToLowerInvariant())
                {
                    case "1": case "t": case "true": return true;
                    case "0": case "f": case "false": return false;
                }
                throw new QueueBoxException(QueueBoxErrorKind.Internal, null, "the enqueue returned duplicate = '" + s + "'");
            }
            return Convert.ToInt64(v, System.Globalization.CultureInfo.InvariantCulture) != 0;
        }

        private static string Render(string messagesJson, SqlPlaceholder placeholder, SqlBackend backend)
        {
            return Outbox.RenderStatement(Native.qb_enqueue_statement, messagesJson, placeholder, backend);
        }

        /// <summary>The message as the core's JSON shape; the core checks every value.</summary>
        private static IDictionary<string, object> ToJson(EnqueueMessage m, int index)
        {
            if (m == null) throw new ArgumentNullException("messages", "messages[" + index + "] is null");
            var o = new Dictionary<string, object>();
            o["source"] = m.Source;
            var raw = m.Payload as JsonText;
            if (raw == null) Outbox.CheckJsonValue(m.Payload, "messages[" + index + "].payload");
            o["payload"] = raw != null ? Outbox.ParseRaw(raw.Json, index) : m.Payload;
            if (m.IdempotencyKey != null) o["idempotency_key"] = m.IdempotencyKey;
            if (m.Priority.HasValue) o["priority"] = (long)m.Priority.Value;
            if (m.AggregateId != null) o["aggregate_id"] = m.AggregateId;
            if (m.EventType != null) o["event_type"] = m.EventType;
            if (m.CorrelationId != null) o["correlation_id"] = m.CorrelationId;
            Outbox.AddCommon(o, m.Headers, m.MaxAttempts, m.Delay, m.ScheduledAt);
            return o;
        }
    }
}
