using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using QueueBox.Inbox;

namespace QueueBox.Inbox.Tests
{
    /// <summary>A handler's ExecuteAsync stores exactly the values it was given, whatever the
    /// order of their kinds under one statement text: the core caches a prepared
    /// statement per text, and once bound a whole number as int8 and a fraction as float8, so
    /// 4.25 after 3 was stored as 4616471093031469056, silently. Mirrors
    /// core/tests/handler_statement_values.rs through this wrapper: one message, one handler,
    /// one transaction, each stored v::text compared with what PostgreSQL itself (through psql)
    /// makes of the value's JSON text (Json.Serialize's, which is what the core is handed).</summary>
    public static class ValuesTests
    {
        /// <summary>A System.Numerics.BigInteger. The test runner is compiled without a
        /// reference to System.Numerics.dll (scripts/test.d/32-csharp.sh), so it is made by
        /// reflection, from mono's assembly.</summary>
        private static object Big(string digits)
        {
            Type t = Type.GetType("System.Numerics.BigInteger, System.Numerics, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b77a5c561934e089", true);
            return t.GetMethod("Parse", new[] { typeof(string), typeof(IFormatProvider) })
                .Invoke(null, new object[] { digits, CultureInfo.InvariantCulture });
        }

        private static List<object> List(params object[] items) { return new List<object>(items); }

        /// <summary>Each column type with the values sent into it, in one order; the handler
        /// also sends them reversed.</summary>
        private static List<Tuple<string, object[]>> Columns()
        {
            return new List<Tuple<string, object[]>>
            {
                Tuple.Create("numeric", new object[]
                {
                    3, 4.25, 12.5, 7L, 0.5, null,
                    Big("123456789012345678901234567890"),
                    Big("-123456789012345678901234567891"),
                    0.1234567890123456789012345m,
                    1.50m,
                    long.MinValue,
                    ulong.MaxValue,
                    Big("18446744073709551616"),
                    0.25f,
                }),
                Tuple.Create("float8", new object[] { 3, 4.25, 0.1, 7L, null, 1e300, -0.5, 0.1234567890123456789012345m }),
                // A fraction into an int8 column rounds as PostgreSQL's assignment does (half away
                // from zero), as it would from psql.
                Tuple.Create("int8", new object[] { 3, long.MaxValue, null, -7, 0, 4.5, -2.5m, (byte)200 }),
                Tuple.Create("text", new object[]
                {
                    "12.345", 3, 4.25, true, null, "héllo", List(1, "a"),
                    new Dictionary<string, object> { { "a", 1.5 } },
                }),
                Tuple.Create("jsonb", new object[]
                {
                    new Dictionary<string, object> { { "a", 1 } },
                    List(1, 2.5, "x"),
                    null,
                    new Dictionary<string, object> { { "big", Big("123456789012345678901234567890") } },
                    new Dictionary<string, object> { { "d", 0.10m }, { "u", ulong.MaxValue } },
                }),
                Tuple.Create("bool", new object[] { true, false, null }),
            };
        }

        /// <summary>What PostgreSQL makes of value (as JSON text) stored into a column of type
        /// column, as text (null for NULL), asked of the server through psql.</summary>
        private static string Expected(string url, string column, object value)
        {
            if (value == null) return null;
            if (value is string) return (string)value;
            string cast;
            if (value is bool) cast = "bool";
            else if (value is IEnumerable) cast = "jsonb"; // lists and dictionaries
            else if (column == "float8") cast = "float8";
            else if (column == "int8") cast = "numeric::int8";
            else cast = "numeric"; // numeric, and a number into a text column
            string literal = Json.Serialize(value).Replace("'", "''");
            return Db.Psql(url, "SELECT ('" + literal + "'::text)::" + cast + "::text");
        }

        private static string Show(object v) { return v == null ? "NULL" : v.ToString(); }

        private static string Describe(object v)
        {
            return v == null ? "null" : v.GetType().Name + " " + Json.Serialize(v);
        }

        private static InboxOptions Quick(string source)
        {
            return new InboxOptions
            {
                Source = source, BatchSize = 10, MaxConcurrency = 1,
                PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(2),
            };
        }

        private static async Task RunUntil(InboxWorker w, InboxHandler handler, string what, Func<bool> condition)
        {
            using (var cts = new CancellationTokenSource())
            {
                Task run = w.RunAsync(handler, cts.Token);
                await Db.WaitForAsync(what, () => run.IsFaulted || condition());
                cts.Cancel();
                if (await Task.WhenAny(run, Task.Delay(10000)) != run) throw new AssertionException("RunAsync did not finish after cancellation");
                await run;
            }
        }

        [Test]
        public static async Task OneStatementStoresEveryKindOfValueExactlyInAnyOrder()
        {
            string url = await Db.CreateAsync();
            try
            {
                var columns = Columns();
                foreach (var c in columns) Db.Psql(url, "CREATE TABLE t_" + c.Item1 + " (n serial, v " + c.Item1 + ")");
                Db.InsertRows(url, "cs-values", 1);
                // Every value in the order the handler sends it: forward, then reversed.
                var sent = columns.ToDictionary(c => c.Item1, c => c.Item2.Concat(c.Item2.Reverse()).ToList());
                var failures = new List<string>();
                var inTx = new Dictionary<string, List<string>>(); // each column's rows, read in the transaction
                int calls = 0, done = 0;
                using (var w = await InboxWorker.ConnectAsync(url, Quick("cs-values")))
                {
                    await RunUntil(w, async (m, tx, ct) =>
                    {
                        Interlocked.Increment(ref calls);
                        try
                        {
                            foreach (var c in columns)
                            {
                                // One text for every value: one prepared statement on the handler's connection.
                                string insert = "INSERT INTO t_" + c.Item1 + " (v) VALUES ($1)";
                                foreach (object v in sent[c.Item1])
                                {
                                    try { await tx.ExecuteAsync(insert, v); }
                                    catch (QueueBoxException e)
                                    {
                                        lock (failures) failures.Add(c.Item1 + ": ExecuteAsync of " + Describe(v) + ": " + e.Message);
                                        throw new DeadLetterException(e.Message);
                                    }
                                }
                                var rows = await tx.QueryAsync("SELECT v::text AS v FROM t_" + c.Item1 + " ORDER BY n");
                                lock (inTx) inTx[c.Item1] = rows.Select(r => (string)r["v"]).ToList();
                            }
                        }
                        finally { Interlocked.Exchange(ref done, 1); }
                    }, "the handler to finish", () => Volatile.Read(ref done) == 1);
                }
                Assert.Equal(1, calls, "handler calls");

                var wrong = new List<string>(failures);
                foreach (var c in columns)
                {
                    List<string> stored;
                    if (!inTx.TryGetValue(c.Item1, out stored)) continue; // not reached: its failure is listed
                    List<object> all = sent[c.Item1];
                    if (stored.Count != all.Count)
                    {
                        wrong.Add(c.Item1 + ": " + stored.Count + " rows stored, " + all.Count + " sent");
                        continue;
                    }
                    if (failures.Count == 0)
                    {
                        // What committed, read by psql, is what the transaction saw.
                        var committed = (List<object>)Json.Parse(Db.Psql(url, "SELECT json_agg(v::text ORDER BY n) FROM t_" + c.Item1));
                        string a = string.Join(" | ", committed.Select(Show)), b = string.Join(" | ", stored.Select(Show));
                        if (a != b) wrong.Add(c.Item1 + ": committed " + a + ", but the transaction read " + b);
                    }
                    for (int i = 0; i < all.Count; i++)
                    {
                        string want = Expected(url, c.Item1, all[i]);
                        if (want != stored[i])
                            wrong.Add(c.Item1 + ": sent " + Describe(all[i]) + ", stored " + Show(stored[i]) + ", expected " + Show(want));
                    }
                }
                Assert.True(wrong.Count == 0, "values stored wrongly (" + wrong.Count + "):\n  " + string.Join("\n  ", wrong));
                Assert.Equal("processed", Db.Psql(url, "SELECT state FROM inbox WHERE source = 'cs-values'"), "the message's state");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static Task JsonWritesEveryNumberExactly()
        {
            Assert.Equal("[123456789012345678901234567890,-5,18446744073709551615,0.1234567890123456789012345,1.50,4.25,0.1]",
                Json.Serialize(new object[] { Big("123456789012345678901234567890"), Big("-5"), ulong.MaxValue, 0.1234567890123456789012345m, 1.50m, 4.25, 0.1 }),
                "numbers as JSON");
            return Task.FromResult(0);
        }
    }
}
