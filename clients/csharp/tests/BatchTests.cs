using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>The worker takes tasks in batches and sends plain completions back in batches
    /// (Batch.cs); each task of a batch must still stand alone.</summary>
    public static class BatchTests
    {
        private static InboxOptions Options(string source, int batch, int concurrency)
        {
            return new InboxOptions
            {
                Source = source, BatchSize = batch, MaxConcurrency = concurrency,
                PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(5),
            };
        }

        [Test]
        public static async Task LostClaimInABatchAffectsOnlyThatTask()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "lostbatch", 4);
                int started = 0;
                var allStarted = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (var w = await InboxWorker.ConnectAsync(url, Options("lostbatch", 4, 4)))
                using (var cts = new CancellationTokenSource())
                {
                    // The four handlers wait for each other, so the four are out together and
                    // their completions go back together.
                    Task run = w.RunAsync(async (m, tx, ct) =>
                    {
                        if (m.IdempotencyKey == "k2")
                            Db.Psql(url, "UPDATE inbox SET claim_token = gen_random_uuid() WHERE idempotency_key = 'k2'");
                        if (Interlocked.Increment(ref started) == 4) allStarted.TrySetResult(true);
                        await Task.WhenAny(allStarted.Task, Task.Delay(10000));
                    }, cts.Token);
                    await Db.WaitForAsync("three completions and one lost claim", () =>
                    {
                        InboxStats s = w.GetStats();
                        return run.IsFaulted || (s.Completed == 3 && s.ClaimsLost == 1 && s.InFlight == 0);
                    });
                    cts.Cancel();
                    await run;
                }
                Assert.Equal("k1=processed,k2=processing,k3=processed,k4=processed",
                    Db.Psql(url, "SELECT string_agg(idempotency_key || '=' || state, ',' ORDER BY idempotency_key) FROM inbox"),
                    "only k2's completion is fenced out");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task ShutdownWithAPartialBatchReleasesTheRestAndLosesNothing()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "partial", 10);
                var seen = new ConcurrentDictionary<string, int>();
                var release = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                int running = 0;
                InboxHandler handler = async (m, tx, ct) =>
                {
                    seen.AddOrUpdate(m.IdempotencyKey, 1, (k, n) => n + 1);
                    Interlocked.Increment(ref running);
                    await release.Task;
                };
                using (var w = await InboxWorker.ConnectAsync(url, Options("partial", 10, 2)))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync(handler, cts.Token);
                    await Db.WaitForAsync("two handlers running", () => run.IsFaulted || Volatile.Read(ref running) == 2);
                    Assert.Equal("10", Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processing'"), "the whole claim of 10");
                    cts.Cancel();
                    await Db.WaitForAsync("the 8 unstarted rows released",
                        () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'pending' AND attempt = 0") == "8");
                    release.TrySetResult(true);
                    await run;
                    InboxStats s = w.GetStats();
                    Assert.Equal(2UL, s.Completed, "completed");
                    Assert.Equal(8UL, s.Released, "released");
                }
                Assert.Equal("2 8", Db.Psql(url, "SELECT count(*) FILTER (WHERE state = 'processed') || ' ' || count(*) FILTER (WHERE state = 'pending') FROM inbox"),
                    "processed/pending after shutdown");
                using (var w2 = await InboxWorker.ConnectAsync(url, Options("partial", 10, 2)))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w2.RunAsync(handler, cts.Token);
                    await Db.WaitForAsync("the released rows processed",
                        () => run.IsFaulted || Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "10");
                    cts.Cancel();
                    await run;
                }
                Assert.Equal(10, seen.Count, "distinct rows handled");
                foreach (var kv in seen) Assert.Equal(1, kv.Value, kv.Key + " handled once");
            }
            finally { Db.Drop(url); }
        }
    }
}
