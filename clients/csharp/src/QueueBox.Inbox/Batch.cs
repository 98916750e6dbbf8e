using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>The boundary crossed per batch, not per row (issue 21): tasks come out of the
    /// library with one qb_worker_next_batch call and plain completions go back with one
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
        internal delegate void BatchCallback(IntPtr userData, int status, IntPtr batch, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void TasksDoneCallback(IntPtr userData, int status, IntPtr results, UIntPtr len, IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_worker_next_batch(IntPtr worker, UIntPtr max, BatchCallback cb, IntPtr userData, out IntPtr error);
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

        /// <summary>Settles the TaskCompletionSource of qb_worker_next_batch (a static field,
        /// so the garbage collector never frees a function pointer the library holds).</summary>
        internal static readonly BatchCallback Batch = (ud, st, batch, err) =>
        {
            Pending.Next[] next = null;
            try
            {
                if (batch != IntPtr.Zero) next = Take(batch);
            }
            catch { }
            var tcs = Pending.Unpin<TaskCompletionSource<Pending.Next[]>>(ud);
            QueueBoxException e = Native.TakeError(st, err);
            if (e != null) tcs.TrySetException(e);
            else tcs.TrySetResult(next ?? new Pending.Next[0]);
        };

        /// <summary>Waits for at least one task; an empty array once the worker is stopping.</summary>
        internal static Task<Pending.Next[]> NextBatchAsync(IntPtr worker)
        {
            var tcs = Pending.Source<Pending.Next[]>();
            IntPtr ud = Pending.Pin(tcs), err;
            Pending.Started(qb_worker_next_batch(worker, new UIntPtr(MaxBatch), Batch, ud, out err), err, ud);
            return tcs.Task;
        }
    }

    /// <summary>Sends plain completions back in batches: handlers that finish while a batch is
    /// being handed over queue up and go together in the next qb_tasks_complete call. Each
    /// Complete returns the task's own status (0, or claim lost, cancelled, ...).</summary>
    internal sealed class Completer
    {
        private sealed class Item
        {
            public IntPtr Task;
            public TaskCompletionSource<int> Done;
        }

        private readonly ConcurrentQueue<Item> _queue = new ConcurrentQueue<Item>();
        private int _flushing;

        internal Task<int> Complete(IntPtr task)
        {
            var item = new Item { Task = task, Done = Pending.Source<int>() };
            _queue.Enqueue(item);
            if (Interlocked.CompareExchange(ref _flushing, 1, 0) == 0)
                ThreadPool.QueueUserWorkItem(_ => Flush());
            return item.Done.Task;
        }

        /// <summary>Hands everything queued to the library in one call; runs again when more
        /// arrived meanwhile.</summary>
        private void Flush()
        {
            while (true)
            {
                var items = new System.Collections.Generic.List<Item>();
                Item it;
                while (items.Count < NativeBatch.MaxBatch && _queue.TryDequeue(out it)) items.Add(it);
                if (items.Count > 0)
                {
                    Send(items.ToArray());
                    continue;
                }
                Volatile.Write(ref _flushing, 0);
                // An item enqueued after the last dequeue but before the flag dropped would
                // wait for the next Complete: take the flag back and go on if there is one.
                if (_queue.IsEmpty || Interlocked.CompareExchange(ref _flushing, 1, 0) != 0) return;
            }
        }

        private static void Send(Item[] items)
        {
            var handles = new IntPtr[items.Length];
            for (int i = 0; i < items.Length; i++) handles[i] = items[i].Task;
            IntPtr ud = Pending.Pin(items), err;
            int st = NativeBatch.qb_tasks_complete(handles, new UIntPtr((uint)handles.Length), Done, ud, out err);
            if (st != 0)
            {
                GCHandle.FromIntPtr(ud).Free();
                QueueBoxException e = Native.TakeError(st, err);
                foreach (Item i in items) i.Done.TrySetException(e);
            }
        }

        private static readonly NativeBatch.TasksDoneCallback Done = (ud, st, results, len, err) =>
        {
            try
            {
                var items = Pending.Unpin<Item[]>(ud);
                QueueBoxException e = Native.TakeError(st, err);
                var codes = new int[items.Length];
                if (e == null && results != IntPtr.Zero) Marshal.Copy(results, codes, 0, Math.Min(items.Length, (int)len.ToUInt32()));
                for (int i = 0; i < items.Length; i++)
                {
                    if (e != null) items[i].Done.TrySetException(e);
                    else items[i].Done.TrySetResult(codes[i]);
                }
            }
            catch
            {
                // Never let an exception unwind into native code.
            }
        };
    }
}
