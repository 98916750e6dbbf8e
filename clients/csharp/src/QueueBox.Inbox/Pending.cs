using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Turns the native callbacks into Tasks. user_data is a GCHandle to a
    /// TaskCompletionSource; continuations run asynchronously so that no user code ever
    /// runs on (and stalls) a runtime thread of the native library. The delegates are static
    /// fields, so the garbage collector never frees a function pointer the library holds.</summary>
    internal static class Pending
    {
        internal sealed class Next
        {
            public IntPtr Task;
            public InboxMessage Message;
        }

        internal static TaskCompletionSource<T> Source<T>()
        {
            return new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        internal static IntPtr Pin(object o)
        {
            return GCHandle.ToIntPtr(GCHandle.Alloc(o));
        }

        internal static T Unpin<T>(IntPtr p) where T : class
        {
            GCHandle h = GCHandle.FromIntPtr(p);
            T target = (T)h.Target;
            h.Free();
            return target;
        }

        /// <summary>Awaits a native operation that has no way to be stopped. When
        /// <paramref name="cancellationToken"/> fires first, the caller gets an
        /// OperationCanceledException at once, <paramref name="handedOff"/> is set, and
        /// <paramref name="abandoned"/> later receives the operation's outcome to release what
        /// it made (the native side may still hold the runtime until then).</summary>
        internal static async Task<T> WaitAsync<T>(Task<T> native, CancellationToken cancellationToken, Action<Task<T>> abandoned, StrongBox<bool> handedOff)
        {
            if (cancellationToken.CanBeCanceled)
            {
                var cancelled = Source<bool>();
                using (cancellationToken.Register(() => cancelled.TrySetResult(true)))
                {
                    if (await System.Threading.Tasks.Task.WhenAny(native, cancelled.Task).ConfigureAwait(false) != native)
                    {
                        handedOff.Value = true;
                        // Not awaited: it runs whenever the native side finishes.
                        Forget(native.ContinueWith(abandoned, CancellationToken.None, TaskContinuationOptions.None, TaskScheduler.Default));
                        throw new OperationCanceledException(cancellationToken);
                    }
                }
            }
            return await native.ConfigureAwait(false);
        }

        /// <summary>Starts a native call that takes a string callback (it returns its status
        /// and error through <paramref name="error"/>).</summary>
        internal delegate int StartString(IntPtr runtime, IntPtr userData, out IntPtr error);

        /// <summary>Runs one native call with a string result on a runtime of its own (one
        /// thread), freed when the call ends, or, once <paramref name="cancellationToken"/>
        /// stopped the waiting, whenever the native side finishes: qb_migrate, qb_cancel.</summary>
        internal static async Task<string> OnOwnRuntimeAsync(StartString start, CancellationToken cancellationToken)
        {
            cancellationToken.ThrowIfCancellationRequested();
            IntPtr runtime = InboxWorker.NewRuntime(1);
            var handedOff = new StrongBox<bool>();
            try
            {
                var tcs = Source<string>();
                IntPtr ud = Pin(tcs), err;
                Started(start(runtime, ud, out err), err, ud);
                return await WaitAsync(tcs.Task, cancellationToken, t => Native.qb_runtime_free(runtime), handedOff).ConfigureAwait(false);
            }
            finally
            {
                if (!handedOff.Value) Native.qb_runtime_free(runtime);
            }
        }

        private static void Forget(Task task) { }

        /// <summary>After a native call that takes a callback: on failure the callback will
        /// never fire, so the pin is released and the error thrown here.</summary>
        internal static void Started(int status, IntPtr error, IntPtr userData)
        {
            if (status == 0) return;
            GCHandle.FromIntPtr(userData).Free();
            Native.ThrowIfFailed(status, error);
        }

        private static void Settle<T>(IntPtr ud, int status, IntPtr error, T value)
        {
            try
            {
                var tcs = Unpin<TaskCompletionSource<T>>(ud);
                QueueBoxException e = Native.TakeError(status, error);
                if (e != null) tcs.TrySetException(e);
                else tcs.TrySetResult(value);
            }
            catch
            {
                // Never let an exception unwind into native code.
            }
        }

        internal static readonly Native.DoneCallback Done = (ud, st, err) => Settle(ud, st, err, true);

        internal static readonly Native.CountCallback Count = (ud, st, n, err) => Settle(ud, st, err, n);

        internal static readonly Native.StringCallback String = (ud, st, json, err) =>
        {
            string s = null;
            try { s = Native.TakeString(json); } catch { }
            Settle(ud, st, err, s);
        };

        internal static readonly Native.WorkerCallback Worker = (ud, st, w, err) => Settle(ud, st, err, w);

        /// <summary>Fires once per task: cancels the handler's token when the task was
        /// cancelled (on the thread pool, so that token callbacks never run on a runtime thread).</summary>
        internal static readonly Native.CancelCallback Cancel = (ud, cancelled) =>
        {
            try
            {
                var cts = Unpin<CancellationTokenSource>(ud);
                if (cancelled) System.Threading.Tasks.Task.Run(() => cts.Cancel());
            }
            catch { }
        };
    }
}
