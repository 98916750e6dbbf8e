using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>PendingRows.CancelInboxAsync / CancelOutboxAsync through the native library
    /// against the real PostgreSQL: rows are inserted and read back with psql, and a real
    /// worker shows what it was handed.</summary>
    public static class CancelTests
    {
        // Pending pull rows cancelled by key, aggregate and id are never handed to a worker and
        // are `cancelled`; a second cancel cancels nothing and says the row had finished.
        [Test]
        public static async Task CancelledPullRowsAreNeverHandedToAWorker()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption) VALUES " +
                             "('cxl','c1',NULL,'{}','pull'),('cxl','c2','A','{}','pull'),('cxl','c3','A','{}','pull')," +
                             "('cxl','c4',NULL,'{}','pull'),('cxl','c5',NULL,'{}','pull')");
                Assert.Equal(new CancelCounts(1, 0, 0, 0),
                    await PendingRows.CancelInboxAsync(url, new InboxCancelTarget { Source = "cxl", Key = "c1" }), "by key");
                Assert.Equal(new CancelCounts(0, 0, 1, 0),
                    await PendingRows.CancelInboxAsync(url, new InboxCancelTarget { Source = "cxl", Key = "c1" }), "again");
                Assert.Equal(2L, (await PendingRows.CancelInboxAsync(url, new InboxCancelTarget { Source = "cxl", Aggregate = "A" })).Cancelled,
                    "by aggregate");
                Guid c4 = Guid.Parse(Db.Psql(url, "SELECT id FROM inbox WHERE idempotency_key = 'c4'"));
                Assert.Equal(1L, (await PendingRows.CancelInboxAsync(url, new InboxCancelTarget { Id = c4 })).Cancelled, "by id");

                var seen = new List<string>();
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("cxl")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        lock (seen) seen.Add(m.IdempotencyKey);
                        return Task.FromResult(0);
                    }, ct), "c5 processed", () => Db.Psql(url, "SELECT state FROM inbox WHERE idempotency_key = 'c5'") == "processed");
                }
                Assert.Equal("c5", string.Join(",", seen), "the keys handed to the worker");
                Assert.Equal("c1=cancelled/0,c2=cancelled/0,c3=cancelled/0,c4=cancelled/0,c5=processed/0",
                    Db.Psql(url, "SELECT string_agg(idempotency_key || '=' || state || '/' || attempt, ',' ORDER BY idempotency_key) FROM inbox"),
                    "states");
            }
            finally
            {
                Db.Drop(url);
            }
        }

        // Pending outbox rows of a key and topic are cancelled; others are left alone.
        [Test]
        public static async Task PendingOutboxRowsOfAKeyAndTopicAreCancelled()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES " +
                             "('t','K','{}', now() + interval '1 hour'), ('u','K','{}', now())");
                Assert.Equal(new CancelCounts(1, 0, 0, 0),
                    await PendingRows.CancelOutboxAsync(url, new OutboxCancelTarget { Topic = "t", Key = "K" }), "by topic and key");
                Assert.Equal("t=cancelled,u=pending",
                    Db.Psql(url, "SELECT string_agg(topic || '=' || state, ',' ORDER BY topic) FROM outbox"), "states");
            }
            finally
            {
                Db.Drop(url);
            }
        }

        // The README's cancel example, compiled in by 32-csharp.sh, cancels the row it names.
        [Test]
        public static async Task ReadmeCancelExampleCancelsThePendingRow()
        {
            Type t = typeof(CancelTests).Assembly.GetType("CancelExample");
            if (t == null) throw new AssertionException("NOT RUN: the README's CancelExample is not compiled in (32-csharp.sh extracts the README's csharp blocks)");
            var example = (Func<string, string, CancellationToken, Task<bool>>)Delegate.CreateDelegate(
                typeof(Func<string, string, CancellationToken, Task<bool>>), t.GetMethod("CancelWelcomeAsync"));
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('emails','welcome-7','{}','pull')");
                Assert.True(await example(url, "7", CancellationToken.None), "the example reports the row cancelled");
                Assert.Equal("cancelled", Db.Psql(url, "SELECT state FROM inbox"), "state");
                Assert.True(!await example(url, "7", CancellationToken.None), "a second cancel cancels nothing");
            }
            finally
            {
                Db.Drop(url);
            }
        }

        // A target that names no row is refused naming the missing field, before connecting
        // (the URL is unreachable); a cancelled token stops the waiting at once.
        [Test]
        public static async Task ATargetThatNamesNoRowIsRefusedNamingTheField()
        {
            const string nowhere = "postgres://postgres@127.0.0.1:1/none";
            var cases = new List<Tuple<Func<Task>, string>>
            {
                Tuple.Create<Func<Task>, string>(() => PendingRows.CancelInboxAsync(nowhere, new InboxCancelTarget { Source = "s" }), "id, key or aggregate"),
                Tuple.Create<Func<Task>, string>(() => PendingRows.CancelInboxAsync(nowhere, new InboxCancelTarget { Key = "k" }), "source is required"),
                Tuple.Create<Func<Task>, string>(() => PendingRows.CancelOutboxAsync(nowhere, new OutboxCancelTarget { Topic = "t" }), "id or key"),
            };
            foreach (var c in cases)
            {
                QueueBoxException e = await Assert.ThrowsAsync<QueueBoxException>(c.Item1, c.Item2);
                Assert.Equal(QueueBoxErrorKind.InvalidInput, e.Kind, "kind for " + c.Item2);
                Assert.True(e.Message.Contains(c.Item2), "the message names " + c.Item2 + ": " + e.Message);
            }
            using (var cts = new CancellationTokenSource())
            {
                cts.Cancel();
                await Assert.ThrowsAsync<OperationCanceledException>(
                    () => PendingRows.CancelInboxAsync(nowhere, new InboxCancelTarget { Source = "s", Key = "k" }, cts.Token), "a cancelled token");
            }
        }
    }
}
