using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>The client contract (proto-docs/client-contract.md, 19 items) that InboxTests does
    /// not already cover, on the wrapper-owned transaction; each test names its item. Items
    /// 2, 3, 7, 9, 10, 12 and 15 are in InboxTests; the application-owned transaction versions
    /// of 2, 3 and 4 are in AppTxTests; 14 (the README example builds and runs) is
    /// ReadmeTests; 13 (mapped table/column names) is NamesTests. 19 (SQL Server Msg 51000)
    /// needs a SQL Server, which this suite has not.</summary>
    public static class ContractTests
    {
        internal static InboxOptions Quick(string source)
        {
            return new InboxOptions
            {
                Source = source, BatchSize = 10, MaxConcurrency = 4,
                PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(2),
            };
        }

        /// <summary>Runs the worker until the condition holds, then cancels and awaits the run.</summary>
        internal static async Task RunUntil(Func<CancellationToken, Task> run, string what, Func<bool> condition, int timeoutMs = 20000)
        {
            using (var cts = new CancellationTokenSource())
            {
                Task t = run(cts.Token);
                await Db.WaitForAsync(what, () => t.IsFaulted || condition(), timeoutMs);
                cts.Cancel();
                if (await Task.WhenAny(t, Task.Delay(10000)) != t) throw new AssertionException("the worker did not finish after cancellation");
                await t;
            }
        }

        // Item 1: the handler gets every field of the row, and never the claim token.
        [Test]
        public static async Task Item01HandlerGetsEveryFieldButNotTheClaimToken()
        {
            string url = await Db.CreateAsync();
            try
            {
                string id = Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, correlation_id, consumption) " +
                                         "VALUES ('fields', 'order-1', 'cust-7', 'order.created', '{\"total\": 12.5, \"items\": [1, 2]}', '{\"x-tenant\": \"acme\"}', 'corr-1', 'pull') RETURNING id");
                InboxMessage got = null;
                string token = null;
                using (var w = await InboxWorker.ConnectAsync(url, Quick("fields")))
                {
                    await RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        token = Db.Psql(url, "SELECT claim_token FROM inbox");
                        got = m;
                        return Task.FromResult(0);
                    }, ct), "the row processed", () => Db.Psql(url, "SELECT state FROM inbox") == "processed");
                }
                var p = (IDictionary<string, object>)got.Payload;
                Assert.Equal(12.5, (double)p["total"], "payload.total");
                Assert.Equal("1,2", string.Join(",", (List<object>)p["items"]), "payload.items");
                Assert.Equal(id, got.Id.ToString(), "id");
                Assert.Equal("fields|order-1|cust-7|order.created|corr-1|0", string.Join("|", got.Source, got.IdempotencyKey, got.AggregateId, got.EventType, got.CorrelationId, got.Attempt), "fields");
                Assert.Equal("x-tenant=acme", string.Join(",", got.Headers.Select(kv => kv.Key + "=" + kv.Value)), "headers");
                string created = Db.Psql(url, "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') FROM inbox");
                Assert.Equal(created, got.CreatedAt.UtcDateTime.ToString("yyyy-MM-dd'T'HH:mm:ss.ffffff"), "createdAt");
                // The token held while the handler ran reaches it through no property.
                string all = got.PayloadJson + string.Join("", typeof(InboxMessage).GetProperties().Select(pr => Convert.ToString(pr.GetValue(got, null))));
                Assert.True(!string.IsNullOrEmpty(token) && !all.Contains(token), "the message carries the claim token " + token);
            }
            finally { Db.Drop(url); }
        }

        // Item 4 (wrapper-owned transaction): the claim is stolen before the completion runs;
        // the completion matches 0 rows, so the handler's write rolls back and nothing is marked.
        [Test]
        public static async Task Item04StolenClaimAtCompletionRollsTheWriteBack()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE seen (id uuid PRIMARY KEY)");
                Db.InsertRows(url, "stolen", 1);
                using (var w = await InboxWorker.ConnectAsync(url, Quick("stolen")))
                {
                    await RunUntil(ct => w.RunAsync(async (m, tx, t) =>
                    {
                        await tx.ExecuteAsync("INSERT INTO seen (id) VALUES ($1::uuid)", m.Id.ToString());
                        Db.Psql(url, "UPDATE inbox SET claim_token = gen_random_uuid()");
                    }, ct), "the lost claim", () => { var s = w.GetStats(); return s.ClaimsLost == 1 && s.InFlight == 0; });
                    Assert.Equal(0UL, w.GetStats().Completed, "completed (a stolen claim must not count)");
                }
                Assert.Equal("processing 0 -", Db.Psql(url, "SELECT state || ' ' || attempt || ' ' || coalesce(last_error, '-') FROM inbox"), "the stolen row is left to its new owner");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM seen"), "handler writes after a fenced-out completion");
            }
            finally { Db.Drop(url); }
        }

        // Item 5: two workers on one source never get the same message.
        [Test]
        public static async Task Item05TwoWorkersNeverGetTheSameMessage()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "shared", 200);
                var calls = new ConcurrentDictionary<Guid, int>();
                var perWorker = new int[2];
                using (var w0 = await InboxWorker.ConnectAsync(url, Quick("shared")))
                using (var w1 = await InboxWorker.ConnectAsync(url, Quick("shared")))
                {
                    Func<int, InboxHandler> handlerFor = i => async (m, tx, t) =>
                    {
                        calls.AddOrUpdate(m.Id, 1, (k, n) => n + 1);
                        Interlocked.Increment(ref perWorker[i]);
                        await Task.Delay(1);
                    };
                    await RunUntil(ct => Task.WhenAll(w0.RunAsync(handlerFor(0), ct), w1.RunAsync(handlerFor(1), ct)),
                        "200 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "200", 40000);
                }
                Assert.Equal(200, calls.Count, "distinct messages handled");
                Assert.True(calls.Values.All(n => n == 1), "a message was handled twice");
                Console.WriteLine("  deliveries per worker: " + perWorker[0] + ", " + perWorker[1]);
            }
            finally { Db.Drop(url); }
        }

        // Item 6: a handler running longer than the lease keeps ownership: the renewals hold
        // the row, a second worker polling the source never gets it, and it completes once.
        [Test]
        public static async Task Item06HandlerLongerThanTheLeaseKeepsOwnership()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "renew", 1);
                var opts = Quick("renew");
                opts.LeaseMs = 600;
                int deliveries = 0;
                InboxHandler slow = async (m, tx, t) =>
                {
                    Interlocked.Increment(ref deliveries);
                    await Task.Delay(2000, t); // more than three leases
                };
                using (var first = await InboxWorker.ConnectAsync(url, opts))
                using (var rival = await InboxWorker.ConnectAsync(url, opts))
                using (var cts = new CancellationTokenSource())
                {
                    Task a = first.RunAsync(slow, cts.Token);
                    await Db.WaitForAsync("the first delivery", () => Volatile.Read(ref deliveries) == 1);
                    Task b = rival.RunAsync(slow, cts.Token);
                    await Db.WaitForAsync("the row processed", () => a.IsFaulted || b.IsFaulted || Db.Psql(url, "SELECT state FROM inbox") == "processed");
                    cts.Cancel();
                    await Task.WhenAll(a, b);
                    InboxStats s = first.GetStats();
                    Assert.Equal(0UL, s.ClaimsLost, "claims lost by the renewing worker");
                    Assert.Equal(1UL, s.Completed, "completed by the renewing worker");
                }
                Assert.Equal(1, deliveries, "deliveries (the renewed row was claimed again)");
            }
            finally { Db.Drop(url); }
        }

        // Item 8: a message abandoned by a stopped worker (a handler outliving the shutdown
        // grace) is claimable by another worker once its lease expired, with no attempt spent.
        [Test]
        public static async Task Item08AbandonedMessageIsClaimableAfterTheLease()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "abandon", 1);
                var opts = Quick("abandon");
                opts.LeaseMs = 900;
                opts.ShutdownGrace = TimeSpan.FromMilliseconds(50);
                var claimed = new TaskCompletionSource<Stopwatch>();
                using (var w1 = await InboxWorker.ConnectAsync(url, opts))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w1.RunAsync(async (m, tx, t) =>
                    {
                        claimed.TrySetResult(Stopwatch.StartNew());
                        try { await Task.Delay(Timeout.Infinite, t); } catch (OperationCanceledException) { }
                    }, cts.Token);
                    await Task.WhenAny(claimed.Task, Task.Delay(10000));
                    Assert.True(claimed.Task.IsCompleted, "the first worker never claimed the row");
                    cts.Cancel();
                    await run;
                }
                Stopwatch sinceClaim = claimed.Task.Result;
                Assert.Equal("processing 0", Db.Psql(url, "SELECT state || ' ' || attempt FROM inbox"), "abandoned row");
                long reclaimedAfter = -1;
                int attempt = -1;
                using (var w2 = await InboxWorker.ConnectAsync(url, opts))
                {
                    await RunUntil(ct => w2.RunAsync((m, tx, t) =>
                    {
                        attempt = m.Attempt;
                        reclaimedAfter = sinceClaim.ElapsedMilliseconds;
                        return Task.FromResult(0);
                    }, ct), "the abandoned row processed by another worker", () => Db.Psql(url, "SELECT state FROM inbox") == "processed");
                }
                Assert.Equal(0, attempt, "attempt (an abandon must not spend one)");
                Assert.True(reclaimedAfter >= 800, "reclaimed " + reclaimedAfter + " ms after the first claim, before the lease (900 ms) expired");
            }
            finally { Db.Drop(url); }
        }

        // Item 11: stale tokens change nothing: after the claim was taken over, the worker's
        // complete, retry and dead statements all match 0 rows and leave the new owner's row.
        [Test]
        public static async Task Item11StaleTokensChangeNothing()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "stale", 3);
                using (var w = await InboxWorker.ConnectAsync(url, Quick("stale")))
                {
                    await RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        Db.Psql(url, "UPDATE inbox SET claim_token = '00000000-0000-0000-0000-00000000000" + m.IdempotencyKey.Substring(1) + "' WHERE id = '" + m.Id + "'");
                        if (m.IdempotencyKey == "k1") return Task.FromResult(0);
                        if (m.IdempotencyKey == "k2") throw new RetryLaterException(TimeSpan.FromMinutes(1), "retry with a stale token");
                        throw new DeadLetterException("dead with a stale token");
                    }, ct), "three lost claims", () => { var s = w.GetStats(); return s.ClaimsLost == 3 && s.InFlight == 0; });
                    InboxStats st = w.GetStats();
                    Assert.Equal("0 0 0", st.Completed + " " + st.Retried + " " + st.Dead, "completed/retried/dead (fenced-out outcomes must not count)");
                }
                Assert.Equal("k1:processing:0:-:00000000-0000-0000-0000-000000000001," +
                             "k2:processing:0:-:00000000-0000-0000-0000-000000000002," +
                             "k3:processing:0:-:00000000-0000-0000-0000-000000000003",
                    Db.Psql(url, "SELECT string_agg(idempotency_key || ':' || state || ':' || attempt || ':' || coalesce(last_error, '-') || ':' || claim_token, ',' ORDER BY idempotency_key) FROM inbox"),
                    "rows");
            }
            finally { Db.Drop(url); }
        }

        // Item 16: no polling storm on an empty table: an idle worker claims about once per
        // poll interval. Counted from pg_stat_database's committed transactions of the test
        // database, read after the worker closed its connections (a backend flushes its
        // counters on exit).
        [Test]
        public static async Task Item16NoPollingStormOnAnEmptyTable()
        {
            string url = await Db.CreateAsync();
            try
            {
                string name = url.Substring(url.LastIndexOf('/') + 1);
                Func<Task<long>> commits = async () =>
                {
                    await Task.Delay(300); // let exiting backends flush their counters
                    return long.Parse(Db.Psql(Db.Server + "/postgres", "SELECT pg_stat_force_next_flush(); SELECT xact_commit FROM pg_stat_database WHERE datname = '" + name + "'")
                        .Split('\n').Last());
                };
                long before = await commits();
                var opts = Quick("idle");
                opts.PollInterval = TimeSpan.FromMilliseconds(200);
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                using (var cts = new CancellationTokenSource(2000))
                {
                    await w.RunAsync((m, tx, t) => Task.FromResult(0), cts.Token);
                }
                long n = await commits() - before;
                // 2 s / 200 ms = 10 claims, plus the connection checks; a storm makes thousands.
                Console.WriteLine("  " + n + " transactions in 2 s with a 200 ms poll interval");
                Assert.True(n >= 5 && n <= 40, n + " transactions in 2 s: want about 10 (one claim per poll interval)");
            }
            finally { Db.Drop(url); }
        }

        // Item 17: never more than a batch in flight: with BatchSize 3 (and MaxConcurrency 8),
        // at most 3 handlers run at once and at most 3 rows are held in 'processing'.
        [Test]
        public static async Task Item17NeverMoreThanABatchInFlight()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "batch", 15);
                var opts = Quick("batch");
                opts.BatchSize = 3;
                opts.MaxConcurrency = 8;
                int running = 0, maxRunning = 0, maxHeld = 0;
                bool sampling = true;
                Task sampler = Task.Run(() =>
                {
                    while (Volatile.Read(ref sampling))
                    {
                        int held = int.Parse(Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processing'"));
                        Bump(ref maxHeld, held);
                    }
                });
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await RunUntil(ct => w.RunAsync(async (m, tx, t) =>
                    {
                        Bump(ref maxRunning, Interlocked.Increment(ref running));
                        await Task.Delay(60);
                        Interlocked.Decrement(ref running);
                    }, ct), "15 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "15");
                }
                Volatile.Write(ref sampling, false);
                await sampler;
                Assert.Equal(3, maxRunning, "handlers at once (want exactly the batch of 3)");
                Assert.True(maxHeld <= 3, maxHeld + " rows held in processing at once, more than the batch of 3");
            }
            finally { Db.Drop(url); }
        }

        private static void Bump(ref int max, int value)
        {
            int old;
            while (value > (old = Volatile.Read(ref max)) && Interlocked.CompareExchange(ref max, value, old) != old) { }
        }

        // Item 18: across two workers, at most one message per aggregate is in flight,
        // messages of one aggregate run in arrival order, and different aggregates overlap.
        [Test]
        public static async Task Item18OneMessagePerAggregateInFlightAcrossTwoWorkers()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption) " +
                             "SELECT 'agg', 'k' || g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, jsonb_build_object('n', g), 'pull' FROM generate_series(1, 12) g");
                var gate = new object();
                var inFlight = new Dictionary<string, int> { { "a", 0 }, { "b", 0 } };
                var order = new Dictionary<string, List<long>> { { "a", new List<long>() }, { "b", new List<long>() } };
                bool overlapped = false;
                string violation = null;
                InboxHandler handler = async (m, tx, t) =>
                {
                    string agg = m.AggregateId;
                    lock (gate)
                    {
                        if (++inFlight[agg] > 1) violation = "two messages of aggregate " + agg + " in flight";
                        if (inFlight["a"] > 0 && inFlight["b"] > 0) overlapped = true;
                        order[agg].Add((long)((IDictionary<string, object>)m.Payload)["n"]);
                    }
                    await Task.Delay(40);
                    lock (gate) inFlight[agg]--;
                };
                using (var w0 = await InboxWorker.ConnectAsync(url, Quick("agg")))
                using (var w1 = await InboxWorker.ConnectAsync(url, Quick("agg")))
                {
                    await RunUntil(ct => Task.WhenAll(w0.RunAsync(handler, ct), w1.RunAsync(handler, ct)),
                        "12 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "12", 30000);
                }
                Assert.True(violation == null, violation);
                Assert.True(overlapped, "aggregates a and b never ran at the same time");
                foreach (var kv in order)
                    Assert.True(kv.Value.SequenceEqual(kv.Value.OrderBy(n => n)), "aggregate " + kv.Key + " ran out of order: " + string.Join(",", kv.Value));
            }
            finally { Db.Drop(url); }
        }
    }
}
