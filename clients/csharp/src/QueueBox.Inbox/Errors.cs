using System;

namespace QueueBox.Inbox
{
    /// <summary>The native library's status codes (QB_ERR_* in queuebox.h): the codes and names
    /// of queuebox-core's ErrorKind, the one error-kind table (tests/AbiTests.cs compares this
    /// enum with proto-docs/error-kinds.json exactly; Internal is the C boundary's own status).</summary>
    public enum QueueBoxErrorKind
    {
        Internal = 1,
        ClaimLost = 2,
        Connect = 3,
        SchemaMissing = 4,
        Migration = 5,
        Database = 6,
        Config = 7,
        InvalidInput = 8,
        AlreadyFinished = 9,
        Cancelled = 10,
    }

    /// <summary>An error reported by the native library.</summary>
    public class QueueBoxException : Exception
    {
        public QueueBoxException(QueueBoxErrorKind kind, string code, string message) : base(message)
        {
            Kind = kind;
            Code = code;
        }

        /// <summary>What went wrong, as a stable kind.</summary>
        public QueueBoxErrorKind Kind { get; private set; }

        /// <summary>The SQLSTATE of a database error, or the option path of a configuration
        /// error ("batchSize", "retry.baseDelayMs"); null otherwise.</summary>
        public string Code { get; private set; }

        internal static QueueBoxException Create(QueueBoxErrorKind kind, string code, string message)
        {
            switch (kind)
            {
                case QueueBoxErrorKind.ClaimLost: return new ClaimLostException(code, message);
                case QueueBoxErrorKind.Config: return new QueueBoxConfigException(code, message);
                case QueueBoxErrorKind.Cancelled: return new QueueBoxCancelledException(code, message);
                default: return new QueueBoxException(kind, code, message);
            }
        }
    }

    /// <summary>A fenced write matched no row: the lease expired or another worker owns the row.</summary>
    public sealed class ClaimLostException : QueueBoxException
    {
        public ClaimLostException(string code, string message) : base(QueueBoxErrorKind.ClaimLost, code, message) { }
    }

    /// <summary>An invalid option; <see cref="Field"/> names it.</summary>
    public sealed class QueueBoxConfigException : QueueBoxException
    {
        public QueueBoxConfigException(string code, string message) : base(QueueBoxErrorKind.Config, code, message) { }

        public string Field { get { return Code; } }
    }

    /// <summary>The task was cancelled (lease lost, or the shutdown grace ran out).</summary>
    public sealed class QueueBoxCancelledException : QueueBoxException
    {
        public QueueBoxCancelledException(string code, string message) : base(QueueBoxErrorKind.Cancelled, code, message) { }
    }

    /// <summary>Thrown by a handler to retry the row after <see cref="After"/> instead of the
    /// policy's backoff (the attempt counter still increases).</summary>
    public sealed class RetryLaterException : Exception
    {
        public RetryLaterException(TimeSpan after, string reason = null)
            : base(reason ?? ("handler asked to retry after " + after))
        {
            After = after < TimeSpan.Zero ? TimeSpan.Zero : after;
        }

        public TimeSpan After { get; private set; }
    }

    /// <summary>Thrown by a handler to dead-letter the row at once.</summary>
    public sealed class DeadLetterException : Exception
    {
        public DeadLetterException(string reason) : base(reason) { }
    }
}
