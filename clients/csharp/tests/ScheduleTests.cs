using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Schedules in a C# worker's options: a worker running a 200 ms schedule
    /// enqueues each tick as one row (the tick's time in its idempotency key) that its own
    /// handler receives once, none missing; a bad schedule is refused by the core, naming
    /// its field.</summary>
    public static class ScheduleTests
    {
        [Test]
        public static async Task A200MsScheduleEnqueuesEachTickOnceAndTheHandlerReceivesIt()
        {
            string url = await Db.CreateAsync();
            try
            {
                const string prefix = "schedule:cs-tick:";
                var seen = new ConcurrentQueue<string>();
                bool payloadsMatch = true;
                var options = new InboxOptions
                {
                    Source = "cs-ticks", PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(2),
                    Schedules = new List<Schedule>
                    {
                        new Schedule { Name = "cs-tick", Source = "cs-ticks", Every = TimeSpan.FromMilliseconds(200), Payload = new Dictionary<string, object> { { "from", "csharp" } } },
                    },
                };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        var p = m.Payload as IDictionary<string, object>;
                        if (p == null || !"csharp".Equals(p["from"])) payloadsMatch = false;
                        seen.Enqueue(m.IdempotencyKey);
                        return Task.FromResult(0);
                    }, ct), "5 handled ticks", () => seen.Count >= 5);
                }
                var keys = seen.ToList();
                Assert.Equal(keys.Count, keys.Distinct().Count(), "a tick handled twice: " + string.Join(" ", keys));
                Assert.True(payloadsMatch, "each tick's payload is the schedule's");
                var ms = Db.Psql(url, "SELECT idempotency_key FROM inbox WHERE source = 'cs-ticks'")
                    .Split(new[] { '\n' }, StringSplitOptions.RemoveEmptyEntries)
                    .Select(k =>
                    {
                        Assert.True(k.StartsWith(prefix) && k.EndsWith("Z") && k.Length == prefix.Length + 24, "key shape: " + k);
                        var t = DateTimeOffset.ParseExact(k.Substring(prefix.Length), "yyyy-MM-dd'T'HH:mm:ss.fff'Z'", CultureInfo.InvariantCulture, DateTimeStyles.AssumeUniversal);
                        return t.ToUnixTimeMilliseconds();
                    })
                    .OrderBy(t => t).ToList();
                Assert.True(ms.All(t => t % 200 == 0), "ticks off the 200 ms grid: " + string.Join(" ", ms));
                Assert.Equal((long)ms.Count, (ms.Last() - ms.First()) / 200 + 1, "ticks missing or doubled: " + string.Join(" ", ms));
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task ABadScheduleIsRefusedNamingItsField()
        {
            string url = await Db.CreateAsync();
            try
            {
                var bad = new InboxOptions { Source = "s", Schedules = new List<Schedule> { new Schedule { Name = "a", Source = "s", Cron = "not a cron" } } };
                var e = await Assert.ThrowsAsync<QueueBoxConfigException>(() => InboxWorker.ConnectAsync(url, bad), "a bad cron");
                Assert.Equal("schedules[0].cron", e.Field, "field");
                bad.Schedules = new List<Schedule> { new Schedule { Name = "a", Source = "s", Every = TimeSpan.FromMilliseconds(10) } };
                e = await Assert.ThrowsAsync<QueueBoxConfigException>(() => InboxWorker.ConnectAsync(url, bad), "a 10 ms interval");
                // The core names the interval `every` here (its JSON key is everyMs).
                Assert.Equal("schedules[0].every", e.Field, "field");
            }
            finally { Db.Drop(url); }
        }
    }
}
