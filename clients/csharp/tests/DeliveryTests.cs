using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Data.Common;
using System.Data.Odbc;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Publish → delivery end to end: rows published in the application's ODBC
    /// transaction are sent by the real `queuebox` relay binary to a real HTTP receiver
    /// (HttpListener), with X-Message-Id equal to the id PublishAsync returned; a rolled-back
    /// publish is never delivered.</summary>
    public static class DeliveryTests
    {
        private sealed class Delivery
        {
            public string MessageId, Key, Topic, Body;
        }

        private static int FreePort()
        {
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            int port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            return port;
        }

        private static string RelayBinary()
        {
            string bin = Environment.GetEnvironmentVariable("QUEUEBOX_BIN");
            if (string.IsNullOrEmpty(bin) || !File.Exists(bin))
                throw new AssertionException("NOT RUN: the queuebox binary is not built (QUEUEBOX_BIN=" + bin + "; 32-csharp.sh builds it)");
            return bin;
        }

        [Test]
        public static async Task CommittedPublishIsDeliveredWithItsIdAndARolledBackOneNever()
        {
            string bin = RelayBinary();
            string url = await Db.CreateAsync();
            int rxPort = FreePort(), relayPort = FreePort();
            var got = new ConcurrentQueue<Delivery>();
            var listener = new HttpListener();
            listener.Prefixes.Add("http://127.0.0.1:" + rxPort + "/");
            listener.Start();
            // A plain thread, not the thread pool: mono's pool grows slowly, and the test
            // runner's own waits live there.
            var receiving = new System.Threading.Thread(() =>
            {
                while (true)
                {
                    HttpListenerContext ctx;
                    try { ctx = listener.GetContext(); }
                    catch (Exception) { return; }
                    string body;
                    using (var reader = new StreamReader(ctx.Request.InputStream)) body = reader.ReadToEnd();
                    got.Enqueue(new Delivery
                    {
                        MessageId = ctx.Request.Headers["X-Message-Id"], Key = ctx.Request.Headers["X-Message-Key"],
                        Topic = ctx.Request.Headers["X-Topic"], Body = body,
                    });
                    ctx.Response.StatusCode = 200;
                    ctx.Response.Close();
                }
            }) { IsBackground = true };
            receiving.Start();
            string config = Path.GetTempFileName();
            File.WriteAllText(config,
                "server:\n  httpPort: " + relayPort + "\n  bindAddress: 127.0.0.1\n  drainTimeoutMs: 2000\n" +
                "database:\n  url: " + url + "\n  startupTimeoutMs: 60000\n" +
                "outbox:\n  pollIntervalMs: 20\n  retryBaseDelayMs: 50\n  claimTimeoutMs: 5000\n  maxAttempts: 2\n  shutdownTimeoutMs: 3000\n" +
                "destinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:" + rxPort + "\n    path: /hooks\n    timeoutMs: 3000\n" +
                "routes:\n  - topicPattern: '**'\n    destination: rx\n");
            // The relay's log goes to a file (read on failure): redirected pipes would need
            // readers on mono's thread pool.
            string log = Path.GetTempFileName();
            var psi = new ProcessStartInfo("/bin/sh", "-c 'exec \"$0\" --config \"$1\" run >\"$2\" 2>&1' " + bin + " " + config + " " + log)
            {
                UseShellExecute = false,
            };
            foreach (string k in new List<string>(EnvironmentKeys()))
                if (k.StartsWith("QUEUEBOX_", StringComparison.Ordinal)) psi.EnvironmentVariables.Remove(k);
            psi.EnvironmentVariables["RUST_LOG"] = "warn";
            Process relay = Process.Start(psi);
            try
            {
                Guid rolledBack, committed;
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                {
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        rolledBack = await Outbox.PublishAsync(tx, "orders.rolled-back", new Dictionary<string, object> { { "n", 1L } });
                        tx.Rollback();
                    }
                    using (DbTransaction tx = conn.BeginTransaction())
                    {
                        committed = await Outbox.PublishAsync(tx, "orders.created", new Dictionary<string, object> { { "n", 2L } }, new PublishOptions { Key = "c-7" });
                        tx.Commit();
                    }
                }
                var clock = Stopwatch.StartNew();
                await Db.WaitForAsync("the committed row delivered", () => relay.HasExited || !got.IsEmpty, 30000);
                Assert.True(!relay.HasExited, "the relay exited: " + File.ReadAllText(log));
                Console.WriteLine("  delivered " + clock.ElapsedMilliseconds + " ms after the commit (relay poll interval 20 ms)");
                // A rolled-back row would be due as early as the committed one: give it time to show up.
                await Db.WaitForAsync("the sent mark", () => Db.Psql(url, "SELECT state FROM outbox WHERE id = '" + committed + "'") == "sent");
                await Task.Delay(500);
                var all = got.ToArray();
                Assert.Equal(1, all.Length, "deliveries (the rolled-back publish " + rolledBack + " must never be sent)");
                Assert.Equal(committed.ToString(), all[0].MessageId, "X-Message-Id");
                Assert.Equal("c-7 orders.created", all[0].Key + " " + all[0].Topic, "X-Message-Key, X-Topic");
                Assert.True(Json.DeepEquals(Json.Parse(all[0].Body), Json.Parse("{\"n\": 2}")), "body " + all[0].Body);
            }
            finally
            {
                if (!relay.HasExited) relay.Kill();
                relay.WaitForExit(5000);
                listener.Close();
                receiving.Join(5000);
                File.Delete(log);
                File.Delete(config);
                Db.Drop(url);
            }
        }

        private static IEnumerable<string> EnvironmentKeys()
        {
            foreach (System.Collections.DictionaryEntry e in Environment.GetEnvironmentVariables()) yield return (string)e.Key;
        }
    }
}
