using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>A claimed inbox row with its payload read as a <typeparamref name="T"/>
    /// (<see cref="InboxWorker.RunAsync{T}(InboxHandler{T}, CancellationToken)"/>).</summary>
    public sealed class InboxMessage<T>
    {
        public InboxMessage(InboxMessage message, T payload)
        {
            if (message == null) throw new ArgumentNullException("message");
            Message = message;
            Payload = payload;
        }

        /// <summary>The payload, deserialized once before the handler runs.</summary>
        public T Payload { get; private set; }
        /// <summary>The untyped message (its <see cref="InboxMessage.PayloadJson"/> is the text as stored).</summary>
        public InboxMessage Message { get; private set; }

        public Guid Id { get { return Message.Id; } }
        public string Source { get { return Message.Source; } }
        public string IdempotencyKey { get { return Message.IdempotencyKey; } }
        public string AggregateId { get { return Message.AggregateId; } }
        public string EventType { get { return Message.EventType; } }
        public string PayloadJson { get { return Message.PayloadJson; } }
        public IReadOnlyDictionary<string, string> Headers { get { return Message.Headers; } }
        public int Attempt { get { return Message.Attempt; } }
        public string CorrelationId { get { return Message.CorrelationId; } }
        public DateTimeOffset CreatedAt { get { return Message.CreatedAt; } }
        public string Traceparent { get { return Message.Traceparent; } }
        public string Tracestate { get { return Message.Tracestate; } }
    }

    /// <summary>As <see cref="InboxHandler"/> with a typed payload.</summary>
    public delegate Task InboxHandler<T>(InboxMessage<T> message, InboxTransaction transaction, CancellationToken token);

    /// <summary>As <see cref="DbInboxHandler"/> with a typed payload.</summary>
    public delegate Task DbInboxHandler<T>(InboxMessage<T> message, DbTransaction transaction, CancellationToken token);

    public sealed partial class InboxWorker
    {
        /// <summary>As <see cref="RunAsync(InboxHandler, CancellationToken)"/> with the payload
        /// read as a <typeparamref name="T"/> by <see cref="Json.Deserialize{T}(string)"/>
        /// (numbers exact). A payload that cannot be read as a <typeparamref name="T"/> will never
        /// be, so its row is dead-lettered, the error naming the field; the handler does not run.</summary>
        public Task RunAsync<T>(InboxHandler<T> handler, CancellationToken cancellationToken = default(CancellationToken))
        {
            return RunAsync(handler, null, cancellationToken);
        }

        /// <summary>As <see cref="RunAsync{T}(InboxHandler{T}, CancellationToken)"/> with your
        /// own deserializer, e.g. <c>json =&gt; JsonSerializer.Deserialize&lt;T&gt;(json, options)</c>
        /// (System.Text.Json) or Newtonsoft's <c>JsonConvert.DeserializeObject&lt;T&gt;</c>; any
        /// exception it throws dead-letters the row.</summary>
        public Task RunAsync<T>(InboxHandler<T> handler, Func<string, T> deserialize, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return RunAsync((m, tx, token) => handler(Typed(m, deserialize), tx, token), cancellationToken);
        }

        /// <summary>As <see cref="RunAsync(Func{DbConnection}, DbInboxHandler, CancellationToken)"/>
        /// with a typed payload (see <see cref="RunAsync{T}(InboxHandler{T}, CancellationToken)"/>).</summary>
        public Task RunAsync<T>(Func<DbConnection> connect, DbInboxHandler<T> handler, CancellationToken cancellationToken = default(CancellationToken))
        {
            return RunAsync(connect, handler, null, cancellationToken);
        }

        public Task RunAsync<T>(Func<DbConnection> connect, DbInboxHandler<T> handler, Func<string, T> deserialize,
                                CancellationToken cancellationToken = default(CancellationToken))
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return RunAsync(connect, (m, tx, token) => handler(Typed(m, deserialize), tx, token), cancellationToken);
        }

        private static InboxMessage<T> Typed<T>(InboxMessage m, Func<string, T> deserialize)
        {
            T payload;
            try
            {
                payload = deserialize != null ? deserialize(m.PayloadJson) : (T)Json.Deserialize(m.PayloadJson, typeof(T), "payload");
            }
            catch (Exception e)
            {
                throw new DeadLetterException("payload: cannot be read as a " + typeof(T).Name + ": " + e.Message);
            }
            return new InboxMessage<T>(m, payload);
        }
    }
}
