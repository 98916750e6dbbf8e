using System;
using System.Data;
using System.Data.Common;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>Processes one message. Return normally to complete the row (together with
    /// the writes made through <paramref name="transaction"/>); throw
    /// <see cref="RetryLaterException"/> or <see cref="DeadLetterException"/> to decide
    /// yourself; any other exception lets the retry policy decide. <paramref name="token"/>
    /// is cancelled when the lease is lost or the shutdown grace ran out; the row is then
    /// abandoned whatever the handler does.</summary>
    public delegate Task InboxHandler(InboxMessage message, InboxTransaction transaction, CancellationToken token);

    /// <summary>A pull worker for one source. Claims, lease renewal, LISTEN/NOTIFY, backoff,
    /// fencing and completion run in the native library (libqueuebox); this class turns
    /// them into Tasks.</summary>
    public sealed partial class InboxWorker : IDisposable
#if NETSTANDARD2_1_OR_GREATER || NET
        , IAsyncDisposable
#endif
    {
        private IntPtr _runtime;
        private IntPtr _worker;
        private readonly object _gate = new object();
        private Task<ulong> _shutdown;
        private Task _run;
        // MaxConcurrency (at least 1): how many handler loops a run keeps.
        private readonly int _slots;
        // The running loop's gate, woken by shutdown (set by the run).
        private SlotGate _slotGate;
        // Stops routing this worker's log records to InboxOptions.Logger.
        private readonly Action _unlog;

        private InboxWorker(IntPtr runtime, IntPtr worker, int slots, Action unlog)
        {
            _slots = slots;
            _runtime = runtime;
            _worker = worker;
            _unlog = unlog;
        }

        /// <summary>Validates the options (a <see cref="QueueBoxConfigException"/> names the
        /// field) and connects to the PostgreSQL database, whose QueueBox schema must be migrated.
        /// Cancelling <paramref name="cancellationToken"/> returns at once
        /// (OperationCanceledException); a connection still being made is closed when it is.</summary>
        public static async Task<InboxWorker> ConnectAsync(string databaseUrl, InboxOptions options, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (options == null) throw new ArgumentNullException("options");
            cancellationToken.ThrowIfCancellationRequested();
            IntPtr runtime = NewRuntime(0);
            Action unlog = QueueBoxLogging.Register(options.Source ?? "", options.Logger);
            var handedOff = new System.Runtime.CompilerServices.StrongBox<bool>();
            try
            {
                var tcs = Pending.Source<IntPtr>();
                IntPtr curl = Native.Utf8(databaseUrl ?? ""), copts = Native.Utf8(options.ToJson());
                try
                {
                    IntPtr ud = Pending.Pin(tcs), err;
                    Pending.Started(Native.qb_worker_new(runtime, curl, copts, Pending.Worker, ud, out err), err, ud);
                }
                finally
                {
                    Native.FreeUtf8(curl);
                    Native.FreeUtf8(copts);
                }
                IntPtr worker = await Pending.WaitAsync(tcs.Task, cancellationToken, t =>
                {
                    if (t.Status == TaskStatus.RanToCompletion) Native.qb_worker_free(t.Result);
                    Native.qb_runtime_free(runtime);
                    unlog();
                }, handedOff).ConfigureAwait(false);
                return new InboxWorker(runtime, worker, Math.Max(options.MaxConcurrency ?? 1, 1), unlog);
            }
            catch
            {
                // Handed off: the continuation frees them once the native connect finishes.
                if (handedOff.Value) throw;
                Native.qb_runtime_free(runtime);
                unlog();
                throw;
            }
        }

        internal static IntPtr NewRuntime(uint threads)
        {
            IntPtr rt, err;
            Native.ThrowIfFailed(Native.qb_runtime_new(threads, out rt, out err), err);
            return rt;
        }

        private IntPtr Handle
        {
            get
            {
                if (_worker == IntPtr.Zero) throw new ObjectDisposedException("InboxWorker");
                return _worker;
            }
        }

        /// <summary>Runs <paramref name="handler"/> on claimed rows until
        /// <paramref name="cancellationToken"/> is cancelled, then shuts down gracefully (see
        /// <see cref="ShutdownAsync"/>). Completes after the shutdown; throws only when the
        /// worker cannot run (e.g. the schema is missing). A worker runs once.</summary>
        public Task RunAsync(InboxHandler handler, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Start((task, tx, token) => handler(task.Message, tx, token), cancellationToken);
        }

        /// <summary>As <see cref="RunAsync(InboxHandler, CancellationToken)"/> for handlers that
        /// use the application's own transaction and complete the row in it with
        /// <see cref="InboxTask.CompleteAsync(DbTransaction, CancellationToken)"/>.</summary>
        public Task RunTasksAsync(InboxTaskHandler handler, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Start((task, tx, token) => handler(task, token), cancellationToken);
        }

        /// <summary>As <see cref="RunAsync(InboxHandler, CancellationToken)"/> on the
        /// application's own database: for each message it takes a connection from
        /// <paramref name="connect"/> (opened here if closed, e.g. <c>dataSource.CreateConnection</c>),
        /// begins a transaction, runs <paramref name="handler"/>, completes the row in that
        /// transaction and commits. A throwing handler rolls the transaction back.</summary>
        public Task RunAsync(Func<DbConnection> connect, DbInboxHandler handler, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (connect == null) throw new ArgumentNullException("connect");
            if (handler == null) throw new ArgumentNullException("handler");
            return Start(async (task, tx, token) =>
            {
                using (DbConnection connection = connect())
                {
                    if (connection == null) throw new InvalidOperationException("connect returned no connection");
                    if (connection.State != ConnectionState.Open) await connection.OpenAsync(token).ConfigureAwait(false);
                    // Disposing an uncommitted transaction rolls it back.
                    using (DbTransaction dbTx = connection.BeginTransaction())
                    {
                        await handler(task.Message, dbTx, token).ConfigureAwait(false);
                        await task.CompleteAsync(dbTx, token).ConfigureAwait(false);
                        dbTx.Commit();
                    }
                }
            }, cancellationToken);
        }

        /// <summary>What runs for one claimed row: the task, the wrapper-owned transaction.</summary>
        private delegate Task TaskBody(InboxTask task, InboxTransaction tx, CancellationToken token);

        private Task Start(TaskBody body, CancellationToken cancellationToken)
        {
            lock (_gate)
            {
                if (_run != null) throw new InvalidOperationException("the worker already ran");
                _run = RunLoopAsync(body, cancellationToken);
                return _run;
            }
        }

        private async Task RunLoopAsync(TaskBody handler, CancellationToken cancellationToken)
        {
            await Task.Yield();
            // One crossing hands out a batch of tasks: whatever the core has claimed, up to its
            // whole batch (the worker is a hand-out worker, InboxOptions.ToJson). They wait in
            // the queue for one of MaxConcurrency handler loops; plain completions go back in
            // batches through the completer, with the handlers' times, which size what the core
            // claims ahead of them (HandOut.cs).
            IntPtr worker = Handle;
            var queue = new HandOutQueue();
            var gate = new SlotGate(_slots);
            var times = new HandlerTimes(worker);
            var completer = new Completer(gate, times);
            var handlers = new Task[_slots];
            for (int i = 0; i < handlers.Length; i++)
                handlers[i] = Task.Run(() => HandlerLoopAsync(queue, handler, completer, gate, times));
            Exception failure = null;
            lock (_gate)
            {
                _slotGate = gate;
                if (_shutdown != null) gate.Stop();
            }
            using (cancellationToken.Register(() => StartShutdown()))
            {
                // The hand-out loop runs on a thread of its own, blocked in the library until
                // rows are claimed (the Go wrapper's loop goroutine does the same); shutdown
                // ends the wait with an empty batch.
                failure = await Task.Factory.StartNew(() =>
                {
                    try
                    {
                        while (true)
                        {
                            gate.Wait(() => queue.Count);
                            Pending.Next[] batch = NativeBatch.NextBatch(worker);
                            gate.Took(batch.Length);
                            if (batch.Length == 0) return null;
                            foreach (Pending.Next next in batch) queue.Add(next);
                        }
                    }
                    catch (Exception e)
                    {
                        return e;
                    }
                    finally
                    {
                        // Stopped: the tasks still queued go back at once, here as well as in
                        // any handler loop that comes free (all of them may be busy for the
                        // whole grace).
                        queue.Close(handlers.Length);
                        Pending.Next rest;
                        while (queue.TryTake(out rest)) ReleaseUnstarted(rest, gate);
                    }
                }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).ConfigureAwait(false);
            }
            Task<ulong> shutdown = StartShutdown();
            await Task.WhenAll(handlers).ConfigureAwait(false);
            await shutdown.ConfigureAwait(false);
            if (failure != null) throw failure;
        }

        /// <summary>One of MaxConcurrency loops that run the handler on queued tasks, one at a
        /// time, until the queue closes.</summary>
        private static async Task HandlerLoopAsync(HandOutQueue queue, TaskBody handler, Completer completer, SlotGate gate, HandlerTimes times)
        {
            Pending.Next next;
            while ((next = await queue.TakeAsync().ConfigureAwait(false)) != null)
            {
                if (queue.Closed)
                {
                    ReleaseUnstarted(next, gate);
                    continue;
                }
                // The time a task holds its handler loop, the wrapper's own work on it
                // included (as the Rust worker's handler time includes its task's).
                long started = Stopwatch.GetTimestamp();
                await RunOneAsync(next, handler, completer, gate, times).ConfigureAwait(false);
                times.Ran(Stopwatch.GetTimestamp() - started);
            }
        }

        /// <summary>Gives back a task that waited in the queue when the run stopped: pending
        /// again at once, no attempt spent (as the core does with rows it claimed and never
        /// handed out).</summary>
        private static void ReleaseUnstarted(Pending.Next next, SlotGate gate)
        {
            IntPtr err;
            // A failure (the database is gone) leaves the row to its lease.
            Native.TakeError(Native.qb_task_release_blocking(next.Task, out err), err);
            Native.qb_task_free(next.Task);
            gate.Release(1);
        }

        /// <summary>How long a handler runs before its cancellation is watched. Most handlers
        /// finish sooner, and then no watch and no callback from a runtime thread into managed
        /// code exist at all (the Go wrapper's watchDelay). A cancellation that happened
        /// earlier is still delivered at once when the watch starts: the library fires the
        /// callback immediately for a task already cancelled. Leases are at least 300 ms, so
        /// the delay only postpones a rare signal by a few milliseconds.</summary>
        private static readonly TimeSpan WatchDelay = TimeSpan.FromMilliseconds(5);

        private static async Task RunOneAsync(Pending.Next next, TaskBody handler, Completer completer, SlotGate gate, HandlerTimes times)
        {
            IntPtr task = next.Task;
            var tx = new InboxTransaction(task);
            InboxTask inboxTask = null;
            // Set once the handle is the completer's, which frees it.
            bool handedOver = false;
            try
            {
                var cts = new CancellationTokenSource();
                Exception failure = null;
                try
                {
                    inboxTask = new InboxTask(task, next.Message);
                    Task running = handler(inboxTask, tx, cts.Token);
                    if (!running.IsCompleted
                        && await Task.WhenAny(running, Task.Delay(WatchDelay)).ConfigureAwait(false) != running)
                    {
                        IntPtr ud = Pending.Pin(cts), err;
                        Pending.Started(Native.qb_task_on_cancelled(task, Pending.Cancel, ud, out err), err, ud);
                    }
                    await running.ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    failure = e;
                }
                // The handlers' times so far go with every other finish, as with each
                // completion batch.
                if (failure != null) times.Report();
                // A cancelled task is abandoned by the library whatever is asked here.
                var retry = failure as RetryLaterException;
                var dead = failure as DeadLetterException;
                if (failure == null)
                {
                    // A plain completion goes back with others in one crossing that does not
                    // wait for the statement (Completer); the handle is the completer's now.
                    tx.Close();
                    if (inboxTask != null) inboxTask.Close();
                    handedOver = true;
                    completer.Complete(task);
                }
                // After a claim lost at the application's completion every finish answers
                // claim_lost (caught below) and writes nothing.
                else if (retry != null) await Retry(task, (ulong)retry.After.TotalMilliseconds, retry.Message).ConfigureAwait(false);
                else if (dead != null) await WithText(task, dead.Message, Native.qb_task_dead).ConfigureAwait(false);
                else await WithText(task, failure.Message, Native.qb_task_fail).ConfigureAwait(false);
            }
            catch (QueueBoxException)
            {
                // Claim lost or cancelled: the library wrote nothing (or abandoned the row); the
                // row comes back after its lease.
            }
            finally
            {
                if (!handedOver)
                {
                    tx.Close();
                    if (inboxTask != null) inboxTask.Close();
                    Native.qb_task_free(task);
                    gate.Release(1);
                }
            }
        }

        private delegate int TextCall(IntPtr task, IntPtr text, Native.DoneCallback cb, IntPtr ud, out IntPtr err);

        private static Task WithText(IntPtr task, string text, TextCall call)
        {
            var tcs = Pending.Source<bool>();
            IntPtr ctext = Native.Utf8(text ?? "");
            try
            {
                IntPtr ud = Pending.Pin(tcs), err;
                Pending.Started(call(task, ctext, Pending.Done, ud, out err), err, ud);
            }
            finally
            {
                Native.FreeUtf8(ctext);
            }
            return tcs.Task;
        }

        private static Task Retry(IntPtr task, ulong delayMs, string text)
        {
            var tcs = Pending.Source<bool>();
            IntPtr ctext = Native.Utf8(text ?? "");
            try
            {
                IntPtr ud = Pending.Pin(tcs), err;
                Pending.Started(Native.qb_task_retry(task, delayMs, ctext, Pending.Done, ud, out err), err, ud);
            }
            finally
            {
                Native.FreeUtf8(ctext);
            }
            return tcs.Task;
        }

        private Task<ulong> StartShutdown()
        {
            lock (_gate)
            {
                if (_shutdown != null) return _shutdown;
                // A hand-out loop waiting for a free handler asks the core once more, and
                // gets the empty batch that ends it.
                if (_slotGate != null) _slotGate.Stop();
                var tcs = Pending.Source<ulong>();
                IntPtr ud = Pending.Pin(tcs), err;
                Pending.Started(Native.qb_worker_shutdown(Handle, Pending.Count, ud, out err), err, ud);
                _shutdown = tcs.Task;
                return _shutdown;
            }
        }

        /// <summary>Graceful shutdown: no new claims; rows claimed but not started are
        /// released; running handlers get ShutdownGrace, then their token is cancelled and
        /// their rows abandoned (returned after the lease). Returns the number abandoned.</summary>
        public Task<ulong> ShutdownAsync()
        {
            return StartShutdown();
        }

        /// <summary>The worker's counters.</summary>
        public InboxStats GetStats()
        {
            Native.QbStats s;
            IntPtr err;
            Native.ThrowIfFailed(Native.qb_worker_stats(Handle, out s, out err), err);
            return new InboxStats
            {
                Claimed = s.Claimed, Completed = s.Completed, Retried = s.Retried, Dead = s.Dead,
                Released = s.Released, ClaimsLost = s.ClaimsLost, ClaimErrors = s.ClaimErrors, InFlight = s.InFlight,
            };
        }

        /// <summary>The worker's metrics in the Prometheus text format 0.0.4 (serve it with
        /// <c>Content-Type: text/plain; version=0.0.4; charset=utf-8</c> from the application's
        /// own endpoint): rows claimed, completed, retried, dead and released, claims lost, claim
        /// errors, lease renewals, and the claim and handler durations as histograms, labelled by
        /// source. The native core keeps and encodes them.</summary>
        public string GetMetricsText()
        {
            IntPtr text, err;
            Native.ThrowIfFailed(Native.qb_worker_metrics_text(Handle, out text, out err), err);
            return Native.TakeString(text);
        }

        /// <summary>Stops a running worker (as if its token were cancelled), waits for it, and
        /// releases the native worker and runtime.</summary>
        public void Dispose()
        {
            Task run;
            lock (_gate)
            {
                if (_worker == IntPtr.Zero) return;
                run = _run;
            }
            if (run != null)
            {
                StartShutdown();
                try { run.Wait(); } catch (AggregateException) { }
            }
            lock (_gate)
            {
                Native.qb_worker_free(_worker);
                _worker = IntPtr.Zero;
                Native.qb_runtime_free(_runtime);
                _runtime = IntPtr.Zero;
            }
            _unlog();
        }

#if NETSTANDARD2_1_OR_GREATER || NET
        /// <summary>As <see cref="Dispose"/>, awaiting the running worker instead of blocking.</summary>
        public async ValueTask DisposeAsync()
        {
            Task run;
            lock (_gate)
            {
                if (_worker == IntPtr.Zero) return;
                run = _run;
            }
            if (run != null)
            {
                StartShutdown();
                try { await run.ConfigureAwait(false); } catch (Exception) { }
            }
            Dispose();
        }
#endif
    }

    /// <summary>Calls that need no worker.</summary>
    public static class QueueBoxLibrary
    {
        /// <summary>The native library version.</summary>
        public static string Version
        {
            get { return Native.ReadUtf8(Native.qb_version()); }
        }

        /// <summary>Runs one conformance vector case (proto-docs/vectors) through the core;
        /// returns the output JSON to compare with the case's expected value.</summary>
        public static string EvaluateVector(string kind, string inputJson)
        {
            IntPtr ckind = Native.Utf8(kind), cinput = Native.Utf8(inputJson), output, err;
            try
            {
                Native.ThrowIfFailed(Native.qb_conformance_evaluate(ckind, cinput, out output, out err), err);
                return Native.TakeString(output);
            }
            finally
            {
                Native.FreeUtf8(ckind);
                Native.FreeUtf8(cinput);
            }
        }

        /// <summary>Applies the QueueBox PostgreSQL migrations (what `queuebox migrate` does);
        /// returns the report JSON. Cancelling <paramref name="cancellationToken"/> only stops
        /// the waiting (OperationCanceledException at once): the C ABI cannot stop a migration,
        /// so one already started runs on to its end (each migration commits whole, or is
        /// resumed by the next run).</summary>
        public static async Task<string> MigrateAsync(string databaseUrl, CancellationToken cancellationToken = default(CancellationToken))
        {
            IntPtr curl = Native.Utf8(databaseUrl);
            try
            {
                return await Pending.OnOwnRuntimeAsync((IntPtr rt, IntPtr ud, out IntPtr err) =>
                    Native.qb_migrate(rt, curl, Pending.String, ud, out err), cancellationToken).ConfigureAwait(false);
            }
            finally
            {
                Native.FreeUtf8(curl); // qb_migrate copies it before it returns
            }
        }
    }
}
