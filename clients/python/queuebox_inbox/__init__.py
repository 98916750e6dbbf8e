"""QueueBox pull worker for Python.

The worker claims the ``pull`` rows of one inbox source, runs your handler on each and
completes, retries or dead-letters it. Claims, lease renewal, LISTEN/NOTIFY wake-ups, the
retry policy and graceful shutdown run in the Rust core through a native extension.

``complete_in`` / ``publish`` / ``publish_many`` run the core's statements on the
application's own psycopg connection or SQLAlchemy session, inside its own transaction.
"""

import atexit as _atexit
import time as _time

from . import _native
from ._app_tx import OutboxMessage, complete_in, publish, publish_many
from ._database import Database, evaluate, migrate
from ._types import InboxMessage, ResolvedOptions, RetryPolicy, WorkerStats
from ._worker import BlockingTransaction, Transaction, Worker
from .errors import (
    AlreadyFinished,
    Cancelled,
    ClaimLost,
    ConfigError,
    ConnectError,
    DatabaseError,
    Dead,
    InvalidInput,
    MigrationError,
    QueueBoxError,
    Retry,
    SchemaMissing,
)


def _at_exit() -> None:
    """Before finalization begins: let the native runtime's threads finish touching Python.
    A program that ends right after its last ``await`` otherwise aborted now and then (4 of
    60 runs of the install test's ``migrate`` step: "PyGILState_Release: thread state ...
    must be current", or a segfault in which gdb showed a runtime thread releasing a Python
    object while the main thread finalized; such a thread is stopped when it re-takes the
    GIL in a finalizing interpreter). ``quiesce`` waits, without the GIL, for the runtime's
    tasks to end (at most 250 ms); the 50 ms after it cover what is dropped once a task has
    ended, which the runtime no longer counts (quiesce alone: 3 of 40 still aborted; both: 0
    of 200). Which object outlives its task was not found."""
    _native.quiesce(250)
    _time.sleep(0.05)  # releases the GIL


_atexit.register(_at_exit)

__all__ = [
    "AlreadyFinished",
    "BlockingTransaction",
    "Cancelled",
    "ClaimLost",
    "ConfigError",
    "ConnectError",
    "Database",
    "DatabaseError",
    "Dead",
    "InboxMessage",
    "InvalidInput",
    "MigrationError",
    "OutboxMessage",
    "QueueBoxError",
    "ResolvedOptions",
    "Retry",
    "RetryPolicy",
    "SchemaMissing",
    "Transaction",
    "Worker",
    "WorkerStats",
    "complete_in",
    "evaluate",
    "migrate",
    "publish",
    "publish_many",
]
