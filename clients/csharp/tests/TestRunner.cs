using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Marks a test: a public static method returning Task.</summary>
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class TestAttribute : Attribute { }

    public sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    public static class Assert
    {
        public static void True(bool condition, string message)
        {
            if (!condition) throw new AssertionException(message);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        public static async Task<TException> ThrowsAsync<TException>(Func<Task> action, string what) where TException : Exception
        {
            try
            {
                await action();
            }
            catch (TException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + ": expected " + typeof(TException).Name + ", got " + e.GetType().Name + ": " + e.Message);
            }
            throw new AssertionException(what + ": expected " + typeof(TException).Name + ", nothing was thrown");
        }
    }

    /// <summary>A self-contained runner (no NUnit: NuGet is not reachable here): prints each
    /// test with PASS or FAIL and a final "N passed, N failed" line; exit code 1 on a failure.</summary>
    public static class Program
    {
        public static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : null;
            var tests = typeof(Program).Assembly.GetTypes()
                .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.Static))
                .Where(m => m.GetCustomAttributes(typeof(TestAttribute), false).Length > 0)
                .Where(m => filter == null || m.Name.Contains(filter))
                .OrderBy(m => m.DeclaringType.Name).ThenBy(m => m.Name)
                .ToList();
            int passed = 0, failed = 0;
            foreach (MethodInfo m in tests)
            {
                var sw = Stopwatch.StartNew();
                try
                {
                    var task = (Task)m.Invoke(null, null);
                    if (!task.Wait(TimeSpan.FromSeconds(60))) throw new TimeoutException("test did not finish within 60 s");
                    passed++;
                    Console.WriteLine("PASS " + m.Name + " (" + sw.ElapsedMilliseconds + " ms)");
                }
                catch (Exception e)
                {
                    Exception inner = e;
                    while ((inner is TargetInvocationException || inner is AggregateException) && inner.InnerException != null) inner = inner.InnerException;
                    failed++;
                    Console.WriteLine("FAIL " + m.Name + ": " + inner.GetType().Name + ": " + inner.Message);
                    if (!(inner is AssertionException)) Console.WriteLine(inner.StackTrace);
                }
            }
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 && passed > 0 ? 0 : 1;
        }
    }

    /// <summary>Fresh databases and SQL through the psql client (never through the library under test).</summary>
    public static class Db
    {
        public static string Server
        {
            get
            {
                string url = Environment.GetEnvironmentVariable("QUEUEBOX_TEST_DATABASE_URL");
                if (string.IsNullOrEmpty(url)) throw new InvalidOperationException("QUEUEBOX_TEST_DATABASE_URL is not set");
                return url.Substring(0, url.LastIndexOf('/'));
            }
        }

        public static string Psql(string url, string sql)
        {
            string file = Path.GetTempFileName();
            File.WriteAllText(file, sql);
            try
            {
                var psi = new ProcessStartInfo("psql", "\"" + url + "\" -X -q -t -A -v ON_ERROR_STOP=1 -f " + file)
                {
                    UseShellExecute = false,
                    RedirectStandardOutput = true,
                    RedirectStandardError = true,
                };
                using (var p = Process.Start(psi))
                {
                    Task<string> err = p.StandardError.ReadToEndAsync();
                    string output = p.StandardOutput.ReadToEnd();
                    p.WaitForExit();
                    if (p.ExitCode != 0) throw new InvalidOperationException("psql failed on " + sql + ": " + err.Result);
                    return output.Trim();
                }
            }
            finally
            {
                File.Delete(file);
            }
        }

        private static readonly Random Rng = new Random();

        /// <summary>A new database, migrated through the library; dropped by Drop.</summary>
        public static async Task<string> CreateAsync()
        {
            string url = CreateEmpty();
            await QueueBoxLibrary.MigrateAsync(url);
            return url;
        }

        /// <summary>A new database with no tables; dropped by Drop.</summary>
        public static string CreateEmpty()
        {
            string name;
            lock (Rng) name = "qb_cs_" + Process.GetCurrentProcess().Id + "_" + Rng.Next(1000000);
            Psql(Server + "/postgres", "CREATE DATABASE " + name);
            return Server + "/" + name;
        }

        public static void Drop(string url)
        {
            string name = url.Substring(url.LastIndexOf('/') + 1);
            try { Psql(Server + "/postgres", "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); } catch { }
        }

        public static void InsertRows(string url, string source, int n)
        {
            Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) SELECT '" + source +
                      "', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, " + n + ") g");
        }

        public static async Task WaitForAsync(string what, Func<bool> condition, int timeoutMs = 20000)
        {
            var sw = Stopwatch.StartNew();
            while (!condition())
            {
                if (sw.ElapsedMilliseconds > timeoutMs) throw new AssertionException("timed out waiting for " + what);
                await Task.Delay(25);
            }
        }
    }
}
