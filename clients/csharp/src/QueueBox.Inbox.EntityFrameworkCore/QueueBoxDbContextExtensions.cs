using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.EntityFrameworkCore;
using Microsoft.EntityFrameworkCore.Storage;

namespace QueueBox.Inbox.EntityFrameworkCore
{
    /// <summary>QueueBox inside an EF Core unit of work: the completion of a claimed inbox row
    /// outbox publishes and inbox enqueues enlist in the context's current transaction
    /// (<c>Database.CurrentTransaction</c>, its <c>DbTransaction</c> through
    /// <c>GetDbTransaction()</c>), so they commit together with <c>SaveChanges</c>:
    /// <code>
    /// await using var tx = await db.Database.BeginTransactionAsync(token);
    /// db.Payments.Add(new Payment(task.Message.Id));
    /// await db.SaveChangesAsync(token);
    /// await db.PublishToOutboxAsync("payments.recorded", new JsonText(JsonSerializer.Serialize(payment)));
    /// await db.CompleteInboxTaskAsync(task, token);   // ClaimLostException: the lease was lost
    /// await tx.CommitAsync(token);
    /// </code>
    /// Not built or tested on the project's CI machine (EF Core comes from NuGet, which it
    /// cannot reach); the ADO.NET calls underneath are (clients/csharp/README.md).</summary>
    public static class QueueBoxDbContextExtensions
    {
        /// <summary><see cref="InboxTask.CompleteAsync(DbTransaction, CancellationToken)"/> in the
        /// context's current transaction. Call it after SaveChanges, just before committing.</summary>
        public static Task CompleteInboxTaskAsync(this DbContext context, InboxTask task, CancellationToken cancellationToken = default)
        {
            if (task == null) throw new ArgumentNullException(nameof(task));
            return task.CompleteAsync(CurrentTransaction(context), cancellationToken);
        }

        /// <summary><see cref="Outbox.PublishAsync"/> in the context's current transaction.</summary>
        public static Task<Guid> PublishToOutboxAsync(this DbContext context, string topic, object payload, PublishOptions options = null,
                                                      CancellationToken cancellationToken = default)
        {
            return Outbox.PublishAsync(CurrentTransaction(context), topic, payload, options, cancellationToken);
        }

        /// <summary><see cref="Outbox.PublishManyAsync(DbTransaction, IEnumerable{OutboxMessage}, CancellationToken)"/>
        /// in the context's current transaction.</summary>
        public static Task<IReadOnlyList<Guid>> PublishManyToOutboxAsync(this DbContext context, IEnumerable<OutboxMessage> messages,
                                                                         CancellationToken cancellationToken = default)
        {
            return Outbox.PublishManyAsync(CurrentTransaction(context), messages, cancellationToken);
        }

        /// <summary><see cref="InboxQueue.EnqueueAsync(DbTransaction, string, object, EnqueueOptions, CancellationToken)"/>
        /// in the context's current transaction: the row is claimable once it commits.</summary>
        public static Task<Enqueued> EnqueueToInboxAsync(this DbContext context, string source, object payload, EnqueueOptions options = null,
                                                         CancellationToken cancellationToken = default)
        {
            return InboxQueue.EnqueueAsync(CurrentTransaction(context), source, payload, options, cancellationToken);
        }

        /// <summary><see cref="InboxQueue.EnqueueManyAsync(DbTransaction, IEnumerable{EnqueueMessage}, CancellationToken)"/>
        /// in the context's current transaction.</summary>
        public static Task<IReadOnlyList<Enqueued>> EnqueueManyToInboxAsync(this DbContext context, IEnumerable<EnqueueMessage> messages,
                                                                            CancellationToken cancellationToken = default)
        {
            return InboxQueue.EnqueueManyAsync(CurrentTransaction(context), messages, cancellationToken);
        }

        private static DbTransaction CurrentTransaction(DbContext context)
        {
            if (context == null) throw new ArgumentNullException(nameof(context));
            IDbContextTransaction tx = context.Database.CurrentTransaction;
            if (tx == null)
                throw new InvalidOperationException("context: no current transaction; begin one with Database.BeginTransactionAsync() " +
                                                    "so that SaveChanges and QueueBox's row commit together");
            return tx.GetDbTransaction();
        }
    }
}
