using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Data.Odbc;
using System.Linq;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Enqueue in the application's transaction through a real
    /// ADO.NET provider (System.Data.Odbc over psqlODBC) against the real PostgreSQL.</summary>
    public static class EnqueueTests
    {
        // A committed enqueue is a pull row with every option as given, and a worker of its
        // source handles it; a rolled-back one leaves nothing.
        [Test]
        public static async Task EnqueueCommitsWithTheTransactionOnlyAndAWorkerHandlesIt()
        {
            string url = await Db.CreateAsync();
            try
            {
                Enqueued rolledBack, committed;
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                {
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        rolledBack = await InboxQueue.EnqueueAsync(tx, "emails", new Dictionary<string, object> { { "to", "a@example.com" } },
                                                                   new EnqueueOptions { IdempotencyKey = "gone" });
                        Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM inbox"), "inbox rows seen from outside before the commit");
                        tx.Rollback();
                    }
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        committed = await InboxQueue.EnqueueAsync(tx, "emails", new Dictionary<string, object> { { "to", "b@example.com" }, { "n", 12345678901234567L } },
                            new EnqueueOptions
                            {
                                IdempotencyKey = "welcome-b", Priority = 7, AggregateId = "user-b", EventType = "email.welcome", CorrelationId = "corr-b",
                                MaxAttempts = 9, Headers = new Dictionary<string, string> { { "x-tenant", "acme" } },
                            });
                        tx.Commit();
                    }
                }
                Assert.True(!committed.Duplicate && committed.Id != Guid.Empty && committed.Id != rolledBack.Id, "outcome " + committed);
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM inbox WHERE idempotency_key = 'gone'"), "rolled-back rows");
                Assert.Equal(committed.Id + "|emails|welcome-b|user-b|email.welcome|corr-b|7|9|pull|pending|{\"x-tenant\": \"acme\"}",
                    Db.Psql(url, "SELECT id || '|' || source || '|' || idempotency_key || '|' || aggregate_id || '|' || event_type || '|' || correlation_id || '|' || " +
                                 "priority || '|' || max_attempts || '|' || consumption || '|' || state || '|' || headers::text FROM inbox"),
                    "the committed row");

                InboxMessage got = null;
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("emails")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        got = m;
                        return Task.FromResult(0);
                    }, ct), "the enqueued row processed", () => Db.Psql(url, "SELECT state FROM inbox") == "processed");
                }
                Assert.Equal(committed.Id, got.Id, "handled id");
                Assert.Equal("{\"n\":12345678901234567,\"to\":\"b@example.com\"}", got.PayloadJson, "handled payload");
                Assert.Equal("email.welcome|user-b|acme", got.EventType + "|" + got.AggregateId + "|" + got.Headers["x-tenant"], "handled fields");
            }
            finally { Db.Drop(url); }
        }

        // A key stored already (earlier transaction, or earlier message of the same call) is a
        // duplicate carrying the first id; many messages are one call; the blocking form, the
        // connection (no transaction) form and a delay / a schedule.
        [Test]
        public static async Task EnqueueDuplicatesReturnTheFirstIdAndManyGoInOneCall()
        {
            string url = await Db.CreateAsync();
            try
            {
                Enqueued first;
                IReadOnlyList<Enqueued> many;
                var at = new DateTimeOffset(2031, 5, 6, 7, 8, 9, TimeSpan.FromHours(2));
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                {
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        first = InboxQueue.Enqueue(tx, "jobs", 1L, new EnqueueOptions { IdempotencyKey = "k1" });
                        tx.Commit();
                    }
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        many = await InboxQueue.EnqueueManyAsync(tx, new[]
                        {
                            new EnqueueMessage("jobs", 2L) { IdempotencyKey = "k2", Delay = TimeSpan.FromMinutes(5) },
                            new EnqueueMessage("jobs", 3L) { IdempotencyKey = "k1" },
                            new EnqueueMessage("jobs", new JsonText("[1, \"two\"]")) { IdempotencyKey = "k2" },
                            new EnqueueMessage("jobs", 4L) { ScheduledAt = at },
                            new EnqueueMessage("other", 5L) { IdempotencyKey = "k1" },
                        });
                        tx.Commit();
                    }
                    // Outside a transaction: the statement commits by itself.
                    // mcs cannot compile `var (id, duplicate) = ...` (custom Deconstruct); call it by name.
                    Guid againId;
                    bool againDuplicate;
                    (await InboxQueue.EnqueueAsync(conn, "jobs", 6L, new EnqueueOptions { IdempotencyKey = "k2" })).Deconstruct(out againId, out againDuplicate);
                    Assert.True(againDuplicate && againId == many[0].Id, "connection form: " + againId + " " + againDuplicate);
                }
                Assert.Equal(5, many.Count, "outcomes");
                Assert.True(!first.Duplicate, "first is new");
                Assert.True(!many[0].Duplicate && many[1].Duplicate && many[1].Id == first.Id, "k1 again: " + many[1] + " first " + first);
                Assert.True(many[2].Duplicate && many[2].Id == many[0].Id, "k2 twice in one call: " + many[2] + " vs " + many[0]);
                Assert.True(!many[3].Duplicate && !many[4].Duplicate && many[4].Id != first.Id, "no key / other source: " + many[3] + " " + many[4]);
                Assert.Equal("4", Db.Psql(url, "SELECT count(*) FROM inbox"), "rows (first + three new; the duplicates stored nothing)");
                Assert.Equal("1", Db.Psql(url, "SELECT payload::text FROM inbox WHERE id = '" + first.Id + "'"), "the first payload stays");
                Assert.Equal("true", Db.Psql(url, "SELECT (scheduled_at BETWEEN created_at + interval '4 minutes' AND created_at + interval '6 minutes')::text FROM inbox WHERE id = '" + many[0].Id + "'"), "delay");
                Assert.Equal("2031-05-06 05:08:09", Db.Psql(url, "SELECT to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') FROM inbox WHERE id = '" + many[3].Id + "'"), "scheduled_at");
            }
            finally { Db.Drop(url); }
        }

        // Bad input is refused naming the message and field, and nothing is written.
        [Test]
        public static async Task EnqueueBadInputNamesTheField()
        {
            string url = await Db.CreateAsync();
            try
            {
                var cases = new List<KeyValuePair<string, EnqueueMessage[]>>
                {
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].source", new[] { new EnqueueMessage("", 1L) }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].payload", new[] { new EnqueueMessage("s", null) }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[1].priority", new[] { new EnqueueMessage("s", 1L), new EnqueueMessage("s", 2L) { Priority = 40000 } }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].max_attempts", new[] { new EnqueueMessage("s", 1L) { MaxAttempts = 0 } }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].idempotency_key", new[] { new EnqueueMessage("s", 1L) { IdempotencyKey = new string('k', 256) } }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].correlation_id", new[] { new EnqueueMessage("s", 1L) { CorrelationId = new string('c', 129) } }),
                    new KeyValuePair<string, EnqueueMessage[]>("messages[0].payload.user", new[] { new EnqueueMessage("s", new Dictionary<string, object> { { "user", new { id = 1 } } }) }),
                };
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    foreach (var c in cases)
                    {
                        var e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxQueue.EnqueueManyAsync(tx, c.Value), c.Key);
                        Assert.Equal(QueueBoxErrorKind.InvalidInput, e.Kind, c.Key + " kind");
                        Assert.True(e.Message.Contains(c.Key), "the error does not name " + c.Key + ": " + e.Message);
                    }
                    var both = new EnqueueMessage("s", 1L) { Delay = TimeSpan.FromSeconds(1), ScheduledAt = DateTimeOffset.UtcNow };
                    var b = await Assert.ThrowsAsync<QueueBoxException>(() => InboxQueue.EnqueueManyAsync(tx, new[] { both }), "delay and scheduled_at");
                    Assert.True(b.Message.Contains("messages[0]") && b.Message.Contains("scheduled_at"), b.Message);
                    tx.Commit();
                }
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM inbox"), "rows written by rejected enqueues");
                var n = await Assert.ThrowsAsync<ArgumentNullException>(() => InboxQueue.EnqueueAsync((DbTransaction)null, "s", 1L), "null transaction");
                Assert.Equal("tx", n.ParamName, "ParamName");
            }
            finally { Db.Drop(url); }
        }
    }
}
