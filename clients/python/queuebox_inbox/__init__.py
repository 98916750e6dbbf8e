"""QueueBox pull worker for Python.

The worker claims the ``pull`` rows of one inbox source, runs your handler on each and
completes, retries or dead-letters it. Claims, lease renewal, LISTEN/NOTIFY wake-ups, the
retry policy and graceful shutdown run in the Rust core through a native extension.

``complete_in`` / ``publish`` / ``publish_many`` run the core's statements on the
application's own psycopg connection or SQLAlchemy session, inside its own transaction.
"""

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
