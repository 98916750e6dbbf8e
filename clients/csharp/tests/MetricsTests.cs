using System;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>A worker's metrics after it handled real rows: the native core counts and
    /// encodes them, GetMetricsText passes the Prometheus text on.</summary>
    public static class MetricsTests
    {
        [Test]
        public static async Task MetricsCountTheRowsTheHandlerCompleted()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "metered", 3);
                var options = new InboxOptions { Source = "metered", PollInterval = TimeSpan.FromMilliseconds(50) };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) => Task.FromResult(0), cts.Token);
                    await Db.WaitForAsync("3 rows processed", () => run.IsFaulted || Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "3");
                    cts.Cancel();
                    await run;
                    string text = w.GetMetricsText();
                    foreach (string line in new[]
                    {
                        "queuebox_worker_completed_total{source=\"metered\"} 3\n",
                        "queuebox_worker_claimed_total{source=\"metered\"} 3\n",
                        "queuebox_worker_handler_duration_seconds_count{source=\"metered\"} 3\n",
                        "# TYPE queuebox_worker_handler_duration_seconds histogram\n",
                    })
                    {
                        Assert.True(text.Contains(line), line + " in\n" + text);
                    }
                }
            }
            finally { Db.Drop(url); }
        }
    }
}
