using System;
using System.Data.Common;

namespace QueueBox.Inbox
{
    /// <summary>How parameters are marked in the SQL text the core renders for the
    /// application's own driver (the core's <c>app_tx::Placeholder</c>).</summary>
    public enum SqlPlaceholder
    {
        /// <summary><c>$1, $2</c>: Npgsql.</summary>
        Dollar,
        /// <summary><c>?</c>: ODBC (System.Data.Odbc), OLE DB.</summary>
        Question,
        /// <summary><c>%s</c> (the core doubles a literal %): psycopg; not an ADO.NET style.</summary>
        Percent,
        /// <summary><c>:p1, :p2</c>: Oracle-style named parameters.</summary>
        Colon,
        /// <summary><c>@p1, @p2</c>: SqlClient (SQL Server), Dapper.</summary>
        At,
    }

    /// <summary>The database the application's connection talks to; it decides the SQL
    /// dialect of a publish (a completion takes it from the worker).</summary>
    public enum SqlBackend
    {
        PostgreSql,
        SqlServer,
    }

    /// <summary>Picks the placeholder style and backend from an ADO.NET connection's type,
    /// so that callers pass them only for a provider not listed here.</summary>
    internal static class Providers
    {
        internal static string Name(SqlPlaceholder style)
        {
            // The lowercase names the core parses.
            switch (style)
            {
                case SqlPlaceholder.Dollar: return "dollar";
                case SqlPlaceholder.Question: return "question";
                case SqlPlaceholder.Percent: return "percent";
                case SqlPlaceholder.Colon: return "colon";
                case SqlPlaceholder.At: return "at";
                default: throw new ArgumentOutOfRangeException("placeholder", style, "placeholder: not a SqlPlaceholder value");
            }
        }

        internal static string Name(SqlBackend backend)
        {
            return backend == SqlBackend.SqlServer ? "sqlserver" : "postgres";
        }

        /// <summary>The placeholder the connection's provider binds positionally or by name.</summary>
        internal static SqlPlaceholder PlaceholderFor(DbConnection connection)
        {
            string type = connection.GetType().FullName;
            switch (type)
            {
                case "Npgsql.NpgsqlConnection": return SqlPlaceholder.Dollar;
                case "System.Data.Odbc.OdbcConnection":
                case "System.Data.OleDb.OleDbConnection": return SqlPlaceholder.Question;
                case "Microsoft.Data.SqlClient.SqlConnection":
                case "System.Data.SqlClient.SqlConnection": return SqlPlaceholder.At;
            }
            throw new ArgumentException("tx: the placeholder style of " + type + " is not known; pass the placeholder (SqlPlaceholder) explicitly", "tx");
        }

        /// <summary>The backend behind the connection: Npgsql is PostgreSQL, SqlClient is SQL
        /// Server; an ODBC or OLE DB connection by its driver / provider name.</summary>
        internal static SqlBackend BackendFor(DbConnection connection)
        {
            string type = connection.GetType().FullName;
            switch (type)
            {
                case "Npgsql.NpgsqlConnection": return SqlBackend.PostgreSql;
                case "Microsoft.Data.SqlClient.SqlConnection":
                case "System.Data.SqlClient.SqlConnection": return SqlBackend.SqlServer;
            }
            // ODBC names its driver library (psqlodbcw.so, msodbcsql18.so …), OLE DB its provider
            // (MSOLEDBSQL, PostgreSQL OLE DB Provider); read by name so that no provider
            // assembly is referenced.
            string dbms = null;
            foreach (string property in new[] { "Driver", "Provider" })
            {
                var prop = connection.GetType().GetProperty(property, typeof(string));
                if (prop == null) continue;
                try { dbms = (string)prop.GetValue(connection, null); }
                catch (Exception) { dbms = null; }
                if (!string.IsNullOrEmpty(dbms)) break;
            }
            if (Mentions(dbms, "psql", "postgres")) return SqlBackend.PostgreSql;
            if (Mentions(dbms, "sql server", "msodbcsql", "sqlncli", "msoledbsql", "sqloledb", "tdsodbc")) return SqlBackend.SqlServer;
            throw new ArgumentException("tx: cannot tell the database behind " + type + (dbms == null ? "" : " (" + dbms + ")") +
                                        "; pass the backend (SqlBackend) explicitly", "tx");
        }

        private static bool Mentions(string text, params string[] names)
        {
            if (text == null) return false;
            foreach (string n in names)
                if (text.IndexOf(n, StringComparison.OrdinalIgnoreCase) >= 0) return true;
            return false;
        }
    }
}
