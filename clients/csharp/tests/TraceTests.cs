using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Issue 19: a handler gets the row's W3C trace context as
    /// InboxMessage.Traceparent / Tracestate (the row's own while tracing is off), to continue
    /// the trace in its own OpenTelemetry SDK.</summary>
    public static class TraceTests
    {
        const string Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

        [Test]
        public static async Task TheHandlerGetsTheRowsTraceContext()
        {
            if (!string.IsNullOrEmpty(Environment.GetEnvironmentVariable("OTEL_EXPORTER_OTLP_ENDPOINT")))
            {
                Console.WriteLine("not run: OTEL_EXPORTER_OTLP_ENDPOINT is set for this process");
                return;
            }
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent, tracestate) VALUES " +
                    "('traced', 't1', '{}', 'pull', '" + Traceparent + "', 'congo=t61rcWkgMzE'), ('traced', 't2', '{}', 'pull', NULL, NULL)");
                var seen = new ConcurrentDictionary<string, Tuple<string, string>>();
                var options = new InboxOptions { Source = "traced", PollInterval = TimeSpan.FromMilliseconds(50) };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) =>
                    {
                        seen[m.IdempotencyKey] = Tuple.Create(m.Traceparent, m.Tracestate);
                        return Task.FromResult(0);
                    }, cts.Token);
                    await Db.WaitForAsync("2 rows handled", () => run.IsFaulted || seen.Count == 2);
                    cts.Cancel();
                    await run;
                }
                Assert.Equal(Tuple.Create(Traceparent, "congo=t61rcWkgMzE"), seen["t1"], "t1's context");
                Assert.Equal(Tuple.Create<string, string>(null, null), seen["t2"], "t2 has none");
            }
            finally { Db.Drop(url); }
        }
    }
}
