using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Globalization;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Options of a published outbox row; null keeps the column's default.</summary>
    public class PublishOptions
    {
        /// <summary>Ordering / partition key (X-Message-Key, the Kafka record key), at most 255 characters.</summary>
        public string Key { get; set; }
        /// <summary>Sent with the message; checked by the relay's header rules (no framing,
        /// hop-by-hop or relay-owned headers, no control characters).</summary>
        public IDictionary<string, string> Headers { get; set; }
        public string AggregateType { get; set; }
        /// <summary>Dead-letter ceiling, at least 1 (default 5).</summary>
        public int? MaxAttempts { get; set; }
        /// <summary>Not delivered before this long after the insert (database clock). Not with ScheduledAt.</summary>
        public TimeSpan? Delay { get; set; }
        /// <summary>Not delivered before this time. Not with Delay.</summary>
        public DateTimeOffset? ScheduledAt { get; set; }
    }

    /// <summary>One row of <see cref="Outbox.PublishManyAsync(DbTransaction, IEnumerable{OutboxMessage}, CancellationToken)"/>.</summary>
    public sealed class OutboxMessage : PublishOptions
    {
        public OutboxMessage() { }

        public OutboxMessage(string topic, object payload)
        {
            Topic = topic;
            Payload = payload;
        }

        /// <summary>Required, at most 255 characters.</summary>
        public string Topic { get; set; }
        /// <summary>Required: any value <see cref="Json"/> writes (dictionaries, lists, strings,
        /// numbers, bools), or a <see cref="JsonText"/> holding JSON you already have.</summary>
        public object Payload { get; set; }
    }

    /// <summary>JSON text used as a payload as it is (parsed once to check it), not as a string.</summary>
    public sealed class JsonText
    {
        public JsonText(string json)
        {
            Json = json;
        }

        public string Json { get; private set; }
    }

    /// <summary>Publishes outbox rows inside the application's own ADO.NET transaction: they
    /// are delivered by the relay only if that transaction commits. The core validates every
    /// message (an error names <c>messages[i].field</c>), makes the ids and renders one insert
    /// (on PostgreSQL <c>jsonb_to_recordset</c>, so any number of rows is one statement).</summary>
    public static class Outbox
    {
        /// <summary>Publishes one row in <paramref name="tx"/>; returns its id (the relay's
        /// X-Message-Id). Placeholder style and database come from the connection's provider.</summary>
        public static async Task<Guid> PublishAsync(DbTransaction tx, string topic, object payload, PublishOptions options = null,
                                                    CancellationToken cancellationToken = default(CancellationToken))
        {
            var m = new OutboxMessage(topic, payload);
            if (options != null)
            {
                m.Key = options.Key;
                m.Headers = options.Headers;
                m.AggregateType = options.AggregateType;
                m.MaxAttempts = options.MaxAttempts;
                m.Delay = options.Delay;
                m.ScheduledAt = options.ScheduledAt;
            }
            IReadOnlyList<Guid> ids = await PublishManyAsync(tx, new[] { m }, cancellationToken).ConfigureAwait(false);
            return ids[0];
        }

        /// <summary>Publishes the rows in <paramref name="tx"/> with one statement; returns their ids in order.</summary>
        public static Task<IReadOnlyList<Guid>> PublishManyAsync(DbTransaction tx, IEnumerable<OutboxMessage> messages,
                                                                 CancellationToken cancellationToken = default(CancellationToken))
        {
            DbConnection c = AppStatement.ConnectionOf(tx);
            return PublishManyAsync(tx, messages, Providers.PlaceholderFor(c), Providers.BackendFor(c), cancellationToken);
        }

        /// <summary>As <see cref="PublishManyAsync(DbTransaction, IEnumerable{OutboxMessage}, CancellationToken)"/>
        /// with the placeholder style and database given (a provider not detected, or an override).</summary>
        public static async Task<IReadOnlyList<Guid>> PublishManyAsync(DbTransaction tx, IEnumerable<OutboxMessage> messages,
                                                                       SqlPlaceholder placeholder, SqlBackend backend,
                                                                       CancellationToken cancellationToken = default(CancellationToken))
        {
            AppStatement.ConnectionOf(tx);
            if (messages == null) throw new ArgumentNullException("messages");
            var list = new List<object>();
            foreach (OutboxMessage m in messages) list.Add(ToJson(m, list.Count));
            string text = Render(Json.Serialize(list), placeholder, backend);
            AppStatement st = AppStatement.Parse(text, placeholder);
            long n = await st.ExecuteAsync(tx, cancellationToken).ConfigureAwait(false);
            if (n != st.Ids.Count)
                throw new QueueBoxException(QueueBoxErrorKind.Database, null, "outbox publish inserted " + n + " rows of " + st.Ids.Count);
            return st.Ids;
        }

        private static string Render(string messagesJson, SqlPlaceholder placeholder, SqlBackend backend)
        {
            return RenderStatement(Native.qb_publish_statement, messagesJson, placeholder, backend);
        }

        /// <summary>One of the core's statement exports (<c>qb_publish_statement</c>,
        /// <c>qb_enqueue_statement</c>), which share their arguments.</summary>
        internal delegate int StatementExport(IntPtr backend, IntPtr messagesJson, IntPtr placeholder, out IntPtr outJson, out IntPtr error);

        /// <summary>Calls <paramref name="export"/> for the messages and returns the statement's
        /// JSON, freeing every native string it made.</summary>
        internal static string RenderStatement(StatementExport export, string messagesJson, SqlPlaceholder placeholder, SqlBackend backend)
        {
            IntPtr cmsgs = Native.Utf8(messagesJson), cstyle = Native.Utf8(Providers.Name(placeholder)),
                   cbackend = Native.Utf8(Providers.Name(backend)), json, err;
            try
            {
                Native.ThrowIfFailed(export(cbackend, cmsgs, cstyle, out json, out err), err);
                return Native.TakeString(json);
            }
            finally
            {
                Native.FreeUtf8(cmsgs);
                Native.FreeUtf8(cstyle);
                Native.FreeUtf8(cbackend);
            }
        }

        /// <summary>The message as the core's JSON shape; the core checks every value.</summary>
        private static IDictionary<string, object> ToJson(OutboxMessage m, int index)
        {
            if (m == null) throw new ArgumentNullException("messages", "messages[" + index + "] is null");
            var o = new Dictionary<string, object>();
            o["topic"] = m.Topic;
            var raw = m.Payload as JsonText;
            if (raw == null) CheckJsonValue(m.Payload, "messages[" + index + "].payload");
            o["payload"] = raw != null ? ParseRaw(raw.Json, index) : m.Payload;
            if (m.Key != null) o["key"] = m.Key;
            if (m.AggregateType != null) o["aggregate_type"] = m.AggregateType;
            AddCommon(o, m.Headers, m.MaxAttempts, m.Delay, m.ScheduledAt);
            return o;
        }

        /// <summary>The fields publish and enqueue share, in the core's JSON names.</summary>
        internal static void AddCommon(IDictionary<string, object> o, IDictionary<string, string> headers, int? maxAttempts,
                                       TimeSpan? delay, DateTimeOffset? scheduledAt)
        {
            if (headers != null)
            {
                var h = new Dictionary<string, object>();
                foreach (var kv in headers) h[kv.Key] = kv.Value;
                o["headers"] = h;
            }
            if (maxAttempts.HasValue) o["max_attempts"] = (long)maxAttempts.Value;
            if (delay.HasValue) o["delay_ms"] = (long)Math.Ceiling(delay.Value.TotalMilliseconds);
            if (scheduledAt.HasValue)
                o["scheduled_at"] = scheduledAt.Value.ToUniversalTime().ToString("yyyy-MM-dd'T'HH:mm:ss.ffffff'Z'", CultureInfo.InvariantCulture);
        }

        /// <summary>Refuses what the built-in JSON writer would turn into a string by ToString
        /// (an object of a class, an anonymous object): nothing is changed silently.</summary>
        internal static void CheckJsonValue(object v, string path)
        {
            if (v == null || v is string || v is bool || v is Guid || v is DateTime || v is DateTimeOffset || v is Enum ||
                v is double || v is float || v is decimal || v is sbyte || v is byte || v is short || v is ushort ||
                v is int || v is uint || v is long || v is ulong) return;
            var dict = v as System.Collections.IDictionary;
            if (dict != null)
            {
                foreach (System.Collections.DictionaryEntry kv in dict) CheckJsonValue(kv.Value, path + "." + kv.Key);
                return;
            }
            var seq = v as System.Collections.IEnumerable;
            if (seq != null)
            {
                int i = 0;
                foreach (object item in seq) CheckJsonValue(item, path + "[" + i++ + "]");
                return;
            }
            throw new QueueBoxException(QueueBoxErrorKind.InvalidInput, null, path + ": a " + v.GetType().Name +
                " is not a JSON value; pass dictionaries, lists and primitives, or new JsonText(JsonSerializer.Serialize(value))");
        }

        internal static object ParseRaw(string json, int index)
        {
            try
            {
                // Exact: the numbers are written back as given, not through double.
                return Json.Parse(json ?? "", true);
            }
            catch (Exception e) when (e is FormatException || e is ArgumentOutOfRangeException || e is IndexOutOfRangeException)
            {
                throw new QueueBoxException(QueueBoxErrorKind.InvalidInput, null, "messages[" + index + "].payload: not valid JSON (" + e.Message + ")");
            }
        }
    }
}
