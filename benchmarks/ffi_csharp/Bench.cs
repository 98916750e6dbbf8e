// The C# side of benchmarks/ffi_bench.sh: InboxWorker.RunAsync with a no-op handler over
// `rows` pull rows of `source`, timed from start until every row is processed.
// Usage: mono Bench.exe <database url> <source> <rows> <batch> <concurrency>
// (batch 0: unset, the core's adaptive batch).
using System;
using System.Diagnostics;
using System.Globalization;
using System.Threading;
using System.Threading.Tasks;
using QueueBox.Inbox;

public static class Bench
{
    public static int Main(string[] a)
    {
        ulong rows = ulong.Parse(a[2]);
        var opts = new InboxOptions
        {
            Source = a[1], BatchSize = int.Parse(a[3]) == 0 ? (int?)null : int.Parse(a[3]), MaxConcurrency = int.Parse(a[4]),
            PollInterval = TimeSpan.FromMilliseconds(50),
        };
        using (var w = InboxWorker.ConnectAsync(a[0], opts).GetAwaiter().GetResult())
        using (var cts = new CancellationTokenSource())
        {
            var sw = Stopwatch.StartNew();
            Task run = w.RunAsync((m, tx, ct) => Task.FromResult(0), cts.Token);
            while (w.GetStats().Completed < rows) Thread.Sleep(5);
            cts.Cancel();
            run.GetAwaiter().GetResult();
            double secs = sw.Elapsed.TotalSeconds;
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "rows_per_sec={0:F1} seconds={1:F3}", rows / secs, secs));
        }
        return 0;
    }
}
