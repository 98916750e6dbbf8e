using System;
using System.Collections.Generic;
using System.Data.Common;
using System.Data.Odbc;
using System.Linq;
using System.Threading.Tasks;

namespace QueueBox.Inbox.Tests
{
    public enum OrderKind { Retail, Wholesale }

    public sealed class OrderLine
    {
        public string Sku { get; set; }
        public int Qty { get; set; }
    }

    public sealed class PlacedOrder
    {
        public string OrderId { get; set; }
        public decimal Total { get; set; }
        public long BigId { get; set; }
        public ulong Counter { get; set; }
        public double Ratio { get; set; }
        public OrderKind Kind { get; set; }
        public Guid? Ref { get; set; }
        public DateTimeOffset At { get; set; }
        public List<OrderLine> Lines { get; set; }
        public Dictionary<string, int> Counts { get; set; }
        public object Extra { get; set; }
        public string Note;
    }

    /// <summary>Typed payloads: Json.Deserialize, InboxMessage&lt;T&gt; through
    /// the worker, and JsonText payloads written digit for digit.</summary>
    public static class TypedPayloadTests
    {
        // Digits that a double cannot hold: 2^53 + 1, ulong.MaxValue, a 19-digit decimal.
        internal const string OrderJson =
            "{\"orderId\": \"o-1\", \"total\": 12345678901234567.89, \"bigId\": 9007199254740993, \"counter\": 18446744073709551615, " +
            "\"ratio\": 0.25, \"kind\": \"wholesale\", \"ref\": \"6f1c7f5e-8d0b-4a5e-9a51-5d1f3c2b1a00\", \"at\": \"2031-05-06T07:08:09.123456+02:00\", " +
            "\"lines\": [{\"sku\": \"a\", \"qty\": 2}, {\"sku\": \"b\", \"qty\": 3}], \"counts\": {\"x\": 1}, " +
            "\"extra\": {\"big\": 1234567890123456789012345678901234, \"d\": 0.1000000000000000001}, \"note\": \"n\", \"unknown\": [1]}";

        internal static void CheckOrder(PlacedOrder o, string what)
        {
            Assert.Equal("o-1", o.OrderId, what + " orderId");
            Assert.Equal(12345678901234567.89m, o.Total, what + " total (decimal, every digit)");
            Assert.Equal(9007199254740993L, o.BigId, what + " bigId (2^53 + 1)");
            Assert.Equal(ulong.MaxValue, o.Counter, what + " counter");
            Assert.Equal(0.25, o.Ratio, what + " ratio");
            Assert.Equal(OrderKind.Wholesale, o.Kind, what + " kind");
            Assert.Equal(Guid.Parse("6f1c7f5e-8d0b-4a5e-9a51-5d1f3c2b1a00"), o.Ref.Value, what + " ref");
            Assert.Equal(new DateTimeOffset(2031, 5, 6, 5, 8, 9, TimeSpan.Zero).AddTicks(1234560), o.At, what + " at");
            Assert.Equal("a:2,b:3", string.Join(",", o.Lines.Select(l => l.Sku + ":" + l.Qty)), what + " lines");
            Assert.Equal(1, o.Counts["x"], what + " counts");
            var extra = (IDictionary<string, object>)o.Extra;
            Assert.Equal(typeof(double), extra["big"].GetType(), what + " extra.big beyond decimal is a double");
            Assert.Equal(0.1000000000000000001m, (decimal)extra["d"], what + " extra.d (decimal)");
            Assert.Equal("n", o.Note, what + " field");
        }

        [Test]
        public static Task DeserializeReadsEveryNumberExactlyAndNamesTheBadField()
        {
            CheckOrder(Json.Deserialize<PlacedOrder>(OrderJson), "Deserialize");
            Assert.Equal("1,2", string.Join(",", Json.Deserialize<long[]>("[1, 2]")), "array");
            Assert.Equal(null, Json.Deserialize<int?>("null"), "nullable");
            var cases = new Dictionary<string, string>
            {
                { "{\"lines\": [{\"qty\": 1}, {\"qty\": 1.5}]}", "$.lines[1].qty: 1.5 is not a Int32" },
                { "{\"bigId\": 9223372036854775808}", "$.bigId: 9223372036854775808 does not fit in a Int64" },
                { "{\"counter\": -1}", "$.counter: -1 is not a UInt64" },
                { "{\"total\": \"12\"}", "$.total: a string cannot be read as a Decimal" },
                { "{\"kind\": \"other\"}", "$.kind: \"other\" is not a OrderKind" },
                { "{\"ratio\": null}", "$.ratio: null cannot be read as a Double" },
                { "{\"lines\": {}}", "$.lines: an object cannot be read as a List`1" },
            };
            foreach (var c in cases)
            {
                try
                {
                    Json.Deserialize<PlacedOrder>(c.Key);
                    throw new AssertionException("no error for " + c.Key);
                }
                catch (FormatException e)
                {
                    Assert.True(e.Message.StartsWith(c.Value, StringComparison.Ordinal), "error for " + c.Key + ": " + e.Message);
                }
            }
            return Task.FromResult(0);
        }

        // JSON text given to publish / enqueue is stored digit for digit (it was read through
        // double before: 123456789012345678901234567890 became 1.2345678901234568E+29).
        [Test]
        public static async Task JsonTextPayloadsKeepEveryDigit()
        {
            string url = await Db.CreateAsync();
            try
            {
                const string digits = "{\"d\": 0.1000000000000000055511151231257827, \"n\": 123456789012345678901234567890}";
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    await Outbox.PublishAsync(tx, "t", new JsonText(digits));
                    await InboxQueue.EnqueueAsync(tx, "s", new JsonText(digits));
                    tx.Commit();
                }
                Assert.Equal(digits, Db.Psql(url, "SELECT payload::text FROM outbox"), "published payload");
                Assert.Equal(digits, Db.Psql(url, "SELECT payload::text FROM inbox"), "enqueued payload");
            }
            finally { Db.Drop(url); }
        }

        // A typed handler gets InboxMessage<T> with exact numbers; a payload that is not a T is
        // dead-lettered naming the field, and the handler never sees it. The connection form
        // takes the caller's deserializer.
        [Test]
        public static async Task TypedHandlersGetExactPayloadsAndAMismatchIsDeadLettered()
        {
            string url = await Db.CreateAsync();
            try
            {
                Enqueued good, bad;
                using (OdbcConnection conn = AppTxTests.Odbc(url))
                using (DbTransaction tx = conn.BeginTransaction())
                {
                    good = await InboxQueue.EnqueueAsync(tx, "orders", new JsonText(OrderJson), new EnqueueOptions { EventType = "order.placed" });
                    bad = await InboxQueue.EnqueueAsync(tx, "orders", new JsonText("{\"orderId\": \"o-2\", \"lines\": [{\"qty\": \"two\"}]}"));
                    tx.Commit();
                }
                var seen = new List<InboxMessage<PlacedOrder>>();
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("orders")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync<PlacedOrder>((m, tx, t) =>
                    {
                        lock (seen) seen.Add(m);
                        return Task.FromResult(0);
                    }, ct), "both rows finished", () => Db.Psql(url, "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead')") == "2");
                }
                Assert.Equal(1, seen.Count, "handled messages");
                Assert.Equal(good.Id, seen[0].Id, "handled id");
                Assert.Equal("order.placed", seen[0].EventType, "event type");
                CheckOrder(seen[0].Payload, "typed handler");
                Assert.Equal(12345678901234567.89m, seen[0].Message.PayloadAs<PlacedOrder>().Total, "PayloadAs");
                Assert.Equal("processed", Db.Psql(url, "SELECT state FROM inbox WHERE id = '" + good.Id + "'"), "good row");
                string dead = Db.Psql(url, "SELECT state || '|' || last_error FROM inbox WHERE id = '" + bad.Id + "'");
                Assert.True(dead.StartsWith("dead|") && dead.Contains("payload.lines[0].qty") && dead.Contains("PlacedOrder"), "bad row: " + dead);

                // The connection form with the caller's deserializer.
                Db.Psql(url, "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('custom', 'k', '{\"orderId\": \"o-3\"}', 'pull')");
                var calls = new List<string>();
                string got = null;
                Func<DbConnection> connect = () => new OdbcConnection(AppTxTests.OdbcConnectionString(url));
                using (var w = await InboxWorker.ConnectAsync(url, ContractTests.Quick("custom")))
                {
                    await ContractTests.RunUntil(ct => w.RunAsync<PlacedOrder>(connect, (m, tx, t) =>
                    {
                        got = m.Payload.OrderId;
                        return Task.FromResult(0);
                    }, json => { lock (calls) calls.Add(json); return Json.Deserialize<PlacedOrder>(json); }, ct),
                        "the custom row processed", () => Db.Psql(url, "SELECT state FROM inbox WHERE source = 'custom'") == "processed");
                }
                Assert.Equal("o-3", got, "custom deserializer's payload");
                Assert.Equal("{\"orderId\":\"o-3\"}", string.Join(";", calls), "deserializer calls");
            }
            finally { Db.Drop(url); }
        }
    }
}
