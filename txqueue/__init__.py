"""txqueue: queues inside your own SQL database, with Cloud Spanner queue semantics.

A queue is a table; a message is sent in the same transaction as your business rows, received
under a lease, and acknowledged (deleted) at most once. SQLite and PostgreSQL, sync and asyncio.
"""

from txqueue import errors
from txqueue._async.database import (
    AsyncBatch,
    AsyncDatabase,
    AsyncSnapshot,
    AsyncTransaction,
    connect_async,
)
from txqueue._sync.database import Batch, Database, Snapshot, Transaction, connect
from txqueue.core.retry import RetryPolicy
from txqueue.core.schema import Dialect
from txqueue.models import DeadLetter, LeaseRenewal, Message, QueueInfo, ResultSet

__version__ = "0.1.0"

__all__ = [
    "AsyncBatch",
    "AsyncDatabase",
    "AsyncSnapshot",
    "AsyncTransaction",
    "Batch",
    "Database",
    "DeadLetter",
    "Dialect",
    "LeaseRenewal",
    "Message",
    "QueueInfo",
    "ResultSet",
    "RetryPolicy",
    "Snapshot",
    "Transaction",
    "__version__",
    "connect",
    "connect_async",
    "errors",
]
