using System;
using System.Collections.Generic;
using System.Data;
using System.Data.Common;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>A statement the core rendered for the application's own driver
    /// (proto-docs/sql-contract.md): SQL text, parameters that are all text or NULL (the SQL
    /// casts them), the ids of published rows, and how to read the result. This class only
    /// binds and runs it on the application's transaction; it never writes SQL.</summary>
    internal sealed class AppStatement
    {
        internal string Sql;
        internal List<string> Params = new List<string>();
        internal List<Guid> Ids = new List<Guid>();
        internal string Expect;
        internal SqlPlaceholder Placeholder;

        internal static AppStatement Parse(string json, SqlPlaceholder placeholder)
        {
            var o = Json.Parse(json) as IDictionary<string, object>;
            object sql, ps, expect, ids;
            if (o == null || !o.TryGetValue("sql", out sql) || !(sql is string) || !o.TryGetValue("params", out ps) || !(ps is List<object>))
                throw new QueueBoxException(QueueBoxErrorKind.Internal, null, "cannot read the statement from the native library: " + json);
            var st = new AppStatement { Sql = (string)sql, Placeholder = placeholder };
            foreach (object p in (List<object>)ps) st.Params.Add(p as string);
            if (o.TryGetValue("expect", out expect)) st.Expect = expect as string;
            if (o.TryGetValue("ids", out ids) && ids is List<object>)
                foreach (object id in (List<object>)ids) st.Ids.Add(Guid.Parse((string)id));
            return st;
        }

        /// <summary>The transaction's connection; a finished transaction has none.</summary>
        internal static DbConnection ConnectionOf(DbTransaction tx)
        {
            if (tx == null) throw new ArgumentNullException("tx");
            DbConnection c = tx.Connection;
            if (c == null) throw new ArgumentException("tx: the transaction has already been committed or rolled back", "tx");
            return c;
        }

        /// <summary>Runs the statement on <paramref name="tx"/>; returns the rows it affected.</summary>
        internal async Task<long> ExecuteAsync(DbTransaction tx, CancellationToken cancellationToken)
        {
            using (DbCommand cmd = Command(ConnectionOf(tx), tx))
                return await cmd.ExecuteNonQueryAsync(cancellationToken).ConfigureAwait(false);
        }

        /// <summary>The statement as a command on <paramref name="connection"/> in
        /// <paramref name="tx"/> (null: none). Each parameter is a string (or DBNull) bound as
        /// DbType.String: positionally for `?` and `$n`, by name (p1 / @p1) for the named styles.</summary>
        internal DbCommand Command(DbConnection connection, DbTransaction tx)
        {
            DbCommand cmd = connection.CreateCommand();
            cmd.Transaction = tx;
            cmd.CommandText = Sql;
            for (int i = 0; i < Params.Count; i++)
            {
                DbParameter p = cmd.CreateParameter();
                p.DbType = DbType.String;
                p.Value = (object)Params[i] ?? DBNull.Value;
                if (Placeholder == SqlPlaceholder.At) p.ParameterName = "@p" + (i + 1);
                else if (Placeholder == SqlPlaceholder.Colon) p.ParameterName = "p" + (i + 1);
                cmd.Parameters.Add(p);
            }
            return cmd;
        }
    }
}
