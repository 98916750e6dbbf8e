using System;
using System.Collections.Generic;

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
        /// <summary>The payload as JSON text, exactly as stored. For your own types with exact
        /// numbers use <see cref="PayloadAs{T}"/> or a typed handler (<see cref="InboxMessage{T}"/>):
        /// an integer beyond long or a decimal beyond double's precision changes in <see cref="Payload"/>.</summary>
        public string PayloadJson { get; private set; }
        /// <summary>The payload parsed (see <see cref="Json"/> for the types), on first
        /// use: a handler that reads only <see cref="PayloadJson"/> never pays for it.</summary>
        public object Payload
        {
            get
            {
                // Parsing the same text twice on a race gives equal values; no lock needed.
                if (!_payloadParsed)
                {
                    _payload = Json.Parse(PayloadJson);
                    _payloadParsed = true;
                }
                return _payload;
            }
        }
        /// <summary>The payload read as a <typeparamref name="T"/> with numbers exact (see
        /// <see cref="Json.Deserialize{T}(string)"/>); a mismatch is a FormatException naming the field.</summary>
        public T PayloadAs<T>()
        {
            return (T)Json.Deserialize(PayloadJson, typeof(T), "payload");
        }

        private object _payload;
        private volatile bool _payloadParsed;
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

        internal InboxMessage(Guid id, string source, string idempotencyKey, string aggregateId, string eventType,
            string payloadJson, IReadOnlyDictionary<string, string> headers, int attempt, string correlationId,
            DateTimeOffset createdAt, string traceparent, string tracestate)
        {
            Id = id;
            Source = source;
            IdempotencyKey = idempotencyKey;
            AggregateId = aggregateId;
            EventType = eventType;
            PayloadJson = payloadJson ?? "null";
            Headers = headers;
            Attempt = attempt;
            CorrelationId = correlationId;
            CreatedAt = createdAt;
            Traceparent = traceparent;
            Tracestate = tracestate;
        }
    }
}
