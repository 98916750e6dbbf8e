using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;

namespace QueueBox.Inbox
{
    /// <summary>The boundary crossed per batch, not per row (issue 21): tasks come out of the
    /// library with one qb_worker_next_batch_blocking call and plain completions go back with one
    /// qb_tasks_complete call per batch. The core decides everything as for single tasks: each
    /// task keeps its own lease, fence and finish, so a lost claim affects only that task.</summary>
    internal static class NativeBatch
    {
        private const string Lib = "queuebox";

        /// <summary>Mirrors QbTaskBatch: the tasks are the caller's, the arrays and message
        /// strings the batch's (released by qb_task_batch_free).</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct QbTaskBatch
        {
            public UIntPtr Len;
            public IntPtr Tasks;
            public IntPtr MessagesJson;
        }

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void TasksDoneCallback(IntPtr userData, int status, IntPtr results, UIntPtr len, IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_worker_next_batch_blocking(IntPtr worker, UIntPtr max, out IntPtr batch, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_task_batch_free(IntPtr batch);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_tasks_complete(IntPtr[] tasks, UIntPtr len, TasksDoneCallback cb, IntPtr userData, out IntPtr error);

        /// <summary>The most tasks one crossing takes; the core hands out no more than its
        /// free concurrency slots anyway.</summary>
        internal const int MaxBatch = 256;

        /// <summary>Copies a batch's tasks and messages out and frees the batch.</summary>
        private static Pending.Next[] Take(IntPtr batch)
        {
            var b = (QbTaskBatch)Marshal.PtrToStructure(batch, typeof(QbTaskBatch));
            int n = (int)b.Len.ToUInt32();
            var next = new Pending.Next[n];
            for (int i = 0; i < n; i++)
            {
                next[i] = new Pending.Next
                {
                    Task = Marshal.ReadIntPtr(b.Tasks, i * IntPtr.Size),
                    MessageJson = Native.ReadUtf8(Marshal.ReadIntPtr(b.MessagesJson, i * IntPtr.Size)),
                };
            }
            qb_task_batch_free(batch);
            return next;
        }

        /// <summary>Waits for at least one task, blocking the calling thread (never a runtime
        /// thread); an empty array once the worker is stopping. The worker loop's own thread
        /// waits in the library between batches, so a hand-over costs no callback from a
        /// runtime thread into managed code and no continuation on the thread pool.</summary>
        internal static Pending.Next[] NextBatch(IntPtr worker)
        {
            IntPtr batch, err;
            int st = qb_worker_next_batch_blocking(worker, new UIntPtr(MaxBatch), out batch, out err);
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
                    Send(handles.ToArray());
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
