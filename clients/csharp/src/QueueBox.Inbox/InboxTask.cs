using System;
using System.Data.Common;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Processes one claimed row with the application's own transaction:
    /// <code>
    /// using (var conn = dataSource.CreateConnection()) {
    ///     await conn.OpenAsync(token);
    ///     using (var tx = conn.BeginTransaction()) {
    ///         ... business writes on tx (ADO.NET, Dapper, EF Core) ...
    ///         await task.CompleteAsync(tx, token);
    ///         tx.Commit();
    ///     }
    /// }
    /// </code>
    /// Return after committing. Returning without having called CompleteAsync lets the core
    /// complete the row itself (on its own connection, not in your transaction). Throwing
    /// (with your transaction rolled back) is the same outcome as for an
    /// <see cref="InboxHandler"/>: the retry policy, <see cref="RetryLaterException"/> or
    /// <see cref="DeadLetterException"/>; a <see cref="ClaimLostException"/> from
    /// CompleteAsync leaves the row to its new owner.</summary>
    public delegate Task InboxTaskHandler(InboxTask task, CancellationToken token);

    /// <summary>Processes one message inside a transaction the worker began on the
    /// application's connection (<see cref="InboxWorker.RunAsync(Func{DbConnection}, DbInboxHandler, CancellationToken)"/>).
    /// It must neither commit nor roll back: returning commits its writes together with the
    /// row's completion; throwing rolls them back.</summary>
    public delegate Task DbInboxHandler(InboxMessage message, DbTransaction transaction, CancellationToken token);

    /// <summary>A claimed row handed to an <see cref="InboxTaskHandler"/>: its message, and
    /// the claim that <see cref="CompleteAsync(DbTransaction, CancellationToken)"/> fences on
    /// (the claim token itself stays in the core). Valid only while the handler runs.</summary>
    public sealed class InboxTask
    {
        private IntPtr _task;
        // Set once the completion ran in an application transaction: a second run would match
        // no row (this transaction already completed it) and look like a lost claim.
        private int _completing;

        internal InboxTask(IntPtr task, InboxMessage message)
        {
            _task = task;
            Message = message;
        }

        public InboxMessage Message { get; private set; }

        internal void Close()
        {
            _task = IntPtr.Zero;
        }

        private IntPtr Handle
        {
            get
            {
                if (_task == IntPtr.Zero) throw new ObjectDisposedException("InboxTask", "the handler has returned; the task is finished");
                return _task;
            }
        }

        /// <summary>Marks the row processed inside the application's transaction
        /// <paramref name="tx"/>, so that it commits (or rolls back) with the application's own
        /// writes; the placeholder style comes from the connection's provider (Npgsql `$1`,
        /// ODBC / OLE DB `?`, SqlClient `@p1`). Call it last, just before committing. From
        /// here on the core stops renewing the lease (the completion holds the row lock until
        /// <paramref name="tx"/> ends) and does not complete the row itself.
        /// Throws <see cref="ClaimLostException"/> when the claim was lost (the lease expired and
        /// another worker owns the row): let it propagate without committing, so the business
        /// writes roll back. A driver error propagates as the provider's exception.</summary>
        public Task CompleteAsync(DbTransaction tx, CancellationToken cancellationToken = default(CancellationToken))
        {
            return CompleteAsync(tx, Providers.PlaceholderFor(AppStatement.ConnectionOf(tx)), cancellationToken);
        }

        /// <summary>As <see cref="CompleteAsync(DbTransaction, CancellationToken)"/>, for a
        /// provider whose placeholder style is not detected (or to override it).</summary>
        public async Task CompleteAsync(DbTransaction tx, SqlPlaceholder placeholder, CancellationToken cancellationToken = default(CancellationToken))
        {
            AppStatement.ConnectionOf(tx);
            if (Interlocked.Exchange(ref _completing, 1) != 0)
                throw new InvalidOperationException("CompleteAsync already ran for inbox row " + Message.Id + "; commit that transaction");
            IntPtr cstyle = Native.Utf8(Providers.Name(placeholder)), json, err;
            string text;
            try
            {
                Native.ThrowIfFailed(Native.qb_task_completion_statement(Handle, cstyle, out json, out err), err);
                text = Native.TakeString(json);
            }
            finally
            {
                Native.FreeUtf8(cstyle);
            }
            AppStatement st = AppStatement.Parse(text, placeholder);
            long n;
            try
            {
                n = await st.ExecuteAsync(tx, cancellationToken).ConfigureAwait(false);
            }
            catch
            {
                // The driver failed (its transaction is lost): a new transaction may try again.
                Interlocked.Exchange(ref _completing, 0);
                throw;
            }
            if (n == 1) return;
            // The core counts and logs the loss (queuebox_claims_lost_total) and answers with
            // the claim_lost error to raise here; the worker's later finish answers it again.
            IntPtr lostErr;
            int status = Native.qb_task_claim_lost(Handle, out lostErr);
            QueueBoxException e = Native.TakeError(status, lostErr);
            throw e ?? new ClaimLostException(null, "claim lost on inbox row " + Message.Id + ": the completion matched " + n + " rows");
        }
    }
}
