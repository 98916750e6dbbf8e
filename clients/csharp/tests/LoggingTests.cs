using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using QueueBox.Inbox;

namespace QueueBox.Inbox.Tests
{
    /// <summary>The native library's records reach an <see cref="IQueueBoxLogger"/>.</summary>
    public static class LoggingTests
    {
        private sealed class Captured
        {
            public readonly List<Tuple<QueueBoxLogLevel, string, IReadOnlyDictionary<string, object>>> Records =
                new List<Tuple<QueueBoxLogLevel, string, IReadOnlyDictionary<string, object>>>();

            public IQueueBoxLogger Logger()
            {
                return new DelegateLogger((level, message, fields) => { lock (Records) Records.Add(Tuple.Create(level, message, fields)); });
            }

            public IReadOnlyDictionary<string, object> Find(QueueBoxLogLevel level, string message)
            {
                lock (Records) return Records.Where(r => r.Item1 == level && r.Item2.Contains(message)).Select(r => r.Item3).FirstOrDefault();
            }

            /// <summary>Every record whose message contains <paramref name="message"/>, at any level.</summary>
            public List<Tuple<QueueBoxLogLevel, string, IReadOnlyDictionary<string, object>>> All(string message)
            {
                lock (Records) return Records.Where(r => r.Item2.Contains(message)).ToList();
            }
        }

        [Test]
        public static async Task UnreachableDatabaseIsLoggedAtWarning()
        {
            var logs = new Captured();
            var options = new InboxOptions { Source = "cs-logs-down", Logger = logs.Logger() };
            var e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxWorker.ConnectAsync("postgres://qb@127.0.0.1:1/down", options), "connect");
            Assert.Equal(QueueBoxErrorKind.Connect, e.Kind, "error kind");
            var fields = logs.Find(QueueBoxLogLevel.Warning, "database is unreachable");
            Assert.True(fields != null, "no warning about the unreachable database; " + logs.Records.Count + " records");
            Assert.Equal("cs-logs-down", (string)fields["source"], "source field");
            Assert.Equal("queuebox_core::worker", (string)fields["target"], "target field");
            Assert.True(((string)fields["error"]).Contains("127.0.0.1:1"), "error field: " + fields["error"]);
        }

        [Test]
        public static async Task DeadLetteredMessageIsLoggedWithItsIdAndSource()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "cs-logs-dead", 1);
                string id = Db.Psql(url, "SELECT id FROM inbox WHERE source = 'cs-logs-dead'");
                var logs = new Captured();
                var options = new InboxOptions
                {
                    Source = "cs-logs-dead", PollInterval = TimeSpan.FromMilliseconds(50),
                    ShutdownGrace = TimeSpan.FromSeconds(2), Logger = logs.Logger(),
                };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) => { throw new DeadLetterException("poison pill"); }, cts.Token);
                    await Db.WaitForAsync("the dead-letter record", () => run.IsFaulted || logs.Find(QueueBoxLogLevel.Warning, "dead-lettered") != null);
                    cts.Cancel();
                    await run;
                }
                var fields = logs.Find(QueueBoxLogLevel.Warning, "dead-lettered");
                Assert.Equal(id, (string)fields["message_id"], "message_id field");
                Assert.Equal("cs-logs-dead", (string)fields["source"], "source field");
                Assert.Equal("poison pill", (string)fields["reason"], "reason field");
            }
            finally { Db.Drop(url); }
        }

        /// <summary>A failing handler shows at Warning, once per attempt that schedules a retry,
        /// naming the message and the error (at Information it was hidden by the default logger
        /// and by .NET's usual configuration).</summary>
        [Test]
        public static async Task FailedHandlerIsLoggedAtWarningOncePerAttempt()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "cs-logs-fail", 1);
                string id = Db.Psql(url, "SELECT id FROM inbox WHERE source = 'cs-logs-fail'");
                var logs = new Captured();
                var options = new InboxOptions
                {
                    Source = "cs-logs-fail", PollInterval = TimeSpan.FromMilliseconds(50),
                    ShutdownGrace = TimeSpan.FromSeconds(2), Logger = logs.Logger(),
                    RetryPolicy = new InboxRetryPolicy { MaxAttempts = 3, BaseDelay = TimeSpan.FromMilliseconds(50), MaxDelay = TimeSpan.FromSeconds(1), Jitter = 0 },
                };
                int calls = 0;
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) =>
                    {
                        Interlocked.Increment(ref calls);
                        throw new InvalidOperationException("downstream unavailable");
                    }, cts.Token);
                    await Db.WaitForAsync("the row to be dead", () => run.IsFaulted || Db.Psql(url, "SELECT state FROM inbox") == "dead");
                    cts.Cancel();
                    await run;
                }
                // Every call but the last schedules a retry; the last dead-letters the row.
                int retried = calls - 1;
                var all = logs.All("handler failed; retry scheduled");
                var warnings = all.Where(r => r.Item1 == QueueBoxLogLevel.Warning).Select(r => r.Item3).ToList();
                Assert.True(retried >= 2 && warnings.Count == retried,
                    warnings.Count + " warnings of a failed handler after " + retried + " retried calls, want one per retried call; records with that message: " +
                    string.Join(", ", all.Select(r => r.Item1 + " " + Json.Serialize(r.Item3))));
                for (int i = 0; i < warnings.Count; i++)
                {
                    Assert.Equal(id, (string)warnings[i]["message_id"], "message_id field of record " + i);
                    Assert.Equal("cs-logs-fail", (string)warnings[i]["source"], "source field of record " + i);
                    Assert.True(((string)warnings[i]["error"]).Contains("downstream unavailable"), "error field of record " + i + ": " + warnings[i]["error"]);
                    Assert.Equal((long)(i + 1), Convert.ToInt64(warnings[i]["attempt"]), "attempt field of record " + i);
                }
            }
            finally { Db.Drop(url); }
        }
    }
}
