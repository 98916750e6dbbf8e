using System;
using System.Collections.Generic;
using System.IO;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    /// <summary>Contract item 13 (proto-docs/client-contract.md): mapped table and column names. A worker
    /// given the names of a schema of its own (core/tests/fixtures/own_schema.sql: tables
    /// shop."order" and shop."user", reserved-word columns) claims and completes there, and a
    /// misspelt mapping key is refused naming it.</summary>
    public static class NamesTests
    {
        private static string Fixtures()
        {
            var dir = new DirectoryInfo(AppDomain.CurrentDomain.BaseDirectory);
            for (; dir != null; dir = dir.Parent)
            {
                string candidate = Path.Combine(dir.FullName, "core", "tests", "fixtures");
                if (File.Exists(Path.Combine(candidate, "own_schema.sql"))) return candidate;
            }
            string vectors = InboxTests.FindVectors(); // <repo>/proto-docs/vectors
            return Path.Combine(Path.GetDirectoryName(Path.GetDirectoryName(vectors)), "core", "tests", "fixtures");
        }

        /// <summary>The fixture's names (own_schema_names.json) as options.</summary>
        private static InboxOptions Named(string source)
        {
            var names = (IDictionary<string, object>)Json.Parse(File.ReadAllText(Path.Combine(Fixtures(), "own_schema_names.json")));
            var mapping = (IDictionary<string, object>)names["columnMapping"];
            Func<string, IDictionary<string, string>> columns = table =>
            {
                var d = new Dictionary<string, string>();
                foreach (var kv in (IDictionary<string, object>)mapping[table]) d[kv.Key] = (string)kv.Value;
                return d;
            };
            InboxOptions o = ContractTests.Quick(source);
            o.OutboxTableName = (string)names["outboxTableName"];
            o.InboxTableName = (string)names["inboxTableName"];
            o.ColumnMapping = new InboxColumnMapping { Outbox = columns("outbox"), Inbox = columns("inbox") };
            return o;
        }

        [Test]
        public static async Task Item13WorkerOnAnOwnSchemaWithReservedWordNames()
        {
            string url = Db.CreateEmpty();
            try
            {
                Db.Psql(url, File.ReadAllText(Path.Combine(Fixtures(), "own_schema.sql")));
                Db.Psql(url, "INSERT INTO shop.\"user\" (\"from\", \"key\", payload, consumption) VALUES ('named', 'n1', '{\"n\": 1}', 'pull'), ('named', 'n2', '{\"n\": 2}', 'pull')");
                var seen = new List<string>();
                using (var w = await InboxWorker.ConnectAsync(url, Named("named")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync((m, tx, t) =>
                    {
                        lock (seen) seen.Add(m.IdempotencyKey);
                        return Task.FromResult(0);
                    }, ct), "both rows processed in shop.user", () => Db.Psql(url, "SELECT count(*) FROM shop.\"user\" WHERE status = 'processed'") == "2");
                }
                seen.Sort();
                Assert.Equal("n1,n2", string.Join(",", seen), "handled");

                InboxOptions bad = Named("named");
                bad.ColumnMapping.Inbox = new Dictionary<string, string> { { "sourse", "from" } };
                var e = await Assert.ThrowsAsync<QueueBoxConfigException>(() => InboxWorker.ConnectAsync(url, bad), "a misspelt mapping key");
                Assert.True(e.Message.Contains("sourse"), "the error names the key: " + e.Message);
            }
            finally { Db.Drop(url); }
        }
    }
}
