using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>The handler's transaction, opened on first use. Its writes commit together
    /// with the row's completion when the handler returns, and roll back on any other
    /// outcome; the handler never commits or rolls back itself. Parameters bind to $1, $2, …
    /// as their JSON text (<see cref="Json"/>): an integer that fits 64 bits as bigint (a whole
    /// double such as 4.0 is written 4); every other number (a double with a fraction, a
    /// decimal, written with its scale, ulong above long.MaxValue, BigInteger beyond long) as
    /// exact numeric from its text, never through a double; strings as text; bools as boolean;
    /// null as a NULL whose type the statement decides; dictionaries and lists as jsonb.
    /// PostgreSQL's own assignment rules then apply, as they would from psql: a fraction into
    /// a bigint column rounds (4.5 stores 5), a number into a double precision column is the
    /// nearest double. Valid only while the handler runs. Its calls take no CancellationToken:
    /// the core cancels the statements with the handler's own token (lost lease, shutdown grace),
    /// and a statement stopped by any other token would leave the transaction half done.</summary>
    public sealed class InboxTransaction
    {
        private IntPtr _task;

        internal InboxTransaction(IntPtr task)
        {
            _task = task;
        }

        internal void Close()
        {
            _task = IntPtr.Zero;
        }

        private IntPtr Task
        {
            get
            {
                if (_task == IntPtr.Zero) throw new ObjectDisposedException("InboxTransaction", "the handler has returned; its transaction is finished");
                return _task;
            }
        }

        /// <summary>Runs a statement; returns the number of rows it affected.</summary>
        public Task<ulong> ExecuteAsync(string sql, params object[] parameters)
        {
            var tcs = Pending.Source<ulong>();
            IntPtr csql = Native.Utf8(sql), cparams = Native.Utf8(Json.Serialize(parameters ?? new object[0]));
            try
            {
                IntPtr ud = Pending.Pin(tcs), err;
                Pending.Started(Native.qb_task_execute(Task, csql, cparams, Pending.Count, ud, out err), err, ud);
            }
            finally
            {
                Native.FreeUtf8(csql);
                Native.FreeUtf8(cparams);
            }
            return tcs.Task;
        }

        /// <summary>Runs a query; each row is a dictionary of column name → value, read by
        /// <see cref="Json.Parse(string)"/>: an integer that fits as long, any other number as double
        /// (nearest). For every digit of a numeric column, select it as text (<c>v::text</c>).</summary>
        public async Task<IReadOnlyList<IDictionary<string, object>>> QueryAsync(string sql, params object[] parameters)
        {
            var tcs = Pending.Source<string>();
            IntPtr csql = Native.Utf8(sql), cparams = Native.Utf8(Json.Serialize(parameters ?? new object[0]));
            try
            {
                IntPtr ud = Pending.Pin(tcs), err;
                Pending.Started(Native.qb_task_query(Task, csql, cparams, Pending.String, ud, out err), err, ud);
            }
            finally
            {
                Native.FreeUtf8(csql);
                Native.FreeUtf8(cparams);
            }
            string json = await tcs.Task.ConfigureAwait(false);
            var rows = new List<IDictionary<string, object>>();
            foreach (object row in (List<object>)Json.Parse(json)) rows.Add((IDictionary<string, object>)row);
            return rows;
        }
    }
}
