using System;
using System.Collections.Generic;
using System.Globalization;

namespace QueueBox.Inbox
{
    /// <summary>A claimed inbox row as a handler sees it (never the claim token).</summary>
    public sealed class InboxMessage
    {
        public Guid Id { get; private set; }
        public string Source { get; private set; }
        public string IdempotencyKey { get; private set; }
        public string AggregateId { get; private set; }
        public string EventType { get; private set; }
        /// <summary>The payload as JSON text, exactly as stored: deserialize your own types from
        /// it (System.Text.Json, Newtonsoft) when numbers must stay exact — an integer beyond
        /// long or a decimal beyond double's precision changes in <see cref="Payload"/>.</summary>
        public string PayloadJson { get; private set; }
        /// <summary>The payload parsed (see <see cref="Json"/> for the types).</summary>
        public object Payload { get; private set; }
        public IReadOnlyDictionary<string, string> Headers { get; private set; }
        /// <summary>Failed deliveries so far (0 on the first).</summary>
        public int Attempt { get; private set; }
        public string CorrelationId { get; private set; }
        public DateTimeOffset CreatedAt { get; private set; }
        /// <summary>The W3C <c>traceparent</c> to continue the message's trace from (null when
        /// the row has none): the row's own, or, with OTLP on for the worker
        /// (<c>OTEL_EXPORTER_OTLP_ENDPOINT</c>), the core's <c>handle</c> span. Hand it and
        /// <see cref="Tracestate"/> to your propagator (e.g. <c>ActivityContext.TryParse</c>).</summary>
        public string Traceparent { get; private set; }
        public string Tracestate { get; private set; }

        internal static InboxMessage FromJson(string text)
        {
            // PayloadJson is the payload exactly as the core handed it over (numbers and all);
            // Payload is its object model (integers as long, other numbers as double).
            string payloadJson;
            var o = Json.ParseObject(text, "payload", out payloadJson);
            var headers = new Dictionary<string, string>();
            var h = Get(o, "headers") as IDictionary<string, object>;
            if (h != null) foreach (var kv in h) headers[kv.Key] = kv.Value as string;
            object payload = Get(o, "payload");
            var trace = Get(o, "trace") as IDictionary<string, object>;
            return new InboxMessage
            {
                Id = Guid.Parse((string)Get(o, "id")),
                Source = (string)Get(o, "source"),
                IdempotencyKey = (string)Get(o, "idempotencyKey"),
                AggregateId = Get(o, "aggregateId") as string,
                EventType = Get(o, "eventType") as string,
                Payload = payload,
                PayloadJson = payloadJson ?? "null",
                Headers = headers,
                Attempt = Convert.ToInt32(Get(o, "attempt") ?? 0L, CultureInfo.InvariantCulture),
                CorrelationId = Get(o, "correlationId") as string,
                CreatedAt = DateTimeOffset.Parse((string)Get(o, "createdAt"), CultureInfo.InvariantCulture),
                Traceparent = trace == null ? null : Get(trace, "traceparent") as string,
                Tracestate = trace == null ? null : Get(trace, "tracestate") as string,
            };
        }

        private static object Get(IDictionary<string, object> o, string key)
        {
            object v;
            return o.TryGetValue(key, out v) ? v : null;
        }
    }
}
