// The chaos ledger's pull worker in C#, on QueueBox.Inbox (clients/csharp, P/Invoke over
// libqueuebox; built with mono by scripts/test.d/45-chaos.sh): the twin of tests/chaos/worker
// (Rust). One line per handler call on stdout — {"id", "key", "attempt"}, a tab, the payload
// exactly as the core handed it over (PayloadJson, compact) — then the row is completed.
// Stops gracefully on SIGTERM (Mono.Unix), the way a hosted service stops.
//
//   mono queuebox-chaos-worker-csharp.exe <database-url> <source> <lease-ms>
using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Mono.Unix;
using Mono.Unix.Native;
using QueueBox.Inbox;

public static class ChaosWorker
{
    public static int Main(string[] args)
    {
        if (args.Length != 3)
        {
            Console.Error.WriteLine("usage: queuebox-chaos-worker-csharp <database-url> <source> <lease-ms>");
            return 2;
        }
        int leaseMs;
        if (!int.TryParse(args[2], out leaseMs))
        {
            Console.Error.WriteLine("lease-ms: not a number: " + args[2]);
            return 2;
        }
        var stop = new CancellationTokenSource();
        var signals = new Thread(() =>
        {
            var term = new[] { new UnixSignal(Signum.SIGTERM), new UnixSignal(Signum.SIGINT) };
            UnixSignal.WaitAny(term);
            stop.Cancel();
        });
        signals.IsBackground = true;
        signals.Start();
        var stdout = new StreamWriter(Console.OpenStandardOutput()) { AutoFlush = true };
        var gate = new object();
        try
        {
            Run(args[0], args[1], leaseMs, stdout, gate, stop.Token).GetAwaiter().GetResult();
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("run: " + e);
            return 1;
        }
    }

    static async Task Run(string url, string source, int leaseMs, StreamWriter stdout, object gate, CancellationToken stop)
    {
        var options = new InboxOptions
        {
            Source = source,
            BatchSize = 20,
            MaxConcurrency = 4,
            LeaseMs = leaseMs,
            PollInterval = TimeSpan.FromMilliseconds(100),
            ShutdownGrace = TimeSpan.FromSeconds(2),
        };
        using (var worker = await InboxWorker.ConnectAsync(url, options))
        {
            await worker.RunAsync((message, tx, token) =>
            {
                string meta = "{\"id\":\"" + message.Id + "\",\"key\":" + JsonString(message.IdempotencyKey)
                    + ",\"attempt\":" + message.Attempt + "}";
                // One whole line per call, flushed: a line the harness reads is a call that happened.
                lock (gate)
                {
                    stdout.Write(meta + "\t" + message.PayloadJson + "\n");
                }
                return Task.FromResult(0);
            }, stop);
        }
    }

    static string JsonString(string s)
    {
        var b = new System.Text.StringBuilder("\"");
        foreach (char c in s)
        {
            if (c == '"' || c == '\\') b.Append('\\').Append(c);
            else if (c < 0x20) b.AppendFormat("\\u{0:x4}", (int)c);
            else b.Append(c);
        }
        return b.Append('"').ToString();
    }
}
