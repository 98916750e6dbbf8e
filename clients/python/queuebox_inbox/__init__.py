"""QueueBox pull worker for Python.

The worker claims the ``pull`` rows of one inbox source, runs your handler on each and
completes, retries or dead-letters it. Claims, lease renewal, LISTEN/NOTIFY wake-ups, the
retry policy and graceful shutdown run in the Rust core through a native extension.
"""

from ._database import Database, evaluate, migrate
from ._types import InboxMessage, ResolvedOptions, RetryPolicy, WorkerStats
from ._worker import BlockingTransaction, Transaction, Worker
from .errors import ClaimLost, Dead, QueueBoxError, Retry

__all__ = [
    "BlockingTransaction",
    "ClaimLost",
    "Database",
    "Dead",
    "InboxMessage",
    "QueueBoxError",
    "ResolvedOptions",
    "Retry",
    "RetryPolicy",
    "Transaction",
    "Worker",
    "WorkerStats",
    "evaluate",
    "migrate",
]
