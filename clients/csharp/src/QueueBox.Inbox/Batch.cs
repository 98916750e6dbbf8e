using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace QueueBox.Inbox
{
    /// <summary>The boundary crossed per batch, not per row: tasks come out of the
    /// library with one qb_worker_next_messages_blocking call and plain completions go back with one
    /// qb_tasks_complete call per batch. The core decides everything as for single tasks: each
    /// task keeps its own lease, fence and finish, so a lost claim affects only that task.</summary>
    internal static class NativeBatch
    {
        private const string Lib = "queuebox";

        /// <summary>Mirrors QbStr: UTF-8 text the batch owns, <c>Len</c> bytes, not
        /// NUL-terminated; <c>Ptr</c> is zero for an absent field.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct QbStr
        {
            public IntPtr Ptr;
            public UIntPtr Len;

            /// <summary>The text, copied out (null when absent).</summary>
            internal string Read()
            {
                return Ptr == IntPtr.Zero ? null : Native.ReadUtf8(Ptr, checked((int)Len.ToUInt64()));
            }
        }

        /// <summary>Mirrors QbHeader.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct QbHeader
        {
            public QbStr Name;
            public QbStr Value;
        }

        /// <summary>Mirrors QbMessage (proto-docs/ffi.md): the fields of a claimed message.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct QbMessage
        {
            public QbStr Id;
            public QbStr Source;
            public QbStr IdempotencyKey;
            public QbStr AggregateId;
            public QbStr EventType;
            public QbStr PayloadJson;
            public IntPtr Headers;
            public UIntPtr HeadersLen;
            public int Attempt;
            public QbStr CorrelationId;
            public long CreatedAtUnixNanos;
            public QbStr Traceparent;
            public QbStr Tracestate;
        }

        /// <summary>Mirrors QbMessageBatch: the tasks are the caller's; the task array, the
        /// messages and their text the batch's (released by qb_message_batch_free).</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct QbMessageBatch
        {
            public UIntPtr Len;
            public IntPtr Tasks;
            public IntPtr Messages;
            public IntPtr Storage;
        }

        private static readonly int MessageSize = Marshal.SizeOf(typeof(QbMessage));
        private static readonly int HeaderSize = Marshal.SizeOf(typeof(QbHeader));

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void TasksDoneCallback(IntPtr userData, int status, IntPtr results, UIntPtr len, IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_worker_next_messages_blocking(IntPtr worker, UIntPtr max, out IntPtr batch, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_message_batch_free(IntPtr batch);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_tasks_complete(IntPtr[] tasks, UIntPtr len, TasksDoneCallback cb, IntPtr userData, out IntPtr error);

        /// <summary>The most tasks one crossing takes (the default batch is at most 1024 up to
        /// MaxConcurrency 512); the core hands out no more than it holds.</summary>
        internal const int MaxBatch = 1024;

        /// <summary>Copies a batch's tasks and messages out and frees the batch. The messages
        /// arrive as structs of strings (qb_worker_next_messages_blocking): they are copied
        /// field by field, with no JSON to parse.</summary>
        private static Pending.Next[] Take(IntPtr batch)
        {
            var b = (QbMessageBatch)Marshal.PtrToStructure(batch, typeof(QbMessageBatch));
            int n = checked((int)b.Len.ToUInt64());
            var next = new Pending.Next[n];
            try
            {
                for (int i = 0; i < n; i++)
                {
                    var m = (QbMessage)Marshal.PtrToStructure(IntPtr.Add(b.Messages, i * MessageSize), typeof(QbMessage));
                    next[i] = new Pending.Next
                    {
                        Task = Marshal.ReadIntPtr(b.Tasks, i * IntPtr.Size),
                        Message = ToMessage(m),
                    };
                }
            }
            finally
            {
                qb_message_batch_free(batch);
            }
            return next;
        }

        private static InboxMessage ToMessage(QbMessage m)
        {
            int count = checked((int)m.HeadersLen.ToUInt64());
            var headers = new Dictionary<string, string>(count);
            for (int i = 0; i < count; i++)
            {
                var h = (QbHeader)Marshal.PtrToStructure(IntPtr.Add(m.Headers, i * HeaderSize), typeof(QbHeader));
                headers[h.Name.Read()] = h.Value.Read();
            }
            return new InboxMessage(
                Guid.Parse(m.Id.Read()),
                m.Source.Read(),
                m.IdempotencyKey.Read(),
                m.AggregateId.Read(),
                m.EventType.Read(),
                m.PayloadJson.Read(),
                headers,
                m.Attempt,
                m.CorrelationId.Read(),
                UnixEpoch.AddTicks(m.CreatedAtUnixNanos / 100),
                m.Traceparent.Read(),
                m.Tracestate.Read());
        }

        private static readonly DateTimeOffset UnixEpoch = new DateTimeOffset(1970, 1, 1, 0, 0, 0, TimeSpan.Zero);

        /// <summary>Waits for at least one task, blocking the calling thread (never a runtime
        /// thread); an empty array once the worker is stopping. The worker loop's own thread
        /// waits in the library between batches, so a hand-over costs no callback from a
        /// runtime thread into managed code and no continuation on the thread pool.</summary>
        internal static Pending.Next[] NextBatch(IntPtr worker)
        {
            IntPtr batch, err;
            int st = qb_worker_next_messages_blocking(worker, new UIntPtr(MaxBatch), out batch, out err);
            QueueBoxException e = Native.TakeError(st, err);
            if (e != null) throw e;
            return batch == IntPtr.Zero ? new Pending.Next[0] : Take(batch);
        }
    }

    /// <summary>Hands plain completions back in batches without waiting for their statement,
    /// as the Go wrapper does: completions that arrive while one call is being made go
    /// together in the next qb_tasks_complete call, which returns before the statement runs
    /// (no callback), so the task's concurrency slot is free at once and the core's completer
    /// batches the statements as for the Rust worker. The completer owns each handle it is
    /// given and frees it right after the call (the library copies what it needs). A claim
    /// lost at completion is counted and logged by the core; the wrapper never acted on it.
    /// Waiting for each statement cost a callback from a runtime thread into managed code
    /// per row (benchmarks/wrappers.md, 2026-12-04).</summary>
    internal sealed class Completer
    {
        private readonly ConcurrentQueue<IntPtr> _queue = new ConcurrentQueue<IntPtr>();
        private int _flushing;
        private readonly SlotGate _gate;
        private readonly HandlerTimes _times;

        internal Completer(SlotGate gate, HandlerTimes times)
        {
            _gate = gate;
            _times = times;
        }

        /// <summary>Completes and frees <paramref name="task"/>: the caller must not use the
        /// handle after this call.</summary>
        internal void Complete(IntPtr task)
        {
            _queue.Enqueue(task);
            // The call does not wait for the database, so the caller's thread makes it.
            if (Interlocked.CompareExchange(ref _flushing, 1, 0) == 0) Flush();
        }

        /// <summary>Hands everything queued to the library in one call; goes on while more
        /// arrived meanwhile.</summary>
        private void Flush()
        {
            var handles = new System.Collections.Generic.List<IntPtr>();
            while (true)
            {
                handles.Clear();
                IntPtr h;
                while (handles.Count < NativeBatch.MaxBatch && _queue.TryDequeue(out h)) handles.Add(h);
                if (handles.Count > 0)
                {
                    _times.Report();
                    Send(handles.ToArray());
                    _gate.Release(handles.Count);
                    continue;
                }
                Volatile.Write(ref _flushing, 0);
                // A handle enqueued after the last dequeue but before the flag dropped would
                // wait for the next Complete: take the flag back and go on if there is one.
                if (_queue.IsEmpty || Interlocked.CompareExchange(ref _flushing, 1, 0) != 0) return;
            }
        }

        private static void Send(IntPtr[] handles)
        {
            IntPtr err;
            int st = NativeBatch.qb_tasks_complete(handles, new UIntPtr((uint)handles.Length), null, IntPtr.Zero, out err);
            // Refused only for a NULL handle, which never gets here; the rows would come back
            // after their lease. The error is released either way.
            Native.TakeError(st, err);
            foreach (IntPtr h in handles) Native.qb_task_free(h);
        }
    }
}
