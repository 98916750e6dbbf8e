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
    }
}
