using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>CancellationToken on the calls that wait on the network before a worker
    /// exists: a server that accepts and never answers holds ConnectAsync and
    /// MigrateAsync until the token fires.</summary>
    public static class CancellationTests
    {
        /// <summary>A TCP server on 127.0.0.1 that accepts connections and never writes.</summary>
        private sealed class SilentServer : IDisposable
        {
            private readonly TcpListener _listener = new TcpListener(IPAddress.Loopback, 0);
            private readonly List<TcpClient> _held = new List<TcpClient>();

            internal SilentServer()
            {
                _listener.Start();
                Task.Run(async () =>
                {
                    try
                    {
                        while (true)
                        {
                            TcpClient c = await _listener.AcceptTcpClientAsync();
                            lock (_held) _held.Add(c);
                        }
                    }
                    catch (Exception) { } // stopped
                });
            }

            internal string Url { get { return "postgres://postgres@127.0.0.1:" + ((IPEndPoint)_listener.LocalEndpoint).Port + "/silent"; } }

            public void Dispose()
            {
                _listener.Stop();
                lock (_held) foreach (TcpClient c in _held) c.Close();
            }
        }

        private static async Task ReturnsOnCancel(string what, Func<CancellationToken, Task> call)
        {
            using (var cts = new CancellationTokenSource())
            {
                var sw = Stopwatch.StartNew();
                Task t = call(cts.Token);
                await Task.Delay(300);
                Assert.True(!t.IsCompleted, what + " finished before the cancel: " + t.Status + " " + (t.Exception != null ? t.Exception.InnerException.Message : ""));
                cts.Cancel();
                Task first = await Task.WhenAny(t, Task.Delay(2000));
                Assert.True(first == t, what + " still waiting 2 s after the cancel");
                try
                {
                    await t;
                    throw new AssertionException(what + " returned without an error");
                }
                catch (OperationCanceledException) { }
                Console.WriteLine("  " + what + " returned " + (sw.ElapsedMilliseconds - 300) + " ms after the cancel");
            }
        }

        [Test]
        public static async Task ConnectAndMigrateReturnWhenCancelled()
        {
            using (var server = new SilentServer())
            {
                await ReturnsOnCancel("ConnectAsync", ct => InboxWorker.ConnectAsync(server.Url, ContractTests.Quick("s"), ct));
                await ReturnsOnCancel("MigrateAsync", ct => QueueBoxLibrary.MigrateAsync(server.Url, ct));
            }
            // Closing the held sockets ends the abandoned native calls; their runtimes are freed
            // by the continuations (a crash here would end the runner).
            await Task.Delay(500);
        }
    }
}
