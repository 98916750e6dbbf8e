using System;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>The worker against a PostgreSQL that accepts TLS with a client certificate only
    /// (scripts/postgres-tls.sh; scripts/test.d/32-csharp.sh starts it and exports
    /// QUEUEBOX_TEST_TLS_DATABASE_URL: sslmode=verify-full, sslrootcert, sslcert, sslkey). The
    /// library hands the URL to the Rust core as it is: migration and the worker connect with
    /// the URL alone, PostgreSQL's pg_stat_ssl shows the worker's sessions encrypted with the
    /// client certificate, and a wrong CA or a missing client certificate is refused with the
    /// core's wording. psql (libpq, the same URL parameters) sets up and looks.</summary>
    public static class WorkerTlsTests
    {
        [Test]
        public static async Task WorkerConnectsToTlsOnlyPostgresWithTheUrlAlone()
        {
            string baseUrl = Environment.GetEnvironmentVariable("QUEUEBOX_TEST_TLS_DATABASE_URL");
            if (string.IsNullOrEmpty(baseUrl))
                throw new AssertionException("NOT RUN: QUEUEBOX_TEST_TLS_DATABASE_URL is not set (scripts/test.d/32-csharp.sh starts scripts/postgres-tls.sh and sets it)");
            string name = "qb_cs_tls_" + Guid.NewGuid().ToString("N").Substring(0, 10);
            string admin = baseUrl.Replace("/queuebox?", "/postgres?");
            string url = baseUrl.Replace("/queuebox?", "/" + name + "?");
            Db.Psql(admin, "CREATE DATABASE " + name);
            try
            {
                await QueueBoxLibrary.MigrateAsync(url);
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('tls_jobs', 'k1', '{\"n\": 1}', 'pull')");
                string sessions = null;
                var options = new InboxOptions { Source = "tls_jobs", PollInterval = TimeSpan.FromMilliseconds(50), ShutdownGrace = TimeSpan.FromSeconds(2) };
                using (var w = await InboxWorker.ConnectAsync(url, options))
                using (var cts = new CancellationTokenSource())
                {
                    Task run = w.RunAsync((m, tx, ct) =>
                    {
                        // The worker's own sessions, seen by the server while it holds this row.
                        sessions = Db.Psql(url, "SELECT string_agg(DISTINCT s.ssl || ' ' || s.version || ' ' || coalesce(s.client_dn, '-'), ', ') " +
                            "FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()");
                        return Task.FromResult(0);
                    }, cts.Token);
                    await Db.WaitForAsync("the row processed over TLS", () => run.IsFaulted || Db.Psql(url, "SELECT state FROM inbox WHERE source = 'tls_jobs'") == "processed");
                    cts.Cancel();
                    await run;
                }
                Assert.Equal("true TLSv1.3 /CN=postgres", sessions, "the worker's sessions in pg_stat_ssl");

                // The core read sslrootcert and sslcert/sslkey from this URL: change them and it refuses.
                var e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxWorker.ConnectAsync(url.Replace("/ca.crt", "/other-ca.crt"), options), "a wrong CA");
                Assert.Equal(QueueBoxErrorKind.Connect, e.Kind, "kind");
                Assert.True(e.Message.Contains("not signed by a CA QueueBox trusts"), "a wrong CA: " + e.Message);
                e = await Assert.ThrowsAsync<QueueBoxException>(() => InboxWorker.ConnectAsync(url.Substring(0, url.IndexOf("&sslcert=")), options), "no client certificate");
                Assert.Equal(QueueBoxErrorKind.Connect, e.Kind, "kind");
                Assert.True(e.Message.Contains("client certificate"), "no client certificate: " + e.Message);
            }
            finally
            {
                Db.Psql(admin, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
            }
        }
    }
}
