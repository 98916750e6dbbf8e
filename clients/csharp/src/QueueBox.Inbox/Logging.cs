using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace QueueBox.Inbox
{
    /// <summary>Severity of a QueueBox log record. The values are those of
    /// Microsoft.Extensions.Logging.LogLevel, so <c>(LogLevel)level</c> converts one into the other.</summary>
    public enum QueueBoxLogLevel
    {
        Trace = 0,
        Debug = 1,
        Information = 2,
        Warning = 3,
        Error = 4,
        Critical = 5,
        None = 6,
    }

    /// <summary>The ILogger shape the native library's records are given to: a level, a message
    /// and the record's fields (<c>message_id</c>, <c>source</c>, <c>topic</c>, <c>attempt</c>,
    /// <c>error</c>, <c>target</c>...). Microsoft.Extensions.Logging is not a dependency of this
    /// package (it builds for net45 on mono, without NuGet); adapting an ILogger takes a few
    /// lines, shown in the README's "Logging" section.</summary>
    public interface IQueueBoxLogger
    {
        bool IsEnabled(QueueBoxLogLevel level);
        void Log(QueueBoxLogLevel level, string message, IReadOnlyDictionary<string, object> fields);
    }

    /// <summary>An <see cref="IQueueBoxLogger"/> from a delegate, enabled from a minimum level.</summary>
    public sealed class DelegateLogger : IQueueBoxLogger
    {
        private readonly Action<QueueBoxLogLevel, string, IReadOnlyDictionary<string, object>> _sink;
        private readonly QueueBoxLogLevel _minimum;

        public DelegateLogger(Action<QueueBoxLogLevel, string, IReadOnlyDictionary<string, object>> sink,
                              QueueBoxLogLevel minimum = QueueBoxLogLevel.Information)
        {
            if (sink == null) throw new ArgumentNullException("sink");
            _sink = sink;
            _minimum = minimum;
        }

        public bool IsEnabled(QueueBoxLogLevel level) { return level >= _minimum && level != QueueBoxLogLevel.None; }
        public void Log(QueueBoxLogLevel level, string message, IReadOnlyDictionary<string, object> fields) { _sink(level, message, fields); }
    }

    /// <summary>Routes the native library's log records to loggers. A record carrying the
    /// <c>source</c> of a worker connected with <see cref="InboxOptions.Logger"/> goes to that
    /// logger; every other record to <see cref="Default"/>, which writes warnings and errors to
    /// standard error until replaced. The level filter runs in the library: a level no logger
    /// enables never leaves it.</summary>
    public static class QueueBoxLogging
    {
        private static readonly object Gate = new object();
        private static readonly object InstallGate = new object();
        private static IQueueBoxLogger _default = new DelegateLogger(
            (level, message, fields) => Console.Error.WriteLine("queuebox " + level + ": " + message + " " + Json.Serialize(fields)),
            QueueBoxLogLevel.Warning);
        private static readonly Dictionary<string, List<IQueueBoxLogger>> BySource = new Dictionary<string, List<IQueueBoxLogger>>();
        private static int _installed; // the QbLogLevel installed in the library; 0 before the first
        // Kept in a static field: the library calls it for as long as the process runs.
        private static readonly Native.LogCallback Callback = OnRecord;

        /// <summary>The logger of records that belong to no worker with its own logger.</summary>
        public static IQueueBoxLogger Default
        {
            get { lock (Gate) return _default; }
            set
            {
                if (value == null) throw new ArgumentNullException("value");
                lock (Gate) _default = value;
                Install();
            }
        }

        /// <summary>Sends the records of <paramref name="source"/> to <paramref name="logger"/>
        /// (when not null) until the returned action runs.</summary>
        internal static Action Register(string source, IQueueBoxLogger logger)
        {
            if (logger != null)
            {
                lock (Gate)
                {
                    List<IQueueBoxLogger> list;
                    if (!BySource.TryGetValue(source, out list)) BySource[source] = list = new List<IQueueBoxLogger>();
                    list.Add(logger);
                }
            }
            Install();
            return () =>
            {
                if (logger == null) return;
                lock (Gate)
                {
                    List<IQueueBoxLogger> list;
                    if (BySource.TryGetValue(source, out list) && list.Remove(logger) && list.Count == 0) BySource.Remove(source);
                }
            };
        }

        /// <summary>(Re)installs the library's callback at the lowest level a logger enables.
        /// Replacing the callback waits for running calls of it, which take Gate, so Gate is
        /// not held here (InstallGate orders the installs).</summary>
        private static void Install()
        {
            lock (InstallGate)
            {
                var loggers = new List<IQueueBoxLogger>();
                lock (Gate)
                {
                    loggers.Add(_default);
                    foreach (var list in BySource.Values) loggers.AddRange(list);
                }
                // QbLogLevel: 1 error, 2 warn, 3 info, 4 debug, 5 trace.
                int want = 1;
                foreach (var l in loggers)
                {
                    if (l.IsEnabled(QueueBoxLogLevel.Warning)) want = Math.Max(want, 2);
                    if (l.IsEnabled(QueueBoxLogLevel.Information)) want = Math.Max(want, 3);
                    if (l.IsEnabled(QueueBoxLogLevel.Debug)) want = Math.Max(want, 4);
                    if (l.IsEnabled(QueueBoxLogLevel.Trace)) want = Math.Max(want, 5);
                }
                if (want == _installed) return;
                IntPtr err;
                Native.ThrowIfFailed(Native.qb_set_log_callback(Callback, IntPtr.Zero, want, out err), err);
                _installed = want;
            }
        }

        private static QueueBoxLogLevel LevelOf(int qbLevel)
        {
            switch (qbLevel)
            {
                case 1: return QueueBoxLogLevel.Error;
                case 2: return QueueBoxLogLevel.Warning;
                case 3: return QueueBoxLogLevel.Information;
                case 4: return QueueBoxLogLevel.Debug;
                default: return QueueBoxLogLevel.Trace;
            }
        }

        /// <summary>One record from the library, on a runtime thread (or the thread of a
        /// blocking call). Its strings live only during this call: they are copied here.</summary>
        private static void OnRecord(IntPtr userData, int level, IntPtr target, IntPtr message, IntPtr fieldsJson)
        {
            try
            {
                var fields = Json.Parse(Native.ReadUtf8(fieldsJson)) as Dictionary<string, object> ?? new Dictionary<string, object>();
                fields["target"] = Native.ReadUtf8(target);
                object source;
                IQueueBoxLogger logger;
                lock (Gate)
                {
                    List<IQueueBoxLogger> list;
                    logger = fields.TryGetValue("source", out source) && source is string && BySource.TryGetValue((string)source, out list)
                        ? list[list.Count - 1]
                        : _default;
                }
                var lvl = LevelOf(level);
                if (logger.IsEnabled(lvl)) logger.Log(lvl, Native.ReadUtf8(message), fields);
            }
            catch (Exception e)
            {
                // An exception must not cross into the native library.
                try { Console.Error.WriteLine("queuebox: a logger threw: " + e.Message); } catch (Exception) { }
            }
        }
    }
}
