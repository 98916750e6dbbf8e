using System;
using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>A handler gets the row's W3C trace context as
    /// InboxMessage.Traceparent / Tracestate (the row's own while tracing is off, the core's
    /// handle span's with InboxOptions.OtlpEndpoint), to continue the trace in its own
    /// OpenTelemetry SDK.</summary>
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

        [Test]
        public static async Task WithAnOtlpEndpointTheHandlerGetsTheHandleSpansContext()
        {
            int port = FreePort();
            int posts = 0;
            var collector = new HttpListener();
            collector.Prefixes.Add("http://127.0.0.1:" + port + "/");
            collector.Start();
            Task serve = Task.Run(async () =>
            {
                while (collector.IsListening)
                {
                    HttpListenerContext c;
                    try { c = await collector.GetContextAsync(); } catch (Exception) { return; }
                    if (c.Request.Url.AbsolutePath == "/v1/traces" && c.Request.ContentType == "application/x-protobuf")
                        Interlocked.Increment(ref posts);
                    c.Response.StatusCode = 200;
                    c.Response.Close();
                }
            });
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption, traceparent) VALUES " +
                    "('spanned', 't1', '{}', 'pull', '" + Traceparent + "')");
                string got = null;
                var options = new InboxOptions
                {
                    Source = "spanned",
                    PollInterval = TimeSpan.FromMilliseconds(50),
                    OtlpEndpoint = "http://127.0.0.1:" + port,
                };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) =>
                    {
                        Volatile.Write(ref got, m.Traceparent ?? "");
                        return Task.FromResult(0);
                    }, cts.Token);
                    await Db.WaitForAsync("the row is handled", () => run.IsFaulted || Volatile.Read(ref got) != null);
                    cts.Cancel();
                    await run;
                }
                string[] parts = got.Split('-');
                Assert.Equal(4, parts.Length, "traceparent " + got);
                Assert.Equal("4bf92f3577b34da6a3ce929d0e0e4736", parts[1], "the row's trace id");
                Assert.True(parts[2] != "00f067aa0ba902b7", "the handle span's id, not the row's own: " + got);
                // The worker's exporter sends the handle span when the worker is disposed.
                await Db.WaitForAsync("the handle span reaches the collector", () => Volatile.Read(ref posts) > 0);
            }
            finally
            {
                Db.Drop(url);
                collector.Stop();
                await serve;
            }
        }

        [Test]
        public static async Task AnOtlpEndpointWithoutASchemeIsRefusedByName()
        {
            string url = await Db.CreateAsync();
            try
            {
                var options = new InboxOptions { Source = "spanned", OtlpEndpoint = "collector:4318" };
                var e = await Assert.ThrowsAsync<QueueBoxConfigException>(() => InboxWorker.ConnectAsync(url, options), "a URL without a scheme");
                Assert.Equal("otlpEndpoint", e.Field, "the field named");
            }
            finally { Db.Drop(url); }
        }

        static int FreePort()
        {
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            int port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            return port;
        }
    }
}
