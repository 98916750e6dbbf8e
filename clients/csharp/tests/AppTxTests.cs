using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Data.Odbc;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>The application's own transaction with a real ADO.NET provider:
    /// System.Data.Odbc over psqlODBC (Debian's odbc-postgresql), placeholder style `?`,
    /// against the real PostgreSQL. Npgsql and EF Core cannot be fetched here (no NuGet).</summary>
    public static class AppTxTests
    {
        /// <summary>An ODBC connection (DSN-less, psqlODBC's Unicode driver) to the database of
        /// a postgres:// URL; opened.</summary>
        internal static OdbcConnection Odbc(string url)
        {
            var c = new OdbcConnection(OdbcConnectionString(url));
            try
            {
                c.Open();
            }
            catch (OdbcException e)
            {
                c.Dispose();
                throw new AssertionException("NOT RUN: cannot open an ODBC connection (install unixodbc and odbc-postgresql): " + e.Message);
            }
            return c;
        }

        internal static string OdbcConnectionString(string url)
        {
            var u = new Uri(url);
            string user = string.IsNullOrEmpty(u.UserInfo) ? "postgres" : u.UserInfo.Split(':')[0];
            return "Driver={PostgreSQL Unicode};Server=" + u.Host + ";Port=" + u.Port +
                   ";Database=" + u.AbsolutePath.TrimStart('/') + ";Uid=" + user + ";";
        }

        private static void Exec(DbTransaction tx, string sql, params object[] values)
        {
            using (DbCommand cmd = tx.Connection.CreateCommand())
            {
                cmd.Transaction = tx;
                cmd.CommandText = sql;
                foreach (object v in values)
                {
                    DbParameter p = cmd.CreateParameter();
                    p.Value = v;
                    cmd.Parameters.Add(p);
                }
                cmd.ExecuteNonQuery();
            }
        }

        // The application's transaction: the business write and the
        // completion commit together, through both handler forms.
        [Test]
        public static async Task BusinessWriteAndCompletionCommitTogether()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text PRIMARY KEY, inbox_id uuid)");
                Db.InsertRows(url, "ship", 3);
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("ship")))
                {
                    await ContractTests.RunUntil(ct => w.RunTasksAsync(async (task, t) =>
                    {
                        using (OdbcConnection conn = Odbc(url))
                        using (DbTransaction tx = conn.BeginTransaction())
                        {
                            Exec(tx, "INSERT INTO shipments (key, inbox_id) VALUES (?, ?::uuid)", task.Message.IdempotencyKey, task.Message.Id.ToString());
                            // The detected placeholder and the caller's override take the same path.
                            if (task.Message.IdempotencyKey == "k2") await task.CompleteAsync(tx, SqlPlaceholder.Question, t);
                            else await task.CompleteAsync(tx, t);
                            // A second completion is refused, not mistaken for a lost claim.
                            if (task.Message.IdempotencyKey == "k3")
                                await Assert.ThrowsAsync<InvalidOperationException>(() => task.CompleteAsync(tx, t), "a second CompleteAsync");
                            // Not visible outside the transaction before the commit.
                            Assert.Equal("processing", Db.Psql(url, "SELECT state FROM inbox WHERE id = '" + task.Message.Id + "'"), "state before the commit");
                            tx.Commit();
                        }
                    }, ct), "3 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "3");
                }
                Assert.Equal("k1:true,k2:true,k3:true",
                    Db.Psql(url, "SELECT string_agg(s.key || ':' || (s.inbox_id = i.id), ',' ORDER BY s.key) FROM shipments s JOIN inbox i ON i.idempotency_key = s.key"),
                    "business rows");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM inbox WHERE processed_at IS NULL OR claim_token IS NOT NULL OR attempt <> 0"), "rows not cleanly processed");

                // The worker-managed form: connection, transaction, completion and commit by the worker.
                Db.InsertRows(url, "ship2", 2);
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("ship2")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync(() => Odbc(url), (m, tx, t) =>
                    {
                        Exec(tx, "INSERT INTO shipments (key, inbox_id) VALUES (?, ?::uuid)", "2-" + m.IdempotencyKey, m.Id.ToString());
                        return Task.FromResult(0);
                    }, ct), "2 more rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE source = 'ship2' AND state = 'processed'") == "2");
                }
                Assert.Equal("2", Db.Psql(url, "SELECT count(*) FROM shipments WHERE key LIKE '2-%'"), "business rows of the worker-managed form");
            }
            finally { Db.Drop(url); }
        }

        // Item 3 on the application's transaction: a handler error after the completion rolls
        // both back; the core retries the row (attempt and last_error right) and the next
        // delivery commits.
        [Test]
        public static async Task HandlerErrorRollsBothBackAndTheRowIsRetried()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text, attempt int)");
                Db.InsertRows(url, "flaky", 1);
                var opts = ContractTests.Quick("flaky");
                opts.RetryPolicy = new InboxRetryPolicy { MaxAttempts = 5, BaseDelay = TimeSpan.FromMilliseconds(300), Jitter = 0 };
                var attempts = new List<int>();
                string afterFailure = null;
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync(() => Odbc(url), (m, tx, t) =>
                    {
                        lock (attempts) attempts.Add(m.Attempt);
                        Exec(tx, "INSERT INTO shipments VALUES (?, ?)", m.IdempotencyKey, m.Attempt);
                        if (m.Attempt == 0) throw new InvalidOperationException("payment service down");
                        afterFailure = Db.Psql(url, "SELECT count(*) FROM shipments");
                        return Task.FromResult(0);
                    }, ct), "the retried row processed", () => Db.Psql(url, "SELECT state FROM inbox") == "processed");
                }
                Assert.Equal("0,1", string.Join(",", attempts), "attempts per delivery");
                Assert.Equal("0", afterFailure, "business rows of the failed delivery (seen from outside during the retry)");
                Assert.Equal("k1:1", Db.Psql(url, "SELECT string_agg(key || ':' || attempt, ',') FROM shipments"), "business rows: only the retry's");
                Assert.Equal("processed 1 payment service down", Db.Psql(url, "SELECT state || ' ' || attempt || ' ' || last_error FROM inbox"), "row");
            }
            finally { Db.Drop(url); }
        }

        // Item 3 before the retry runs: the failed delivery left the row pending with attempt 1,
        // last_error and a later scheduled_at, and no business row (RunTasksAsync form).
        [Test]
        public static async Task HandlerErrorLeavesTheRowPendingWithAttemptAndLastError()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text)");
                Db.InsertRows(url, "fail", 1);
                var opts = ContractTests.Quick("fail");
                opts.RetryPolicy = new InboxRetryPolicy { BaseDelay = TimeSpan.FromMinutes(10), MaxDelay = TimeSpan.FromMinutes(10), Jitter = 0 };
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await ContractTests.RunUntil(ct => w.RunTasksAsync(async (task, t) =>
                    {
                        using (OdbcConnection conn = Odbc(url))
                        using (DbTransaction tx = conn.BeginTransaction())
                        {
                            Exec(tx, "INSERT INTO shipments VALUES (?)", task.Message.IdempotencyKey);
                            await task.CompleteAsync(tx, t);
                            throw new InvalidOperationException("failed after the completion, before the commit");
                        }
                    }, ct), "the failure recorded", () => Db.Psql(url, "SELECT attempt FROM inbox") == "1");
                    Assert.Equal(0UL, w.GetStats().Completed, "completed");
                }
                Assert.Equal("pending 1 failed after the completion, before the commit true",
                    Db.Psql(url, "SELECT state || ' ' || attempt || ' ' || last_error || ' ' || (scheduled_at > now() + interval '9 minutes') FROM inbox"), "row");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM shipments"), "business rows");
            }
            finally { Db.Drop(url); }
        }

        // Item 4 on the application's transaction: a rival worker took the row after the
        // lease expired and completed it; our completion matches no row, CompleteAsync throws
        // ClaimLostException and the business write disappears with the rollback.
        [Test]
        public static async Task LostLeaseThrowsClaimLostAndTheBusinessWriteDisappears()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text)");
                Db.InsertRows(url, "lost", 1);
                Exception seen = null;
                var rivalSaw = new List<Guid>();
                string id = Db.Psql(url, "SELECT id FROM inbox");
                // A batch of one: this worker holds its claim and cannot take the expired row
                // back itself while the handler runs; only the rival can.
                var opts = ContractTests.Quick("lost");
                opts.BatchSize = 1;
                opts.MaxConcurrency = 1;
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await ContractTests.RunUntil(ct => w.RunTasksAsync(async (task, t) =>
                    {
                        using (OdbcConnection conn = Odbc(url))
                        using (DbTransaction tx = conn.BeginTransaction())
                        {
                            Exec(tx, "INSERT INTO shipments VALUES (?)", task.Message.IdempotencyKey);
                            // The lease runs out (a stalled process renews nothing) and a rival
                            // worker claims the row and completes it.
                            Db.Psql(url, "UPDATE inbox SET lease_expires_at = now() - interval '1 second'");
                            using (var rival = await InboxWorker.ConnectAsync(url, ContractTests.Quick("lost")))
                            {
                                await ContractTests.RunUntil(rct => rival.RunAsync((rm, rtx, rt) =>
                                {
                                    rivalSaw.Add(rm.Id);
                                    return Task.FromResult(0);
                                }, rct), "the rival's completion", () => Db.Psql(url, "SELECT state FROM inbox") == "processed");
                            }
                            try
                            {
                                await task.CompleteAsync(tx, t);
                                tx.Commit();
                            }
                            catch (Exception e)
                            {
                                seen = e;
                                throw;
                            }
                        }
                    }, ct), "the lost claim", () => { var s = w.GetStats(); return s.ClaimsLost == 1 && s.InFlight == 0; });
                    InboxStats st = w.GetStats();
                    Assert.Equal("0 0 0", st.Completed + " " + st.Retried + " " + st.Dead, "completed/retried/dead");
                }
                Assert.True(seen is ClaimLostException, "CompleteAsync threw " + (seen == null ? "nothing" : seen.GetType().Name + ": " + seen.Message));
                Assert.Equal(QueueBoxErrorKind.ClaimLost, ((QueueBoxException)seen).Kind, "kind");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM shipments"), "business rows after the lost claim");
                Assert.True(seen.Message.Contains(id), "the error does not name the row " + id + ": " + seen.Message);
                Assert.Equal(id, string.Join(",", rivalSaw), "the rival's deliveries");
                Assert.Equal("processed 0", Db.Psql(url, "SELECT state || ' ' || attempt FROM inbox"), "the rival's completion, no attempt spent");
            }
            finally { Db.Drop(url); }
        }

        // A rolled-back publish leaves no row; a committed one is a pending outbox row with the
        // returned id and every option as given.
        [Test]
        public static async Task PublishCommitsWithTheTransactionOnly()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE orders (id text)");
                Guid rolledBack, committed;
                using (OdbcConnection conn = Odbc(url))
                {
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        Exec(tx, "INSERT INTO orders VALUES (?)", "o-1");
                        rolledBack = await Outbox.PublishAsync(tx, "orders.created", new Dictionary<string, object> { { "order", "o-1" } });
                        Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM outbox"), "outbox rows seen from outside before the commit");
                        tx.Rollback();
                    }
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        Exec(tx, "INSERT INTO orders VALUES (?)", "o-2");
                        committed = await Outbox.PublishAsync(tx, "orders.created", new Dictionary<string, object> { { "order", "o-2" }, { "total", 12.5 } },
                            new PublishOptions
                            {
                                Key = "customer-7", AggregateType = "order", MaxAttempts = 9, Delay = TimeSpan.FromMinutes(5),
                                Headers = new Dictionary<string, string> { { "x-tenant", "acme" } },
                            });
                        tx.Commit();
                    }
                }
                Assert.True(rolledBack != committed && committed != Guid.Empty, "ids " + rolledBack + " " + committed);
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM outbox WHERE id = '" + rolledBack + "'"), "rolled-back publish rows");
                Assert.Equal("o-2", Db.Psql(url, "SELECT string_agg(id, ',') FROM orders"), "business rows");
                Assert.Equal(committed + "|orders.created|customer-7|order|{\"order\": \"o-2\", \"total\": 12.5}|{\"x-tenant\": \"acme\"}|pending|0|9|true",
                    Db.Psql(url, "SELECT id || '|' || topic || '|' || key || '|' || aggregate_type || '|' || payload::text || '|' || headers::text || '|' || state || '|' || attempt || '|' || max_attempts || '|' || " +
                                 "(scheduled_at BETWEEN created_at + interval '4 minutes' AND created_at + interval '6 minutes') FROM outbox"),
                    "the committed row");

                // scheduled_at, a JSON-text payload and the defaults.
                var at = new DateTimeOffset(2031, 5, 6, 7, 8, 9, TimeSpan.FromHours(2));
                Guid scheduled;
                using (OdbcConnection conn = Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    scheduled = (await Outbox.PublishManyAsync(tx, new[] { new OutboxMessage("t", new JsonText("[1, \"two\", null]")) { ScheduledAt = at } },
                                                              SqlPlaceholder.Question, SqlBackend.PostgreSql))[0];
                    tx.Commit();
                }
                Assert.Equal("[1, \"two\", null]|2031-05-06 05:08:09|5|{}|-",
                    Db.Psql(url, "SELECT payload::text || '|' || to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || '|' || max_attempts || '|' || headers::text || '|' || coalesce(key, '-') FROM outbox WHERE id = '" + scheduled + "'"),
                    "scheduled row");
            }
            finally { Db.Drop(url); }
        }

        // publish_many of 10,000 rows is one statement (counted by a statement-level trigger)
        // and returns the ids in order.
        [Test]
        public static async Task PublishManyOfTenThousandRowsIsOneStatement()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE statements (n int); " +
                             "CREATE FUNCTION count_statement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO statements VALUES (1); RETURN NULL; END $$; " +
                             "CREATE TRIGGER count_statement AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION count_statement()");
                var messages = Enumerable.Range(0, 10000).Select(i => new OutboxMessage("bulk", new Dictionary<string, object> { { "n", (long)i } }) { Key = "k" + (i % 7) }).ToList();
                IReadOnlyList<Guid> ids;
                var sw = Stopwatch.StartNew();
                using (OdbcConnection conn = Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    ids = await Outbox.PublishManyAsync(tx, messages);
                    tx.Commit();
                }
                Console.WriteLine("  10,000 rows published in " + sw.ElapsedMilliseconds + " ms (one statement, ODBC)");
                Assert.Equal(10000, ids.Count, "ids");
                Assert.Equal(10000, ids.Distinct().Count(), "distinct ids");
                Assert.Equal("1", Db.Psql(url, "SELECT count(*) FROM statements"), "insert statements");
                // Row i has the i-th id.
                Assert.Equal("10000", Db.Psql(url, "SELECT count(*) FROM outbox WHERE topic = 'bulk' AND key = 'k' || ((payload->>'n')::int % 7)"), "rows");
                foreach (int i in new[] { 0, 1, 4242, 9999 })
                    Assert.Equal(i.ToString(), Db.Psql(url, "SELECT payload->>'n' FROM outbox WHERE id = '" + ids[i] + "'"), "payload of ids[" + i + "]");
            }
            finally { Db.Drop(url); }
        }

        private static long RunVector(DbTransaction tx, IDictionary<string, object> statement)
        {
            using (DbCommand cmd = tx.Connection.CreateCommand())
            {
                cmd.Transaction = tx;
                cmd.CommandText = (string)statement["sql"];
                foreach (object v in (List<object>)statement["params"])
                {
                    DbParameter p = cmd.CreateParameter();
                    p.DbType = System.Data.DbType.String;
                    p.Value = v ?? DBNull.Value;
                    cmd.Parameters.Add(p);
                }
                return cmd.ExecuteNonQuery();
            }
        }

        // The statement vectors (proto-docs/vectors) on the real server through ODBC: the
        // PostgreSQL `question` completion exactly as the vector gives it, and every PostgreSQL
        // publish vector re-rendered in `question` style with the vector's ids.
        [Test]
        public static async Task StatementVectorsRunOnPostgreSqlThroughOdbc()
        {
            string dir = InboxTests.FindVectors();
            var completion = ((List<object>)((IDictionary<string, object>)Json.Parse(System.IO.File.ReadAllText(System.IO.Path.Combine(dir, "completion_statement.json"))))["cases"])
                .Cast<IDictionary<string, object>>().Single(c => (string)c["name"] == "postgres question");
            var input = (IDictionary<string, object>)completion["input"];
            var expected = (IDictionary<string, object>)completion["expected"];
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, claim_token, claimed_at, lease_expires_at) VALUES ('" +
                             input["id"] + "', 's', 'k', '{}', 'pull', 'processing', '" + input["token"] + "', now(), now() + interval '1 minute')");
                using (OdbcConnection conn = Odbc(url))
                {
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        Assert.Equal(1L, RunVector(tx, expected), "completion rows affected on the claimed row");
                        tx.Commit();
                    }
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        Assert.Equal(0L, RunVector(tx, expected), "completion rows affected once the row is processed");
                        tx.Commit();
                    }
                }
                Assert.Equal("processed", Db.Psql(url, "SELECT state FROM inbox"), "state");

                int ran = 0;
                var publishes = ((List<object>)((IDictionary<string, object>)Json.Parse(System.IO.File.ReadAllText(System.IO.Path.Combine(dir, "publish_statement.json"))))["cases"])
                    .Cast<IDictionary<string, object>>();
                foreach (var c in publishes)
                {
                    var pin = new Dictionary<string, object>((IDictionary<string, object>)c["input"]);
                    if ((string)pin["backend"] != "postgres" || ((IDictionary<string, object>)c["expected"]).ContainsKey("error")) continue;
                    pin["placeholder"] = "question";
                    var st = (IDictionary<string, object>)Json.Parse(QueueBoxLibrary.EvaluateVector("publish_statement", Json.Serialize(pin)));
                    var ids = ((List<object>)st["ids"]).Cast<string>().ToList();
                    using (OdbcConnection conn = Odbc(url))
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        Assert.Equal((long)ids.Count, RunVector(tx, st), c["name"] + ": rows inserted");
                        tx.Commit();
                    }
                    Assert.Equal(string.Join(",", ids), Db.Psql(url, "SELECT string_agg(id::text, ',' ORDER BY sequence) FROM outbox"), c["name"] + ": ids in order");
                    Db.Psql(url, "DELETE FROM outbox");
                    ran++;
                }
                Assert.True(ran >= 3, "only " + ran + " PostgreSQL publish vectors ran");
            }
            finally { Db.Drop(url); }
        }

        // Bad input gets an error naming the field (the core's validation), and nothing is written.
        [Test]
        public static async Task BadInputNamesTheField()
        {
            string url = await Db.CreateAsync();
            try
            {
                var cases = new List<KeyValuePair<string, OutboxMessage[]>>
                {
                    new KeyValuePair<string, OutboxMessage[]>("messages[0].topic", new[] { new OutboxMessage("", 1L) }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[0].payload", new[] { new OutboxMessage("t", null) }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[0].max_attempts", new[] { new OutboxMessage("t", 1L) { MaxAttempts = 0 } }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[2].key", new[] { new OutboxMessage("t", 1L), new OutboxMessage("t", 2L), new OutboxMessage("t", 3L) { Key = new string('k', 256) } }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[1].headers.content-length", new[]
                    {
                        new OutboxMessage("t", 1L),
                        new OutboxMessage("t", 2L) { Headers = new Dictionary<string, string> { { "content-length", "3" } } },
                    }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[0].payload", new[] { new OutboxMessage("t", new JsonText("{oops")) }),
                    new KeyValuePair<string, OutboxMessage[]>("messages[0].payload.order", new[] { new OutboxMessage("t", new Dictionary<string, object> { { "order", new { id = 1 } } }) }),
                };
                using (OdbcConnection conn = Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    foreach (var c in cases)
                    {
                        var e = await Assert.ThrowsAsync<QueueBoxException>(() => Outbox.PublishManyAsync(tx, c.Value), c.Key);
                        Assert.Equal(QueueBoxErrorKind.InvalidInput, e.Kind, c.Key + " kind");
                        Assert.True(e.Message.Contains(c.Key), "the error does not name " + c.Key + ": " + e.Message);
                    }
                    var both = new OutboxMessage("t", 1L) { Delay = TimeSpan.FromSeconds(1), ScheduledAt = DateTimeOffset.UtcNow };
                    var b = await Assert.ThrowsAsync<QueueBoxException>(() => Outbox.PublishManyAsync(tx, new[] { both }), "delay and scheduled_at");
                    Assert.True(b.Message.Contains("messages[0]") && b.Message.Contains("scheduled_at"), b.Message);
                    tx.Commit();
                }
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM outbox"), "rows written by rejected publishes");

                var n = await Assert.ThrowsAsync<ArgumentNullException>(() => Outbox.PublishAsync(null, "t", 1L), "null transaction");
                Assert.Equal("tx", n.ParamName, "ParamName");
                DbTransaction finished;
                using (OdbcConnection conn = Odbc(url))
                {
                    finished = conn.BeginTransaction();
                    finished.Commit();
                    var f = await Assert.ThrowsAsync<ArgumentException>(() => Outbox.PublishAsync(finished, "t", 1L), "finished transaction");
                    Assert.Equal("tx", f.ParamName, "ParamName");
                }
            }
            finally { Db.Drop(url); }
        }
    }
}
