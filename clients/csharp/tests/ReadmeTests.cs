using System;
using System.Data.Common;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Contract item 14 (proto-docs/client-contract.md): the README's examples build against the library and run.
    /// scripts/test.d/32-csharp.sh compiles each ```csharp block of clients/csharp/README.md
    /// into this runner; they are found by name (so that the test project also builds
    /// without them) and run against the real PostgreSQL, with ODBC as the ADO.NET provider.</summary>
    public static class ReadmeTests
    {
        private static MethodInfo Example(string type, string method)
        {
            Type t = typeof(ReadmeTests).Assembly.GetType(type);
            if (t == null) throw new AssertionException("NOT RUN: the README example " + type + " is not compiled in (32-csharp.sh extracts the README's csharp blocks)");
            MethodInfo m = t.GetMethod(method, BindingFlags.Public | BindingFlags.Static);
            if (m == null) throw new AssertionException("the README example " + type + " has no " + method);
            return m;
        }

        /// <summary>The repository README's C# quick start (source `jobs`, table `jobs_done`)
        /// handles a job as written.</summary>
        [Test]
        public static async Task RepositoryReadmeQuickStartHandlesAJob()
        {
            MethodInfo quickStart = Example("QuickStartExample", "RunAsync");
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE jobs_done (id uuid PRIMARY KEY)");
                Db.InsertRows(url, "jobs", 1);
                await ContractTests.RunUntil(ct => (Task)quickStart.Invoke(null, new object[] { url, ct }),
                    "the README quick start processed the job", () => Db.Psql(url, "SELECT count(*) FROM jobs_done") == "1");
            }
            finally { Db.Drop(url); }
        }

        [Test]
        public static async Task Item14ReadmeExamplesBuildAndRun()
        {
            MethodInfo zeroSetup = Example("ZeroSetupExample", "RunAsync");
            MethodInfo consume = Example("ConsumeInYourTransactionExample", "RunAsync");
            MethodInfo publish = Example("PublishInYourTransactionExample", "PlaceOrderAsync");
            MethodInfo enqueue = Example("EnqueueInYourTransactionExample", "SignUpAsync");
            string url = await Db.CreateAsync();
            try
            {
                Db.Psql(url, "CREATE TABLE orders_seen (id uuid PRIMARY KEY, n bigint); CREATE TABLE payments_seen (inbox_id uuid PRIMARY KEY); CREATE TABLE orders (id text PRIMARY KEY)");
                Db.InsertRows(url, "orders", 2);
                Db.InsertRows(url, "payments", 2);

                await ContractTests.RunUntil(ct => (Task)zeroSetup.Invoke(null, new object[] { url, ct }),
                    "the zero-setup example processed its rows", () => Db.Psql(url, "SELECT count(*) FROM orders_seen") == "2");
                Assert.Equal("1,2", Db.Psql(url, "SELECT string_agg(n::text, ',' ORDER BY n) FROM orders_seen"), "typed payloads of the zero-setup example");
                Func<DbConnection> connect = () => new System.Data.Odbc.OdbcConnection(AppTxTests.OdbcConnectionString(url));
                await ContractTests.RunUntil(ct => (Task)consume.Invoke(null, new object[] { url, connect, ct }),
                    "the consume example processed its rows", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE source = 'payments' AND state = 'processed'") == "2");
                Assert.Equal("2", Db.Psql(url, "SELECT count(*) FROM payments_seen p JOIN inbox i ON i.id = p.inbox_id AND i.state = 'processed'"), "business rows of the consume example");

                Guid id;
                using (DbConnection db = AppTxTests.Odbc(url))
                    id = await (Task<Guid>)publish.Invoke(null, new object[] { db, "o-42" });
                Assert.Equal("o-42|orders.created|o-42|{\"orderId\": \"o-42\"}|{\"x-tenant\": \"acme\"}|pending",
                    Db.Psql(url, "SELECT o.id || '|' || x.topic || '|' || x.key || '|' || x.payload::text || '|' || x.headers::text || '|' || x.state FROM orders o, outbox x WHERE x.id = '" + id + "'"),
                    "the published order");

                Enqueued first, again;
                using (DbConnection db = AppTxTests.Odbc(url))
                {
                    first = await (Task<Enqueued>)enqueue.Invoke(null, new object[] { db, "u-7" });
                    again = await (Task<Enqueued>)enqueue.Invoke(null, new object[] { db, "u-7" });
                }
                Assert.True(!first.Duplicate && again.Duplicate && again.Id == first.Id, "the enqueue example twice: " + first + ", " + again);
                Assert.Equal("emails|welcome-u-7|10|{\"userId\": \"u-7\", \"template\": \"welcome\"}|pending",
                    Db.Psql(url, "SELECT source || '|' || idempotency_key || '|' || priority || '|' || payload::text || '|' || state FROM inbox WHERE id = '" + first.Id + "'"),
                    "the enqueued job");
            }
            finally { Db.Drop(url); }
        }
    }
}
