"""The pull worker: an asyncio API (``async with Worker(...) as w: await w.run(handler)``)
and a blocking one (``Worker(...).run_blocking(handler)``), both thin loops over the core's
poll/complete interface. Claims, lease renewal, backoff and shutdown run in Rust."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Dict, Iterator, Optional, Sequence, Set, Union

from . import _native
from ._types import InboxMessage, ResolvedOptions, RetryPolicy, Rows, WorkerStats
from .errors import AlreadyFinished, Cancelled, ClaimLost, ConfigError, Dead, InvalidInput, QueueBoxError, Retry

_log = logging.getLogger("queuebox_inbox")


class Transaction:
    """The handler's transaction, opened on first use. Writes made through it commit with
    the message's completion and roll back with every other outcome. Placeholders are
    positional (``$1``); parameters are JSON values (str → text, int → int8, dict/list → jsonb)."""

    def __init__(self, task: Any) -> None:
        self._task = task

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._task.execute(sql, json.dumps(list(params)))

    async def query(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return json.loads(await self._task.query(sql, json.dumps(list(params))))

    @property
    def cancelled(self) -> bool:
        """True once the lease is lost or shutdown's grace ran out: stop, nothing will be completed."""
        return bool(self._task.is_cancelled())


class BlockingTransaction:
    """:class:`Transaction` for a blocking handler running on a worker thread; each call
    waits (without the GIL) for the worker's event loop to run it."""

    def __init__(self, tx: Transaction, loop: asyncio.AbstractEventLoop) -> None:
        self._tx = tx
        self._loop = loop

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return asyncio.run_coroutine_threadsafe(self._tx.execute(sql, params), self._loop).result()

    def query(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return asyncio.run_coroutine_threadsafe(self._tx.query(sql, params), self._loop).result()

    @property
    def cancelled(self) -> bool:
        return self._tx.cancelled


class Running:
    """A message a handler is running on, with its claimed task (for ``complete_in``)."""

    def __init__(self, message: InboxMessage, task: Any) -> None:
        self.message = message
        self.task = task
        #: Set once ``complete_in``'s completion affected its row in an application transaction.
        self.completed = False


# Keyed by the message object's id and dropped when the handler function returns.
# (InboxMessage is a frozen dataclass holding a dict, so it cannot key a WeakKeyDictionary.)
_handling: Dict[int, Running] = {}


@contextmanager
def _running(message: InboxMessage, task: Any) -> Iterator[None]:
    _handling[id(message)] = Running(message, task)
    try:
        yield
    finally:
        _handling.pop(id(message), None)


def running_of(message: InboxMessage) -> Running:
    """The message a handler is running on; anything else is refused naming ``message``."""
    entry = _handling.get(id(message))
    if entry is None or entry.message is not message:
        raise InvalidInput("invalid input: message: not a message a Worker handed to a running handler")
    return entry


AsyncHandler = Callable[[InboxMessage, Transaction], Awaitable[Any]]
BlockingHandler = Callable[[InboxMessage, BlockingTransaction], Any]


def _core_options(source: str, **given: Any) -> Dict[str, Any]:
    names = {
        "batch_size": "batchSize",
        "concurrency": "concurrency",
        "lease_ms": "leaseMs",
        "poll_interval_ms": "pollIntervalMs",
        "shutdown_grace_ms": "shutdownGraceMs",
        "listen": "listen",
    }
    out: Dict[str, Any] = {"source": source}
    for k, v in given.items():
        if k == "retry":
            if v is None:
                continue
            if isinstance(v, RetryPolicy):
                v = {"max_attempts": v.max_attempts, "base_delay_ms": v.base_delay_ms, "max_delay_ms": v.max_delay_ms, "jitter": v.jitter}
            elif not isinstance(v, dict):
                raise TypeError("retry must be a RetryPolicy or a dict")
            rn = {"max_attempts": "maxAttempts", "base_delay_ms": "baseDelayMs", "max_delay_ms": "maxDelayMs", "jitter": "jitter"}
            out["retry"] = {rn.get(rk, rk): rv for rk, rv in v.items() if rv is not None}
        elif v is not None:
            out[names[k]] = v
    return out


_PY_NAMES = {
    "`batchSize`": "`batch_size`",
    "`leaseMs`": "`lease_ms`",
    "`pollIntervalMs`": "`poll_interval_ms`",
    "`shutdownGraceMs`": "`shutdown_grace_ms`",
    "`retry.maxAttempts`": "`retry.max_attempts`",
    "`retry.baseDelayMs`": "`retry.base_delay_ms`",
    "`retry.maxDelayMs`": "`retry.max_delay_ms`",
}


def _python_names(message: str) -> str:
    """The core names options as the JSON/TypeScript API does; say the Python names."""
    for camel, snake in _PY_NAMES.items():
        message = message.replace(camel, snake)
    return message


class Worker:
    """A pull worker for one source.

    Options left out take the core's defaults: ``batch_size`` 10, ``concurrency`` 1,
    ``lease_ms`` 30000, ``poll_interval_ms`` 1000, ``shutdown_grace_ms`` 30000, ``listen``
    True, ``retry`` = ``RetryPolicy()`` (5 attempts, 1 s doubling to 5 min, ±20 %). Invalid
    options raise :class:`QueueBoxError` with ``kind == "config"`` naming the option.
    """

    def __init__(
        self,
        database_url: str,
        source: str,
        *,
        batch_size: Optional[int] = None,
        concurrency: Optional[int] = None,
        lease_ms: Optional[int] = None,
        poll_interval_ms: Optional[int] = None,
        shutdown_grace_ms: Optional[int] = None,
        listen: Optional[bool] = None,
        retry: Union[RetryPolicy, Dict[str, Any], None] = None,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        if not isinstance(database_url, str) or not database_url.strip():
            raise ConfigError("invalid configuration at `databaseUrl`: is required")
        core = _core_options(
            source,
            batch_size=batch_size,
            concurrency=concurrency,
            lease_ms=lease_ms,
            poll_interval_ms=poll_interval_ms,
            shutdown_grace_ms=shutdown_grace_ms,
            listen=listen,
            retry=retry,
        )
        try:
            self._options_json = _native.resolve_options(json.dumps(core))
        except QueueBoxError as e:
            raise type(e)(_python_names(str(e))) from None
        self.options = ResolvedOptions.from_json(self._options_json)
        self._url = database_url
        self._log = logger or _log
        self._native: Any = None
        self._shutdown: Optional["asyncio.Future[Any]"] = None

    # -- lifecycle ---------------------------------------------------------------------

    async def connect(self) -> "Worker":
        """Connects (and checks the schema); ``async with`` does it for you."""
        if self._native is None:
            self._native = await _native.connect_worker(self._url, self._options_json)
            self._shutdown = None
        return self

    async def __aenter__(self) -> "Worker":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Graceful shutdown: stop claiming, release claimed rows that never started, wait
        ``shutdown_grace_ms`` for running handlers, abandon the rest. Idempotent."""
        if self._native is None:
            return
        if self._shutdown is None:
            self._shutdown = asyncio.ensure_future(self._native.shutdown())
        await asyncio.shield(self._shutdown)

    def stats(self) -> Optional[WorkerStats]:
        return None if self._native is None else WorkerStats.from_json(self._native.stats_json())

    def metrics(self) -> Optional[str]:
        """The worker's metrics in the Prometheus text format 0.0.4 (serve it with
        ``Content-Type: text/plain; version=0.0.4; charset=utf-8`` from the application's own
        HTTP server): rows claimed, completed, retried, dead and released, claims lost, claim
        errors, lease renewals, and the claim and handler durations as histograms, labelled by
        source. The native core keeps and encodes them. None before the worker starts."""
        return None if self._native is None else self._native.metrics_text()

    # -- running -----------------------------------------------------------------------

    async def run(self, handler: AsyncHandler, *, stop: Optional[asyncio.Event] = None) -> None:
        """Runs ``handler(message, tx)`` on every claimed message until ``stop`` is set or
        the calling task is cancelled, then shuts down gracefully (a cancellation is
        re-raised once that is done). Return normally to complete the message inside ``tx``;
        raise :class:`Retry` or :class:`Dead` to choose; any other exception goes to the
        retry policy. A handler whose lease is lost (or outlives the grace) is cancelled and
        its message abandoned."""
        await self._run(handler, stop, None)

    def run_blocking(self, handler: BlockingHandler, *, stop: Optional[threading.Event] = None) -> None:
        """The blocking API: runs ``handler(message, tx)`` (a plain function, on
        ``concurrency`` worker threads) until ``stop`` is set or Ctrl-C, then shuts down
        gracefully. ``tx`` is a :class:`BlockingTransaction`."""
        if self._native is not None:
            raise InvalidInput("invalid input: run_blocking needs a worker that is not connected in an event loop")

        async def main() -> None:
            astop = asyncio.Event()
            watcher = None
            if stop is not None:

                async def watch() -> None:
                    while not stop.is_set():
                        await asyncio.sleep(0.05)
                    astop.set()

                watcher = asyncio.ensure_future(watch())
            pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="queuebox")
            try:
                await self._run(handler, astop, pool)
            finally:
                if watcher is not None:
                    watcher.cancel()
                pool.shutdown(wait=False)
                self._native = None

        asyncio.run(main())

    async def _run(self, handler: Callable[..., Any], stop: Optional[asyncio.Event], pool: Optional[ThreadPoolExecutor]) -> None:
        if not callable(handler):
            raise TypeError("the handler must be callable")
        owned = self._native is None
        await self.connect()
        native = self._native
        in_flight: Set["asyncio.Task[None]"] = set()
        stop_wait = asyncio.ensure_future(stop.wait()) if stop is not None else None
        cancelled = False
        try:
            while True:
                nxt = asyncio.ensure_future(native.next())
                if stop_wait is not None and not nxt.done():
                    await asyncio.wait({nxt, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    if stop_wait.done() and self._shutdown is None:
                        self._shutdown = asyncio.ensure_future(native.shutdown())
                task = await nxt
                if task is None:
                    break
                t = asyncio.ensure_future(self._run_one(task, handler, pool))
                in_flight.add(t)
                t.add_done_callback(in_flight.discard)
        except asyncio.CancelledError:
            cancelled = True
        finally:
            if stop_wait is not None:
                stop_wait.cancel()
            await self.shutdown()
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
            if owned and pool is None:
                self._native = None
        if cancelled:
            raise asyncio.CancelledError()

    async def _invoke(self, handler: Callable[..., Any], message: InboxMessage, tx: Transaction, pool: Optional[ThreadPoolExecutor]) -> None:
        if pool is not None:
            loop = asyncio.get_running_loop()
            btx = BlockingTransaction(tx, loop)

            def call() -> Any:
                # Registered until the function returns: a cancelled blocking handler goes on
                # running on its thread, and its complete_in must reach the core (Cancelled).
                with _running(message, tx._task):
                    return handler(message, btx)

            await loop.run_in_executor(pool, call)
            return
        with _running(message, tx._task):
            r = handler(message, tx)
            if inspect.isawaitable(r):
                await r

    async def _run_one(self, task: Any, handler: Callable[..., Any], pool: Optional[ThreadPoolExecutor]) -> None:
        message = InboxMessage.from_json(task.message_json())
        work = asyncio.ensure_future(self._invoke(handler, message, Transaction(task), pool))
        lost = asyncio.ensure_future(task.cancelled())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done() and lost.result():
                # Lease lost or grace over: stop the handler, write nothing.
                work.cancel()
                await task.abandon()
                await asyncio.gather(work, return_exceptions=True)
                return
            await asyncio.wait({work})
            await self._finish(task, message, work)
        finally:
            if not lost.done():
                lost.cancel()

    async def _finish(self, task: Any, message: InboxMessage, work: "asyncio.Future[None]") -> None:
        try:
            if work.cancelled():
                await task.abandon()
                return
            e = work.exception()
            if e is None:
                await task.complete()
            elif isinstance(e, Retry):
                await task.fail(e.reason) if e.delay_ms is None else task.retry(e.delay_ms, e.reason)
            elif isinstance(e, Dead):
                await task.dead(e.reason)
            elif isinstance(e, Exception):
                await task.fail(str(e) or type(e).__name__)
            else:
                await task.abandon()
        except QueueBoxError as err:
            # Nothing was written: fenced out, finished already, or cancelled meanwhile (the
            # core then abandoned the task itself; a cancelled task may only be abandoned).
            if isinstance(err, (ClaimLost, AlreadyFinished, Cancelled)):
                return
            self._log.warning("could not finish message %s (%s); it will be redelivered after its lease", message.id, err)
            await task.abandon()
