"""The pull worker: an asyncio API (``async with Worker(...) as w: await w.run(handler)``)
and a blocking one (``Worker(...).run_blocking(handler)``), both thin loops over the core's
poll/complete interface. Claims, lease renewal, backoff and shutdown run in Rust."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import inspect
import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Coroutine, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from . import _batch, _logs, _native, _otel, _params, _payload
from ._durations import Duration, pick_ms, to_ms
from ._types import InboxMessage, ResolvedOptions, RetryPolicy, Rows, WorkerStats
from .errors import AlreadyFinished, Cancelled, ClaimLost, ConfigError, Dead, InvalidInput, QueueBoxError, Retry

_log = logging.getLogger("queuebox_inbox")


class Transaction:
    """The handler's transaction, opened on first use. Writes made through it commit with
    the message's completion and roll back with every other outcome. Placeholders are
    positional (``$1``). Parameters: ``None`` is NULL typed by the statement, ``bool``
    boolean, ``str`` text, an ``int`` that fits 64 bits bigint, every other number (larger
    ints, floats, ``decimal.Decimal``) exact ``numeric``, ``dict``/``list`` jsonb; PostgreSQL's
    assignment rules then convert to the column's type. Rows come back as ``json.loads``
    reads them: a ``numeric`` value is an ``int`` when whole, else the nearest ``float``
    (select ``v::text`` and build a ``Decimal`` for every digit)."""

    def __init__(self, task: Any) -> None:
        self._task = task

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._task.execute(sql, _params.encode(params))

    async def query(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return json.loads(await self._task.query(sql, _params.encode(params)))

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


class _running:
    """Registers ``message`` as handled (for ``complete_in``) for the ``with`` block. A class,
    not a ``@contextmanager``: it is entered once per row, and the generator cost ~0.3 µs more."""

    __slots__ = ("_key", "_entry")

    def __init__(self, message: InboxMessage, task: Any) -> None:
        self._key = id(message)
        self._entry = Running(message, task)

    def __enter__(self) -> None:
        _handling[self._key] = self._entry

    def __exit__(self, *_: Any) -> None:
        _handling.pop(self._key, None)


def running_of(message: InboxMessage) -> Running:
    """The message a handler is running on; anything else is refused naming ``message``."""
    entry = _handling.get(id(message))
    if entry is None or entry.message is not message:
        raise InvalidInput("invalid input: message: not a message a Worker handed to a running handler")
    return entry


async def _await_running(awaitable: Awaitable[Any], message: InboxMessage, task: Any) -> None:
    """Awaits what a plain-function handler returned, registered for ``complete_in`` meanwhile."""
    with _running(message, task):
        await awaitable


def _task(coro: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
    """An asyncio task for a handler; started eagerly where the event loop can (Python
    3.12+), so a handler that never suspends finishes without a trip through the loop."""
    loop = asyncio.get_running_loop()
    if _EAGER:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
    return loop.create_task(coro)


_EAGER = sys.version_info >= (3, 12)

AsyncHandler = Callable[[InboxMessage, Transaction], Awaitable[Any]]
BlockingHandler = Callable[[InboxMessage, BlockingTransaction], Any]


def _core_options(source: str, **given: Any) -> Dict[str, Any]:
    """The options as the core reads them (camelCase, durations in whole milliseconds)."""
    names = {
        "batch_size": "batchSize",
        "concurrency": "concurrency",
        "lease_ms": "leaseMs",
        "poll_interval_ms": "pollIntervalMs",
        "shutdown_grace_ms": "shutdownGraceMs",
        "listen": "listen",
        "outbox_table_name": "outboxTableName",
        "inbox_table_name": "inboxTableName",
        "column_mapping": "columnMapping",
        "otlp_endpoint": "otlpEndpoint",
        "schedules": "schedules",
    }
    out: Dict[str, Any] = {"source": source}
    for k, v in given.items():
        if k == "retry":
            if v is None:
                continue
            if isinstance(v, dict):
                try:
                    v = RetryPolicy(**v)
                except TypeError as e:
                    raise ConfigError(f"invalid configuration at `retry`: {e}") from None
            elif not isinstance(v, RetryPolicy):
                raise ConfigError(f"invalid configuration at `retry`: expected a RetryPolicy or a dict, got {type(v).__name__}")
            base, top = v._core_ms()
            r = {"maxAttempts": v.max_attempts, "baseDelayMs": base, "maxDelayMs": top, "jitter": v.jitter}
            out["retry"] = {rk: rv for rk, rv in r.items() if rv is not None}
        elif v is not None:
            out[names[k]] = v
    return out


_SCHEDULE_KEYS = {"name", "source", "cron", "payload", "priority", "headers", "missed"}


def _core_schedules(schedules: Optional[List[Dict[str, Any]]]) -> Optional[List[Dict[str, Any]]]:
    """Schedules as the core reads them: ``every`` (a duration) as ``everyMs``, ``time_zone``
    as ``timeZone``; the core validates the rest, naming ``schedules[i].key``."""
    if schedules is None:
        return None
    if not isinstance(schedules, (list, tuple)):
        raise ConfigError("invalid configuration at `schedules`: must be a list of dicts")
    out = []
    for i, s in enumerate(schedules):
        if not isinstance(s, dict):
            raise ConfigError(f"invalid configuration at `schedules[{i}]`: must be a dict")
        c: Dict[str, Any] = {}
        for k, v in s.items():
            if k == "every":
                c["everyMs"] = to_ms(f"schedules[{i}].every", v, ConfigError)
            elif k == "time_zone":
                c["timeZone"] = v
            elif k in _SCHEDULE_KEYS:
                c[k] = v
            else:
                raise ConfigError(f"invalid configuration at `schedules[{i}].{k}`: is not a schedule option")
        out.append(c)
    return out


_PY_NAMES = {
    "`batchSize`": "`batch_size`",
    "`leaseMs`": "`lease`",
    "`pollIntervalMs`": "`poll_interval`",
    "`shutdownGraceMs`": "`shutdown_grace`",
    "`retry.maxAttempts`": "`retry.max_attempts`",
    "`retry.baseDelayMs`": "`retry.base_delay`",
    "`retry.maxDelayMs`": "`retry.max_delay`",
    "`outboxTableName`": "`outbox_table_name`",
    "`inboxTableName`": "`inbox_table_name`",
    "`columnMapping": "`column_mapping",
    "`otlpEndpoint`": "`otlp_endpoint`",
    ".timeZone`": ".time_zone`",
    ".everyMs`": ".every`",
}


def _python_names(message: str) -> str:
    """The core names options as the JSON/TypeScript API does; say the Python names."""
    for camel, snake in _PY_NAMES.items():
        message = message.replace(camel, snake)
    return message


class Worker:
    """A pull worker for one source.

    Options left out take the core's defaults: ``batch_size`` adapted to ``concurrency``
    (32 × ``concurrency``, at least 1024, at most 10000: this loop adds its own time per
    row, so it needs more rows in flight than the Rust worker; ``options.batch_size`` says
    the value in force; within it the worker holds what the handlers' measured times call
    for, all of it for fast handlers, about ``concurrency`` rows for slow ones),
    ``concurrency`` 1,
    ``lease`` 30 s, ``poll_interval`` 1 s, ``shutdown_grace`` 30 s, ``listen``
    True, ``retry`` = ``RetryPolicy()`` (5 attempts, 1 s doubling to 5 min, ±20 %).
    Durations are seconds (``int`` or ``float``) or ``datetime.timedelta``, kept to the
    millisecond; the deprecated ``lease_ms`` / ``poll_interval_ms`` / ``shutdown_grace_ms``
    (milliseconds) still work and warn. Invalid options raise :class:`ConfigError` naming
    the option.

    A schema of your own (proto-docs/own-schema.md): ``outbox_table_name`` /
    ``inbox_table_name`` (``"schema.table"`` allowed) and ``column_mapping`` (``{"inbox":
    {"idempotencyKey": "key"}}``, mapping keys of proto-docs/own-schema.md); claims, completions and
    ``complete_in`` use them.

    ``payload_type``: a dataclass, a pydantic model or a callable; each handler then gets
    ``message.payload`` as that type. A payload that does not decode is dead-lettered at once
    (``invalid_payload="dead"``) or goes to the retry policy (``invalid_payload="retry"``),
    without calling the handler (see ``queuebox_inbox._payload``).

    ``tracer_provider``: an OpenTelemetry ``TracerProvider`` for the ``handle <source>`` spans
    around each handler call (default: the one the application set with
    ``opentelemetry.trace.set_tracer_provider``; none set, no spans; see ``_otel``).

    ``otlp_endpoint``: an OpenTelemetry collector's base URL (``http://host:4318``); each
    message is handled in a ``handle`` span exported there over OTLP/HTTP and
    ``message.traceparent`` is that span's context. ``None`` means
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, else no tracing.

    ``schedules``: periodic schedules the worker runs beside its claims, from ``connect``
    until ``shutdown``, each a dict ``{"name", "source", "cron" (with an optional
    "time_zone") or "every" (a duration, at least 0.1 s), "payload", "priority"?,
    "headers"?, "missed"?: "latest" | "skip"}``. Each tick enqueues one pull row, once
    however many workers and relays run the same schedule (docs/operations.md, "Schedules").
    """

    def __init__(
        self,
        database_url: str,
        source: str,
        *,
        batch_size: Optional[int] = None,
        concurrency: Optional[int] = None,
        lease: Optional[Duration] = None,
        poll_interval: Optional[Duration] = None,
        shutdown_grace: Optional[Duration] = None,
        listen: Optional[bool] = None,
        retry: Union[RetryPolicy, Dict[str, Any], None] = None,
        logger: Optional[logging.Logger] = None,
        outbox_table_name: Optional[str] = None,
        inbox_table_name: Optional[str] = None,
        column_mapping: Optional[Dict[str, Dict[str, str]]] = None,
        otlp_endpoint: Optional[str] = None,
        schedules: Optional[List[Dict[str, Any]]] = None,
        payload_type: Any = None,
        invalid_payload: str = "dead",
        tracer_provider: Any = None,
        lease_ms: Optional[int] = None,
        poll_interval_ms: Optional[int] = None,
        shutdown_grace_ms: Optional[int] = None,
    ) -> None:
        if not isinstance(database_url, str) or not database_url.strip():
            raise ConfigError("invalid configuration at `databaseUrl`: is required")
        core = _core_options(
            source,
            batch_size=batch_size,
            concurrency=concurrency,
            lease_ms=pick_ms("lease", lease, "lease_ms", lease_ms, ConfigError),
            poll_interval_ms=pick_ms("poll_interval", poll_interval, "poll_interval_ms", poll_interval_ms, ConfigError),
            shutdown_grace_ms=pick_ms("shutdown_grace", shutdown_grace, "shutdown_grace_ms", shutdown_grace_ms, ConfigError),
            listen=listen,
            retry=retry,
            outbox_table_name=outbox_table_name,
            inbox_table_name=inbox_table_name,
            column_mapping=column_mapping,
            otlp_endpoint=otlp_endpoint,
            schedules=_core_schedules(schedules),
        )
        # What connect() passes: the options as given, so that an unset batch stays the
        # core's adaptive one (not the resolved number, which the core reads as explicit).
        self._core_json = json.dumps(core)
        try:
            self._options_json = _native.resolve_options(self._core_json)
        except QueueBoxError as e:
            raise type(e)(_python_names(str(e))) from None
        self.options = ResolvedOptions.from_json(self._options_json)
        if invalid_payload not in _payload.INVALID_PAYLOAD:
            raise ConfigError(f"invalid configuration at `invalid_payload`: must be \"dead\" or \"retry\", got {invalid_payload!r}")
        self._decode = _payload.decoder(payload_type)
        self._payload_name = _payload.type_name(payload_type)
        self._invalid_payload = invalid_payload
        self._tracer_provider = tracer_provider
        self._url = database_url
        self._log = logger or _log
        _logs.register(self.options.source, logger)
        self._native: Any = None
        self._shutdown: Optional["asyncio.Future[Any]"] = None
        # For stop() from any thread: the running loop and what stops the run, while one runs.
        self._running_on: Optional[Tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = None
        self._stop_asked = False
        self._run_ended = threading.Event()
        self._run_ended.set()

    # -- lifecycle ---------------------------------------------------------------------

    async def connect(self) -> "Worker":
        """Connects (and checks the schema); ``async with`` does it for you."""
        if self._native is None:
            # The native worker hands out up to its whole batch (one crossing carries many rows
            # even at concurrency 1); the run loop keeps `concurrency` handlers running.
            self._native = await _native.connect_worker(self._url, self._core_json)
            self._shutdown = None
        return self

    async def __aenter__(self) -> "Worker":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Graceful shutdown: stop claiming, release claimed rows that never started, wait
        ``shutdown_grace`` for running handlers, abandon the rest. Idempotent."""
        if self._native is None:
            return
        if self._shutdown is None:
            self._shutdown = asyncio.ensure_future(self._native.shutdown())
        await asyncio.shield(self._shutdown)

    def stop(self) -> None:
        """Asks the running ``run`` / ``run_blocking`` to stop, as setting its ``stop=`` event
        does (graceful: see :meth:`shutdown`), and returns at once. Safe from any thread and
        from a signal handler. Asked before the run starts, the run stops as soon as it has
        started; a later run is not affected."""
        self._stop_asked = True
        running = self._running_on
        if running is not None:
            loop, stop_now = running
            try:
                loop.call_soon_threadsafe(stop_now)
            except RuntimeError:
                pass  # the loop has closed: that run has ended

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        """Stops a run still going (``run_blocking`` on another thread) and waits for its
        graceful shutdown to end."""
        if self._running_on is not None:
            self.stop()
            self._run_ended.wait()

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
        ``concurrency`` worker threads) until ``stop`` is set, :meth:`stop` is called (from
        another thread or a signal handler) or Ctrl-C, then shuts down gracefully. ``tx`` is
        a :class:`BlockingTransaction`. No event loop of yours is needed (nor allowed to be
        running on this thread)."""
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

        try:
            asyncio.run(main())
        finally:
            self._run_ended.set()

    async def _run(self, handler: Callable[..., Any], stop: Optional[asyncio.Event], pool: Optional[ThreadPoolExecutor]) -> None:
        if not callable(handler):
            raise TypeError("the handler must be callable")
        handler = _otel.traced(handler, self.options.source, self._tracer_provider)
        owned = self._native is None
        await self.connect()
        native = self._native
        # Handlers that are running (or run on a thread), by sequence number, for the watch.
        running: Dict[int, Tuple[Any, "asyncio.Future[Any]"]] = {}
        in_flight: Set["asyncio.Future[Any]"] = set()
        # Handed out, not started yet (no handler slot was free).
        queued: Deque[Tuple[Any, InboxMessage, int]] = collections.deque()
        slots = self.options.concurrency
        # Successes wait for the handlers queued behind them to share one crossing, up to
        # `concurrency` tasks (at least 16) and never more than half the core's slots (the
        # batch), which the waiting rows still hold.
        held = min(max(16, slots), max(1, self.options.batch_size // 2))
        completions = _batch.Completions(native, self._log, more_soon=lambda: bool(queued), limit=held)
        watcher = asyncio.ensure_future(_batch.watch_cancelled(native, running))

        def track(f: "asyncio.Future[Any]") -> None:
            in_flight.add(f)
            f.add_done_callback(in_flight.discard)

        def release_queued() -> None:
            # Never started: back to pending at once, no attempt spent (as the core does with
            # the rows it claimed and never handed out).
            while queued:
                task, message, _ = queued.popleft()
                track(asyncio.ensure_future(self._finish(task, message, None)))

        # A plain function given to run() is called right here in the loop: no asyncio task.
        inline = pool is None and not inspect.iscoroutinefunction(handler)
        wants_work = asyncio.Event()

        def wants_more() -> bool:
            # Rows still queued: the handlers have work while the core claims the next rows,
            # so ask now (the core claims once half its batch is free). Asking only once the
            # queue was empty left the loop idle for a claim's round trip after every batch, a
            # third of a no-op run at concurrency 8 (py-spy). Nothing queued: ask only for a
            # free handler slot, as the Rust worker claims for free slots: a worker whose
            # handlers are all busy (or stuck) takes no rows it cannot start.
            return bool(queued) or len(running) < slots

        def start_queued() -> None:
            if self._shutdown is not None:
                release_queued()  # a shutdown begun elsewhere (Worker.shutdown, __aexit__)
            while len(running) < slots and queued:
                task, message, seq = queued.popleft()
                if task.is_cancelled():
                    # The lease was lost while it waited: give it up without running it.
                    track(asyncio.ensure_future(task.abandon()))
                    continue
                rest = None
                started = time.perf_counter()
                if inline:
                    rest = self._call_inline(task, message, handler, completions, track, started)
                    if rest is None:
                        continue
                work = self._start(task, message, seq, handler, pool, running, rest)
                in_flight.add(work)
                # One done callback per handler task: CPython runs each callback as a Handle of
                # its own on the loop; three (settle, untrack, start the next) made a no-op
                # task cost ~16 µs here instead of ~8 (CPython 3.11, micro-benchmark).
                work.add_done_callback(lambda w, t=task, m=message, n=seq, s=started: ended(t, m, n, s, w))
            if wants_more():
                wants_work.set()

        def ended(task: Any, message: InboxMessage, seq: int, started: float, work: "asyncio.Future[Any]") -> None:
            completions.ran(time.perf_counter() - started)
            self._settle(task, message, seq, work, running, completions)
            in_flight.discard(work)
            start_queued()

        def stop_now() -> None:
            # Shutdown makes the pending next_batch answer None, which ends the loop.
            self._begin_shutdown()
            release_queued()
            wants_work.set()

        stop_wait = asyncio.ensure_future(stop.wait()) if stop is not None else None
        if stop_wait is not None:
            stop_wait.add_done_callback(lambda f: f.cancelled() or stop_now())
        self._run_ended.clear()
        self._running_on = (asyncio.get_running_loop(), stop_now)
        if self._stop_asked:
            stop_now()
        cancelled = False
        try:
            while True:
                if not wants_more():
                    while self._shutdown is None and not wants_more():
                        wants_work.clear()
                        await wants_work.wait()
                    # A slot came free: the core frees its slots as rows complete, so send
                    # the completions that wait before asking.
                    completions.flush()
                # One crossing hands out a batch: whatever the core has claimed, up to the batch.
                batch = await native.next_batch(self.options.batch_size)
                if batch is None:
                    break
                tasks, messages_json, first_seq = batch
                decode = self._decode
                for i, (task, raw) in enumerate(zip(tasks, json.loads(messages_json))):
                    message = InboxMessage.from_dict(raw)
                    if decode is not None:
                        typed, refused = self._typed(message, decode)
                        if typed is None:
                            track(asyncio.ensure_future(self._finish(task, message, refused)))
                            continue
                        message = typed
                    queued.append((task, message, (first_seq + i) & 0xFFFFFFFF))
                if self._shutdown is not None:
                    release_queued()
                else:
                    start_queued()
        except asyncio.CancelledError:
            cancelled = True
        finally:
            if stop_wait is not None:
                stop_wait.cancel()
            self._begin_shutdown()
            release_queued()
            await self.shutdown()
            while in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
            await completions.idle()
            native.close_cancelled()
            await asyncio.gather(watcher, return_exceptions=True)
            if owned and pool is None:
                self._native = None
            self._running_on = None
            self._stop_asked = False
            if pool is None:
                self._run_ended.set()  # run_blocking's ends once its loop has closed
        if cancelled:
            raise asyncio.CancelledError()

    def _typed(self, message: InboxMessage, decode: Callable[[Any], Any]) -> Tuple[Optional[InboxMessage], Optional[BaseException]]:
        """``message`` with its payload decoded by ``payload_type``, or (None, how to finish
        the row) when it does not decode: Dead, or an error for the retry policy (_payload)."""
        try:
            payload = decode(message.payload)
        except Exception as e:  # noqa: BLE001 (any validation error, pydantic's included)
            reason = f"payload is not a valid {self._payload_name}: {type(e).__name__}: {e}"
            self._log.warning("message %s: %s", message.id, reason)
            return None, (Dead(reason) if self._invalid_payload == "dead" else ValueError(reason))
        return dataclasses.replace(message, payload=payload), None

    def _begin_shutdown(self) -> None:
        if self._native is not None and self._shutdown is None:
            self._shutdown = asyncio.ensure_future(self._native.shutdown())

    def _call_inline(
        self,
        task: Any,
        message: InboxMessage,
        handler: Callable[..., Any],
        completions: _batch.Completions,
        track: Callable[["asyncio.Future[Any]"], None],
        started: float,
    ) -> Optional[Awaitable[Any]]:
        """Calls a plain-function handler in the loop (``started`` at ``perf_counter()``)
        and finishes its task; when the function returned an awaitable (a lambda around a
        coroutine), returns what is left to await, which needs a task of its own."""
        try:
            with _running(message, task):
                r = handler(message, Transaction(task))
        except Exception as e:
            completions.ran(time.perf_counter() - started)
            track(asyncio.ensure_future(self._finish(task, message, e)))
            return None
        if inspect.isawaitable(r):
            return r
        completions.ran(time.perf_counter() - started)
        completions.add(task, message.id)
        return None

    def _start(
        self,
        task: Any,
        message: InboxMessage,
        seq: int,
        handler: Callable[..., Any],
        pool: Optional[ThreadPoolExecutor],
        running: Dict[int, Tuple[Any, "asyncio.Future[Any]"]],
        rest: Optional[Awaitable[Any]] = None,
    ) -> "asyncio.Future[None]":
        """Starts the handler on one task (or awaits ``rest``, what a plain function
        returned), as an asyncio task (eagerly, up to its first suspension, where the event
        loop can: Python 3.12+), registered in ``running`` for the cancellation watch. The
        caller settles it when it is done (:meth:`_settle`)."""
        work = _task(_await_running(rest, message, task) if rest is not None else self._invoke(handler, message, Transaction(task), pool))
        running[seq] = (task, work)
        if task.is_cancelled():
            work.cancel()
        return work

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

    def _settle(
        self,
        task: Any,
        message: InboxMessage,
        seq: int,
        work: "asyncio.Future[Any]",
        running: Dict[int, Tuple[Any, "asyncio.Future[Any]"]],
        completions: _batch.Completions,
    ) -> None:
        """Finishes a task by its handler's outcome, once the handler's task is done."""
        running.pop(seq, None)
        if work.cancelled():
            # Lease lost or grace over: write nothing; the row comes back after its lease.
            completions.track(task.abandon())
            return
        e = work.exception()
        if e is None:
            completions.add(task, message.id)
        else:
            completions.track(self._finish(task, message, e))

    async def _finish(self, task: Any, message: InboxMessage, e: Optional[BaseException]) -> None:
        """Finishes a task whose handler raised ``e``, or releases one that never ran
        (``e`` None, at shutdown), one native call."""
        try:
            if e is None:
                await task.release()
            elif isinstance(e, Retry):
                await (task.fail(e.reason) if e._ms is None else task.retry(e._ms, e.reason))
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
