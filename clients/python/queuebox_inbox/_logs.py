"""The Rust core's log records (an unreachable database, lost claims, retries, dead-lettered
messages, dead-owner recovery) in Python's ``logging``.

The core queues each record without touching the GIL (a record is often emitted on a runtime
thread while a Python thread holds the GIL and waits for that runtime); one daemon thread here
drains the queue (``_native.next_log_records`` waits with the GIL released) and logs each
record. A record whose ``source`` field names a worker made with ``logger=`` goes to that
logger; the rest go to ``logging.getLogger("queuebox_inbox")``. The record's fields
(``message_id``, ``source``, ``topic``, ``attempt``, ``error``, ``reason``, ``target``...)
are attributes of the ``LogRecord`` (through ``extra``), and all of them together are
``record.queuebox``.

The level filter runs in Rust, at the most verbose level any of these loggers had enabled
when the last worker was created: set levels before creating workers.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from typing import Any, Dict, Optional

from . import _native

_default = logging.getLogger("queuebox_inbox")
_by_source: Dict[str, logging.Logger] = {}
_lock = threading.Lock()
_thread: Optional[threading.Thread] = None
# Set at interpreter exit: the drain thread must be gone before finalization, or its return
# from the native wait (which re-takes the GIL) aborts a finalizing interpreter.
_stopping = threading.Event()
_installed = 0  # the core's minimum level installed; 0 before the first

# The core's levels (1 error .. 5 trace) as logging's.
_LEVELS = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: logging.DEBUG - 5}
# LogRecord attributes a field must not overwrite (``extra`` refuses them): such a field is
# given as ``qb_<name>``.
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _core_level(logger: logging.Logger) -> int:
    """The core level that forwards everything ``logger`` has enabled."""
    for core, level in sorted(_LEVELS.items(), reverse=True):
        if logger.isEnabledFor(level):
            return core
    return 1


def register(source: str, logger: Optional[logging.Logger]) -> None:
    """Sends the records of ``source`` to ``logger`` (the package logger when None) and
    makes sure forwarding runs at a level every logger in use is served by."""
    global _thread, _installed
    with _lock:
        if logger is not None:
            _by_source[source] = logger
        want = max(_core_level(lg) for lg in [_default, *_by_source.values()])
        if want != _installed:
            _native.set_log_level(want)
            _installed = want
        if _thread is None:
            _thread = threading.Thread(target=_drain, name="queuebox-logs", daemon=True)
            _thread.start()
            atexit.register(_stop)


def _stop() -> None:
    """At exit: let the drain thread finish its last wait (at most 250 ms) and end."""
    _stopping.set()
    if _thread is not None:
        _thread.join(2)


def _emit(level: int, target: str, message: str, fields_json: str) -> None:
    fields: Dict[str, Any] = json.loads(fields_json)
    fields["target"] = target
    source = fields.get("source")
    logger = _by_source.get(source, _default) if isinstance(source, str) else _default
    extra = {("qb_" + k if k in _RESERVED else k): v for k, v in fields.items()}
    extra["queuebox"] = fields
    logger.log(_LEVELS.get(level, logging.DEBUG), message, extra=extra)


def _drain() -> None:
    dropped = 0
    while not _stopping.is_set():
        for record in _native.next_log_records(250):
            try:
                _emit(*record)
            except Exception:  # a handler's failure must not stop forwarding
                _default.exception("could not log a QueueBox record")
        # The core's queue is bounded (it never blocks the core); say when it overflowed.
        now = _native.dropped_log_records()
        if now != dropped:
            _default.warning("%d QueueBox log records were dropped: the logging thread fell behind", now - dropped)
            dropped = now
