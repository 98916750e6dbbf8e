"""QueueBox pull worker for Python.

The worker claims the ``pull`` rows of one inbox source, runs your handler on each and
completes, retries or dead-letters it. Claims, lease renewal, LISTEN/NOTIFY wake-ups, the
retry policy and graceful shutdown run in the Rust core through a native extension.

``complete_in`` / ``publish`` / ``publish_many`` run the core's statements on the
application's own psycopg connection or SQLAlchemy session, inside its own transaction.
"""

import atexit as _atexit

from . import _native
from ._app_tx import Enqueued, EnqueueMessage, OutboxMessage, complete_in, enqueue, enqueue_many, publish, publish_many
from ._database import BlockingDatabase, CancelCounts, Database, evaluate, migrate, migrate_blocking
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
    """Stops the native runtime before finalization begins (exit handlers run first), with
    the GIL released, so that none of its threads is left to take the GIL in a finalizing
    interpreter, which CPython ends with ``pthread_exit`` through Rust frames: an abort.
    The cause and the fix are described in bindings/python/src/rt.rs."""
    _native.shutdown(2000)


_atexit.register(_at_exit)

__all__ = [
    "AlreadyFinished",
    "BlockingDatabase",
    "BlockingTransaction",
    "CancelCounts",
    "Cancelled",
    "ClaimLost",
    "ConfigError",
    "ConnectError",
    "Database",
    "DatabaseError",
    "Dead",
    "EnqueueMessage",
    "Enqueued",
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
    "enqueue",
    "enqueue_many",
    "evaluate",
    "migrate",
    "migrate_blocking",
    "publish",
    "publish_many",
]
