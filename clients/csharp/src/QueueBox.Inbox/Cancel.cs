using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Pull inbox rows to cancel: one row by <see cref="Id"/>, or within
    /// <see cref="Source"/> the row of an idempotency <see cref="Key"/>, or every pending row of
    /// an <see cref="Aggregate"/>. Give exactly one of Id, Key and Aggregate; Source is required
    /// with Key or Aggregate.</summary>
    public sealed class InboxCancelTarget
    {
        /// <summary>An inbox row's id.</summary>
        public Guid? Id { get; set; }
        /// <summary>The inbox source the key or aggregate belongs to.</summary>
        public string Source { get; set; }
        /// <summary>An idempotency key of <see cref="Source"/>.</summary>
        public string Key { get; set; }
        /// <summary>An aggregate id of <see cref="Source"/>: every pending row of it.</summary>
        public string Aggregate { get; set; }
    }

    /// <summary>Outbox rows to cancel: one row by <see cref="Id"/>, or every pending row of a
    /// <see cref="Key"/> (the outbox's ordering key), optionally only those of
    /// <see cref="Topic"/>. Give exactly one of Id and Key.</summary>
    public sealed class OutboxCancelTarget
    {
        /// <summary>An outbox row's id.</summary>
        public Guid? Id { get; set; }
        /// <summary>Only rows of this topic (with <see cref="Key"/>).</summary>
        public string Topic { get; set; }
        /// <summary>The outbox key.</summary>
        public string Key { get; set; }
    }

    /// <summary>What a cancel did with the rows it named (all zeros when it matched none).</summary>
    public sealed class CancelCounts : IEquatable<CancelCounts>
    {
        /// <summary>Creates the counts.</summary>
        public CancelCounts(long cancelled, long inFlight, long finished, long push)
        {
            Cancelled = cancelled;
            InFlight = inFlight;
            Finished = finished;
            Push = push;
        }

        /// <summary>Pending (or scheduled, or waiting for a retry) rows now <c>cancelled</c>.</summary>
        public long Cancelled { get; private set; }
        /// <summary>Rows being handled: left to finish or fail normally.</summary>
        public long InFlight { get; private set; }
        /// <summary>Rows already terminal (processed/sent, dead, or cancelled before): unchanged.</summary>
        public long Finished { get; private set; }
        /// <summary>Inbox push rows: the relay forwards them, they are never cancelled.</summary>
        public long Push { get; private set; }

        /// <summary>True when every count is the same.</summary>
        public bool Equals(CancelCounts other)
        {
            return other != null && Cancelled == other.Cancelled && InFlight == other.InFlight && Finished == other.Finished && Push == other.Push;
        }

        /// <summary>True when <paramref name="obj"/> is a <see cref="CancelCounts"/> with the same counts.</summary>
        public override bool Equals(object obj) { return Equals(obj as CancelCounts); }

        /// <summary>A hash of the counts.</summary>
        public override int GetHashCode() { return (int)(Cancelled * 31 * 31 * 31 + InFlight * 31 * 31 + Finished * 31 + Push); }

        /// <summary>The counts, for messages.</summary>
        public override string ToString()
        {
            return "cancelled " + Cancelled + ", in flight " + InFlight + ", finished " + Finished + ", push " + Push;
        }
    }

    /// <summary>Cancels pending rows (what <c>queuebox cancel inbox|outbox</c> does) in one
    /// statement of the core: a row being handled is counted in
    /// <see cref="CancelCounts.InFlight"/> and left to finish, and nothing is cancelled twice.
    /// A target that names no row throws a <see cref="QueueBoxException"/> of kind
    /// <see cref="QueueBoxErrorKind.InvalidInput"/> naming the missing field, before
    /// connecting. Each call connects to the database for itself.</summary>
    public static class PendingRows
    {
        /// <summary>Cancels the pending pull rows <paramref name="target"/> names. Cancelling
        /// <paramref name="cancellationToken"/> only stops the waiting
        /// (OperationCanceledException at once): a cancel already sent may still take effect.</summary>
        public static Task<CancelCounts> CancelInboxAsync(string databaseUrl, InboxCancelTarget target,
                                                          CancellationToken cancellationToken = default(CancellationToken))
        {
            if (target == null) throw new ArgumentNullException("target");
            var t = new Dictionary<string, object>();
            if (target.Id.HasValue) t["id"] = target.Id.Value.ToString();
            if (target.Source != null) t["source"] = target.Source;
            if (target.Key != null) t["key"] = target.Key;
            if (target.Aggregate != null) t["aggregate"] = target.Aggregate;
            return CancelAsync(databaseUrl, "inbox", t, cancellationToken);
        }

        /// <summary>Cancels the pending outbox rows <paramref name="target"/> names; otherwise as
        /// <see cref="CancelInboxAsync"/>.</summary>
        public static Task<CancelCounts> CancelOutboxAsync(string databaseUrl, OutboxCancelTarget target,
                                                           CancellationToken cancellationToken = default(CancellationToken))
        {
            if (target == null) throw new ArgumentNullException("target");
            var t = new Dictionary<string, object>();
            if (target.Id.HasValue) t["id"] = target.Id.Value.ToString();
            if (target.Topic != null) t["topic"] = target.Topic;
            if (target.Key != null) t["key"] = target.Key;
            return CancelAsync(databaseUrl, "outbox", t, cancellationToken);
        }

        // The core reads the target (and refuses one that names no row); this only carries it.
        private static async Task<CancelCounts> CancelAsync(string databaseUrl, string table, Dictionary<string, object> target,
                                                            CancellationToken cancellationToken)
        {
            IntPtr curl = Native.Utf8(databaseUrl), ctable = Native.Utf8(table), ctarget = Native.Utf8(Json.Serialize(target));
            string counts;
            try
            {
                counts = await Pending.OnOwnRuntimeAsync((IntPtr rt, IntPtr ud, out IntPtr err) =>
                    Native.qb_cancel(rt, curl, ctable, ctarget, Pending.String, ud, out err), cancellationToken).ConfigureAwait(false);
            }
            finally
            {
                // qb_cancel copies its arguments before it returns.
                Native.FreeUtf8(curl);
                Native.FreeUtf8(ctable);
                Native.FreeUtf8(ctarget);
            }
            var c = (IDictionary<string, object>)Json.Parse(counts);
            return new CancelCounts((long)c["cancelled"], (long)c["inFlight"], (long)c["finished"], (long)c["push"]);
        }
    }
}
