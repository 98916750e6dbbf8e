using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    public static class InboxTests
    {
        private static InboxOptions Quick(string source)
        {
            return new InboxOptions
            {
                Source = source, BatchSize = 10, MaxConcurrency = 4,
                PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(2),
            };
        }

        /// <summary>Runs the worker until the condition holds, then cancels and awaits RunAsync.</summary>
        private static async Task RunUntil(InboxWorker w, InboxHandler handler, string what, Func<bool> condition)
        {
            using (var cts = new CancellationTokenSource())
            {
                Task run = w.RunAsync(handler, cts.Token);
                await Db.WaitForAsync(what, () => run.IsFaulted || condition());
                cts.Cancel();
                if (await Task.WhenAny(run, Task.Delay(10000)) != run) throw new AssertionException("RunAsync did not finish after cancellation");
                await run;
            }
        }

        internal static string FindVectors()
        {
            string env = Environment.GetEnvironmentVariable("QUEUEBOX_VECTORS_DIR");
            if (!string.IsNullOrEmpty(env)) return env;
            var dir = new DirectoryInfo(AppDomain.CurrentDomain.BaseDirectory);
            for (; dir != null; dir = dir.Parent)
            {
                string candidate = Path.Combine(dir.FullName, "proto-docs", "vectors");
                if (Directory.Exists(candidate)) return candidate;
            }
            throw new AssertionException("proto-docs/vectors not found (set QUEUEBOX_VECTORS_DIR)");
        }

        [Test]
        public static Task ConformanceVectorsMatchThroughTheNativeLibrary()
        {
            int total = 0;
            var mismatches = new List<string>();
            foreach (string file in Directory.GetFiles(FindVectors(), "*.json").OrderBy(f => f))
            {
                var doc = (IDictionary<string, object>)Json.Parse(File.ReadAllText(file));
                string kind = (string)doc["kind"];
                // Needs a database; the Rust store tests run it (core/tests/pull_worker.rs).
                if (kind == "transitions") continue;
                var cases = (List<object>)doc["cases"];
                Assert.True(cases.Count > 0, file + " has no cases");
                foreach (IDictionary<string, object> c in cases)
                {
                    total++;
                    try
                    {
                        string got = QueueBoxLibrary.EvaluateVector(kind, Json.Serialize(c["input"]));
                        if (!Json.DeepEquals(Json.Parse(got), c["expected"]))
                            mismatches.Add(kind + "/" + c["name"] + ": expected " + Json.Serialize(c["expected"]) + ", got " + got);
                    }
                    catch (QueueBoxException e)
                    {
                        mismatches.Add(kind + "/" + c["name"] + ": " + e.Message);
                    }
                }
            }
            Assert.True(total >= 40, "only " + total + " vector cases ran");
            Assert.True(mismatches.Count == 0, mismatches.Count + " mismatches:\n  " + string.Join("\n  ", mismatches.Take(5)));
            return Task.FromResult(0);
        }

        [Test]
        public static async Task InvalidOptionsNameTheField()
        {
            string url = await Db.CreateAsync();
            try
            {
                var cases = new Dictionary<string, InboxOptions>
                {
                    { "source", new InboxOptions() },
                    { "batchSize", new InboxOptions { Source = "s", BatchSize = 0 } },
                    { "leaseMs", new InboxOptions { Source = "s", LeaseMs = 100 } },
                    { "retry.jitter", new InboxOptions { Source = "s", RetryPolicy = new InboxRetryPolicy { Jitter = 3 } } },
                };
                foreach (var kv in cases)
                {
                    var e = await Assert.ThrowsAsync<QueueBoxConfigException>(() => InboxWorker.ConnectAsync(url, kv.Value), kv.Key);
                    Assert.Equal(kv.Key, e.Field, "field");
                    Assert.Equal(QueueBoxErrorKind.Config, e.Kind, "kind");
                }
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task UnmigratedDatabaseAndUnreachableServerAreTyped()
        {
            var e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxWorker.ConnectAsync(Db.Server + "/postgres", new InboxOptions { Source = "s" }), "unmigrated");
            Assert.Equal(QueueBoxErrorKind.SchemaMissing, e.Kind, "kind");
            e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxWorker.ConnectAsync("postgres://postgres:hunter2@127.0.0.1:1/x", new InboxOptions { Source = "s" }), "unreachable");
            Assert.Equal(QueueBoxErrorKind.Connect, e.Kind, "kind");
            Assert.True(!e.Message.Contains("hunter2"), "password in the message: " + e.Message);
        }

        [Test]
        public static async Task EveryRowIsHandledOnceAndProcessed()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "orders", 60);
                var calls = new ConcurrentDictionary<string, int>();
                bool fieldsMatch = true;
                using (var w = await InboxWorker.ConnectAsync(url, Quick("orders")))
                {
                    await RunUntil(w, (m, tx, ct) =>
                    {
                        var p = (IDictionary<string, object>)m.Payload;
                        if ("k" + p["n"] != m.IdempotencyKey || m.Source != "orders" || m.Attempt != 0 || m.Id == Guid.Empty || m.Headers == null) fieldsMatch = false;
                        calls.AddOrUpdate(m.IdempotencyKey, 1, (k, n) => n + 1);
                        return Task.FromResult(0);
                    }, "60 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "60");
                    InboxStats s = w.GetStats();
                    Assert.Equal(60UL, s.Completed, "completed");
                    Assert.Equal(0UL, s.InFlight, "in flight");
                }
                Assert.Equal(60, calls.Count, "distinct rows handled");
                Assert.True(calls.Values.All(n => n == 1), "a row was handled twice");
                Assert.True(fieldsMatch, "message fields did not match the inserted rows");
            }
            finally { Db.Drop(url); }
        }

        /// <summary>PayloadJson is the stored payload exactly: a u64 beyond long and a decimal
        /// beyond double reach the handler unchanged (the chaos ledger's C# path found it was a
        /// re-serialisation of the parsed object, which turned 18446744073709551615 into
        /// 18446744073709552e3).</summary>
        [Test]
        public static async Task PayloadJsonIsTheStoredPayloadExactly()
        {
            string url = await Db.CreateAsync();
            try
            {
                // Keys in the order the core writes them (sorted), so the text compares whole.
                const string payload = "{\"big\":18446744073709551615,\"dec\":0.12345678901234567890123,\"l\":[1,{\"x\":null}],\"s\":\"a\\\"b\\u0001\"}";
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('exact', 'e1', '" + payload + "', 'pull')");
                string seen = null;
                using (var w = await InboxWorker.ConnectAsync(url, Quick("exact")))
                {
                    await RunUntil(w, (m, tx, ct) =>
                    {
                        seen = m.PayloadJson;
                        return Task.FromResult(0);
                    }, "the row processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "1");
                }
                Assert.Equal(payload, seen, "PayloadJson");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task HandlerExceptionRetriesWithBackoffThenDeadAtMaxAttempts()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "flaky", 1);
                var opts = Quick("flaky");
                opts.RetryPolicy = new InboxRetryPolicy { MaxAttempts = 2, BaseDelay = TimeSpan.FromMilliseconds(150), MaxDelay = TimeSpan.FromSeconds(1), Jitter = 0 };
                var seen = new List<KeyValuePair<int, long>>();
                var clock = Stopwatch.StartNew();
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await RunUntil(w, (m, tx, ct) =>
                    {
                        lock (seen) seen.Add(new KeyValuePair<int, long>(m.Attempt, clock.ElapsedMilliseconds));
                        throw new InvalidOperationException("downstream unavailable");
                    }, "the row to be dead", () => Db.Psql(url, "SELECT state FROM inbox") == "dead");
                }
                Assert.Equal("2 downstream unavailable", Db.Psql(url, "SELECT attempt || ' ' || last_error FROM inbox"), "dead row");
                Assert.Equal("0,1,2", string.Join(",", seen.Select(s => s.Key)), "attempts per delivery");
                Assert.True(seen[1].Value - seen[0].Value >= 140, "first retry after " + (seen[1].Value - seen[0].Value) + " ms, want >= 150");
                Assert.True(seen[2].Value - seen[1].Value >= 290, "second retry after " + (seen[2].Value - seen[1].Value) + " ms, want >= 300");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task RetryLaterAndDeadLetterFromTheHandler()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "decide", 2);
                using (var w = await InboxWorker.ConnectAsync(url, Quick("decide")))
                {
                    await RunUntil(w, (m, tx, ct) =>
                    {
                        if (m.IdempotencyKey == "k1") throw new RetryLaterException(TimeSpan.FromHours(1), "not yet");
                        throw new DeadLetterException("poison message");
                    }, "both rows decided", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state <> 'processing' AND attempt + (state = 'dead')::int > 0") == "2");
                }
                Assert.Equal("k1:pending:1:not yet:true,k2:dead:0:poison message:false",
                    Db.Psql(url, "SELECT string_agg(idempotency_key || ':' || state || ':' || attempt || ':' || last_error || ':' || (scheduled_at > now() + interval '50 minutes'), ',' ORDER BY idempotency_key) FROM inbox"),
                    "rows");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task FailingHandlerLeavesNoBusinessRow()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text PRIMARY KEY)");
                Db.InsertRows(url, "ship", 1);
                string seenInTx = null;
                using (var w = await InboxWorker.ConnectAsync(url, Quick("ship")))
                {
                    await RunUntil(w, async (m, tx, ct) =>
                    {
                        await tx.ExecuteAsync("INSERT INTO shipments (key) VALUES ($1)", m.IdempotencyKey);
                        var rows = await tx.QueryAsync("SELECT count(*) AS n FROM shipments");
                        seenInTx = Convert.ToString(rows[0]["n"]);
                        throw new Exception("failed after the write");
                    }, "the failure recorded", () => Db.Psql(url, "SELECT attempt FROM inbox") == "1");
                }
                Assert.Equal("1", seenInTx, "own write visible inside the transaction");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM shipments"), "business rows after a failed handler");
                Assert.Equal("pending failed after the write", Db.Psql(url, "SELECT state || ' ' || last_error FROM inbox"), "row");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task SucceedingHandlerCommitsBusinessRowWithCompletion()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE shipments (key text PRIMARY KEY, n bigint, meta jsonb)");
                Db.InsertRows(url, "ship", 3);
                using (var w = await InboxWorker.ConnectAsync(url, Quick("ship")))
                {
                    await RunUntil(w, async (m, tx, ct) =>
                    {
                        var p = (IDictionary<string, object>)m.Payload;
                        ulong n = await tx.ExecuteAsync("INSERT INTO shipments (key, n, meta) VALUES ($1, $2, $3)",
                            m.IdempotencyKey, p["n"], new Dictionary<string, object> { { "id", m.Id.ToString() } });
                        if (n != 1) throw new Exception("rows affected " + n);
                    }, "3 rows processed", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "3");
                }
                Assert.Equal("k1:1:true,k2:2:true,k3:3:true",
                    Db.Psql(url, "SELECT string_agg(s.key || ':' || s.n || ':' || (s.meta->>'id' = i.id::text), ',' ORDER BY s.key) FROM shipments s JOIN inbox i ON i.idempotency_key = s.key"),
                    "business rows");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task CancellingTheTokenStopsTheWorkerAndInFlightRowsAreNotCompleted()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE effects (key text)");
                Db.InsertRows(url, "slow", 3);
                var opts = Quick("slow");
                opts.BatchSize = 3;
                opts.MaxConcurrency = 1;
                opts.ShutdownGrace = TimeSpan.FromMilliseconds(300);
                var started = new SemaphoreSlim(0);
                int startedCount = 0;
                bool handlerTokenCancelled = false;
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync(async (m, tx, ct) =>
                    {
                        await tx.ExecuteAsync("INSERT INTO effects VALUES ($1)", m.IdempotencyKey);
                        Interlocked.Increment(ref startedCount);
                        started.Release();
                        try { await Task.Delay(20000, ct); }
                        catch (OperationCanceledException) { handlerTokenCancelled = true; }
                        // Returns normally (asks to complete); a cancelled row is abandoned anyway.
                    }, cts.Token);
                    Assert.True(await started.WaitAsync(10000), "handler never started");
                    cts.Cancel();
                    if (await Task.WhenAny(run, Task.Delay(10000)) != run) throw new AssertionException("RunAsync did not finish after the grace");
                    await run;
                }
                Assert.True(handlerTokenCancelled, "the handler's token was not cancelled after the grace");
                Assert.Equal(1, startedCount, "handlers started");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM inbox WHERE state = 'processed'"), "rows completed after cancellation");
                Assert.Equal("processing,pending,pending", Db.Psql(url, "SELECT string_agg(state, ',' ORDER BY idempotency_key) FROM inbox"), "states");
                Assert.Equal("0", Db.Psql(url, "SELECT count(*) FROM effects"), "abandoned handler's writes");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task LostLeaseCancelsTheHandlerAndNothingIsWritten()
        {
            string url = await Db.CreateAsync();
            try
            {
                Db.InsertRows(url, "lease", 1);
                var opts = Quick("lease");
                opts.LeaseMs = 600;
                bool cancelled = false;
                using (var w = await InboxWorker.ConnectAsync(url, opts))
                {
                    await RunUntil(w, async (m, tx, ct) =>
                    {
                        Db.Psql(url, "UPDATE inbox SET claim_token = gen_random_uuid()");
                        try { await Task.Delay(10000, ct); }
                        catch (OperationCanceledException) { cancelled = true; }
                    }, "the lease loss", () => cancelled && w.GetStats().InFlight == 0);
                    InboxStats s = w.GetStats();
                    Assert.Equal(1UL, s.ClaimsLost, "claims lost");
                    Assert.Equal(0UL, s.Completed, "completed");
                }
                Assert.Equal("processing 0", Db.Psql(url, "SELECT state || ' ' || attempt FROM inbox"), "row after a lost lease");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static Task UnknownVectorKindIsInvalidInput()
        {
            try
            {
                QueueBoxLibrary.EvaluateVector("no_such_kind", "{}");
            }
            catch (QueueBoxException e)
            {
                Assert.Equal(QueueBoxErrorKind.InvalidInput, e.Kind, "kind");
                Assert.True(e.Message.Contains("no_such_kind"), e.Message);
                return Task.FromResult(0);
            }
            throw new AssertionException("no exception");
        }
    }
}
