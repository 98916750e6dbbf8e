// clients/csharp's README quick start, compiled with mono against QueueBox.Inbox as
// `nuget install` unpacked it from the local feed dist/nuget (tests/install/csharp/run.sh):
//   mono quickstart.exe migrate URL   applies the schema
//   mono quickstart.exe work URL      handles one row of source "orders", then stops
using System;
using System.Threading;
using System.Threading.Tasks;
using QueueBox.Inbox;

public static class Quickstart
{
    public static int Main(string[] args)
    {
        return RunAsync(args[0], args[1]).GetAwaiter().GetResult();
    }

    static async Task<int> RunAsync(string mode, string databaseUrl)
    {
        if (mode == "migrate")
        {
            Console.WriteLine("migrated: " + await QueueBoxLibrary.MigrateAsync(databaseUrl));
            return 0;
        }
        var stop = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        int handled = 0;
        using (var worker = await InboxWorker.ConnectAsync(databaseUrl,
                   new InboxOptions { Source = "orders", BatchSize = 20, MaxConcurrency = 4 }))
        {
            await worker.RunAsync(async (message, tx, token) =>
            {
                // Commits together with the processed mark, or not at all.
                await tx.ExecuteAsync("INSERT INTO orders_seen (id, total) SELECT id, (payload->>'total')::numeric FROM inbox WHERE id = $1::uuid",
                    message.Id.ToString());
                Interlocked.Increment(ref handled);
                stop.CancelAfter(200); // one row is the whole test: then a graceful stop
            }, stop.Token);
        }
        if (handled != 1)
        {
            Console.Error.WriteLine("handled " + handled + " rows, expected 1");
            return 1;
        }
        return 0;
    }
}
