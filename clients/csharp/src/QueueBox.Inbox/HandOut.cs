using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace QueueBox.Inbox
{
    /// <summary>The worker is a hand-out worker (the <c>handOut</c> option, proto-docs/ffi.md):
    /// the core hands out whatever it claimed, up to its whole batch, in one crossing; the
    /// tasks wait in this queue for one of MaxConcurrency handler loops. What the core claims
    /// ahead of the handlers is sized by their times, which it cannot see and is told
    /// (<see cref="HandlerTimes"/>). The Go wrapper's Run works the same way.</summary>
    internal sealed class HandOutQueue
    {
        private readonly ConcurrentQueue<Pending.Next> _tasks = new ConcurrentQueue<Pending.Next>();
        // One count per queued task, and one per handler loop once the queue closed.
        private readonly SemaphoreSlim _available = new SemaphoreSlim(0);
        private volatile bool _closed;

        internal int Count { get { return _tasks.Count; } }

        internal bool Closed { get { return _closed; } }

        internal void Add(Pending.Next next)
        {
            _tasks.Enqueue(next);
            _available.Release();
        }

        /// <summary>The next task, or null once the queue is closed and empty. A handler loop
        /// that gets null ends.</summary>
        internal async Task<Pending.Next> TakeAsync()
        {
            await _available.WaitAsync().ConfigureAwait(false);
            Pending.Next next;
            // Empty only after Close: until then every count stands for a queued task (the
            // loop's own TryTake runs only after the last Add).
            return _tasks.TryDequeue(out next) ? next : null;
        }

        /// <summary>For the loop at shutdown: a queued task, without a count (so the counts
        /// outnumber the tasks from here on, and handler loops find the queue empty).</summary>
        internal bool TryTake(out Pending.Next next)
        {
            return _tasks.TryDequeue(out next);
        }

        /// <summary>No more tasks: wakes every handler loop (after its remaining tasks).</summary>
        internal void Close(int loops)
        {
            _closed = true;
            _available.Release(loops);
        }
    }

    /// <summary>Keeps the hand-out loop from asking the core for tasks while every handler is
    /// busy and no task waits: a worker whose handlers are stuck must not take rows it cannot
    /// start (they would wait behind the stuck ones while other workers could run them). While
    /// tasks wait, the loop asks at once, so the core claims the next rows while these run.
    /// A task counts from its hand-out until its finish began (the completer's hand-over
    /// returned) or it was released.</summary>
    internal sealed class SlotGate
    {
        private readonly long _slots;
        // How many tasks the loop took; only the loop reads or writes it.
        private long _out;
        // How many of them gave their slot back.
        private long _finished;
        // 1 while the loop sleeps in Wait; whoever swaps it to 0 owes it one _wake count.
        private int _waiting;
        private volatile bool _stopped;
        private readonly SemaphoreSlim _wake = new SemaphoreSlim(0);

        internal SlotGate(int slots)
        {
            _slots = slots;
        }

        /// <summary>Blocks the loop's own thread until a handler is free or a task waits, or
        /// the worker stops.</summary>
        internal void Wait(Func<int> queued)
        {
            while (!_stopped && queued() == 0 && _out - Interlocked.Read(ref _finished) >= _slots)
            {
                Interlocked.Exchange(ref _waiting, 1);
                // A slot given back between the check and the flag would be missed: look again.
                if (_stopped || _out - Interlocked.Read(ref _finished) < _slots)
                {
                    // Taking the flag back fails if a releaser took it: then its count is ours.
                    if (Interlocked.Exchange(ref _waiting, 0) == 0) _wake.Wait();
                    continue;
                }
                _wake.Wait();
            }
        }

        internal void Took(int n)
        {
            _out += n;
        }

        internal void Release(int n)
        {
            Interlocked.Add(ref _finished, n);
            Wake();
        }

        /// <summary>The worker is stopping: Wait returns at once from now on.</summary>
        internal void Stop()
        {
            _stopped = true;
            Wake();
        }

        private void Wake()
        {
            if (Volatile.Read(ref _waiting) == 1 && Interlocked.Exchange(ref _waiting, 0) == 1) _wake.Release();
        }
    }

    /// <summary>The handlers' run times, passed to the core (qb_worker_handlers_took) with each
    /// hand-over of completions and each other finish: the core sizes what it claims ahead of
    /// the handlers by them (about MaxConcurrency rows for slow handlers, the whole batch for
    /// fast ones). A run counted between the two swaps in Report lands its time in this report
    /// and its count in the next: a skew of one run.</summary>
    internal sealed class HandlerTimes
    {
        private readonly IntPtr _worker;
        private long _runs;
        private long _ticks;

        internal HandlerTimes(IntPtr worker)
        {
            _worker = worker;
        }

        /// <summary>Counts one handler run (any outcome), measured in Stopwatch ticks.</summary>
        internal void Ran(long ticks)
        {
            Interlocked.Add(ref _ticks, ticks);
            Interlocked.Increment(ref _runs);
        }

        internal void Report()
        {
            long runs = Interlocked.Exchange(ref _runs, 0);
            if (runs == 0) return;
            double seconds = (double)Interlocked.Exchange(ref _ticks, 0) / Stopwatch.Frequency;
            IntPtr err;
            // Refused only for a negative or non-finite time, which Stopwatch never gives.
            Native.TakeError(Native.qb_worker_handlers_took(_worker, (ulong)runs, seconds, out err), err);
        }
    }
}
