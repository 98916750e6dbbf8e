"""What lets the worker loop cross into the native extension once per batch rather than per
row: completions sent together, and one cancellation watch for the whole worker."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

# Kinds of a finish that wrote nothing on purpose: fenced out, finished already, or cancelled.
QUIET = frozenset(("claim_lost", "already_finished", "cancelled"))

#: The longest a succeeded task waits for others to share its ``complete_all`` (seconds);
#: its row stays leased meanwhile (the lease is renewed by the core).
HOLD_S = 0.001


class Completions:
    """Completes the tasks whose handlers succeeded in batches: one ``complete_all`` call
    (one awaitable, one batched statement in the core) for many tasks instead of one
    ``complete()`` per row. Each task keeps its own fence, so a lost claim fails only that
    task; only :meth:`idle` waits (for these and for the other finishes handed to :meth:`track`).

    A batch is sent at the end of the event-loop turn that filled it, unless ``more_soon()``
    says handlers are queued to run next: then it waits for up to ``limit`` tasks or
    :data:`HOLD_S`, whichever comes first. At concurrency 1 each turn finishes one handler,
    so without the wait every row would cross (and wake the runtime) on its own.
    Once the queue runs dry the batch goes at the end of the turn, so the core gets its slots
    back for the claim the worker's pending ``next_batch`` waits on."""

    def __init__(self, native: Any, log: logging.Logger, more_soon: Optional[Callable[[], bool]] = None, limit: int = 1) -> None:
        self._native = native
        self._log = log
        self._more_soon = more_soon
        self._limit = max(1, limit)
        self._tasks: List[Any] = []
        self._ids: List[str] = []
        self._scheduled: Optional[asyncio.Handle] = None
        self._flushing: "set[asyncio.Future[Any]]" = set()
        # Handlers finished since the last report, and their time in all (seconds).
        self._ran = 0
        self._ran_s = 0.0

    def ran(self, seconds: float) -> None:
        """Counts one handler's run (any outcome) for the next report to the core, which
        sizes what it claims ahead of the handlers by their time (the core cannot see it:
        the handlers run here). Reported with the next batch of completions or failure."""
        self._ran += 1
        self._ran_s += seconds

    def _report(self) -> None:
        if self._ran:
            self._native.handlers_took(self._ran, self._ran_s)
            self._ran, self._ran_s = 0, 0.0

    def add(self, task: Any, message_id: str) -> None:
        self._tasks.append(task)
        self._ids.append(message_id)
        if len(self._tasks) >= self._limit:
            self.flush()
        elif self._scheduled is None:
            loop = asyncio.get_running_loop()
            if self._more_soon is not None and self._more_soon():
                self._scheduled = loop.call_later(HOLD_S, self.flush)
            else:
                self._scheduled = loop.call_soon(self.flush)

    def track(self, finish: Awaitable[Any]) -> None:
        """Keeps a finish that is not a batched completion (a failure, an abandon) for
        :meth:`idle` to wait for."""
        self._report()
        f = asyncio.ensure_future(finish)
        self._flushing.add(f)
        f.add_done_callback(self._flushing.discard)

    async def idle(self) -> None:
        """Returns once every queued completion has been answered."""
        while self._tasks or self._flushing:
            self.flush()
            if self._flushing:
                await asyncio.wait(set(self._flushing))

    def flush(self) -> None:
        """Sends the completions gathered so far now (one ``complete_all``)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        if not self._tasks:
            return
        self._report()
        tasks, ids = self._tasks, self._ids
        self._tasks, self._ids = [], []
        answer = asyncio.ensure_future(self._native.complete_all(tasks))
        self._flushing.add(answer)
        answer.add_done_callback(lambda f: self._answered(f, tasks, ids))

    def _answered(self, answer: "asyncio.Future[Any]", tasks: List[Any], ids: List[str]) -> None:
        self._flushing.discard(answer)
        if answer.cancelled() or answer.exception() is not None:
            # The call itself failed (not one task): nothing completed; the rows come back
            # after their lease. Abandoning settles the tasks so shutdown does not wait.
            reason = "cancelled" if answer.cancelled() else str(answer.exception())
            for task, message_id in zip(tasks, ids):
                self._warn(message_id, reason)
                self.track(task.abandon())
            return
        for message_id, outcome in zip(ids, answer.result()):
            # The core settled the task either way; a failed one's row returns after its lease.
            if outcome is not None and outcome[0] not in QUIET:
                self._warn(message_id, f"{outcome[0]}: {outcome[1]}")

    def _warn(self, message_id: str, error: str) -> None:
        self._log.warning("could not finish message %s (%s); it will be redelivered after its lease", message_id, error)


async def watch_cancelled(native: Any, running: Dict[int, Tuple[Any, "asyncio.Future[Any]"]]) -> None:
    """Cancels each running handler whose task the core cancelled (lease lost, shutdown's
    grace over): one pending ``next_cancelled`` for the whole worker instead of one awaitable
    per task. Ends when the run closes it (``close_cancelled``)."""
    while True:
        seqs = await native.next_cancelled()
        if not seqs:
            return
        for seq in seqs:
            entry = running.get(seq)
            if entry is not None:
                entry[1].cancel()
