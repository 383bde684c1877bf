"""txqueue: queues inside your own SQL database, with Cloud Spanner queue semantics.

A queue is a table; a message is sent in the same transaction as your business rows, received
under a lease, and acknowledged (deleted) at most once. SQLite and PostgreSQL, sync and asyncio.
"""

import importlib
from typing import TYPE_CHECKING, Any

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
from txqueue.models import (
    DeadLetter,
    Failure,
    LeaseRenewal,
    Message,
    QueueInfo,
    ResultSet,
    StoredMessage,
)
from txqueue.worker import App, GiveUp, Retry

if TYPE_CHECKING:  # the event layer needs the "events" extra, so it is imported on first use
    from txqueue.events._async.events import AsyncEvents
    from txqueue.events._sync.events import Events
    from txqueue.events.dispatcher import AsyncDispatcher
    from txqueue.events.dispatcher_thread import Dispatcher
    from txqueue.events.records import ArchivedMessage, DeliveryAttempt, UndeliveredMessage
    from txqueue.events.resources import Bus, Enrollment, Pipeline
    from txqueue.events.signing import verify as verify_signature

_EVENT_LAYER = {
    "ArchivedMessage": ("txqueue.events.records", "ArchivedMessage"),
    "AsyncDispatcher": ("txqueue.events.dispatcher", "AsyncDispatcher"),
    "AsyncEvents": ("txqueue.events._async.events", "AsyncEvents"),
    "Bus": ("txqueue.events.resources", "Bus"),
    "DeliveryAttempt": ("txqueue.events.records", "DeliveryAttempt"),
    "Dispatcher": ("txqueue.events.dispatcher_thread", "Dispatcher"),
    "Enrollment": ("txqueue.events.resources", "Enrollment"),
    "Events": ("txqueue.events._sync.events", "Events"),
    "Pipeline": ("txqueue.events.resources", "Pipeline"),
    "UndeliveredMessage": ("txqueue.events.records", "UndeliveredMessage"),
    "verify_signature": ("txqueue.events.signing", "verify"),
}


def __getattr__(name: str) -> Any:
    """Import the event layer's names on first use (they need the ``events`` extra)."""
    if name not in _EVENT_LAYER:
        raise AttributeError(f"module 'txqueue' has no attribute {name!r}")
    module, attribute = _EVENT_LAYER[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "App",
    "ArchivedMessage",
    "AsyncBatch",
    "AsyncDatabase",
    "AsyncDispatcher",
    "AsyncEvents",
    "AsyncSnapshot",
    "AsyncTransaction",
    "Batch",
    "Bus",
    "Database",
    "DeadLetter",
    "DeliveryAttempt",
    "Dialect",
    "Dispatcher",
    "Enrollment",
    "Events",
    "Failure",
    "GiveUp",
    "LeaseRenewal",
    "Message",
    "Pipeline",
    "QueueInfo",
    "ResultSet",
    "Retry",
    "RetryPolicy",
    "Snapshot",
    "StoredMessage",
    "Transaction",
    "UndeliveredMessage",
    "__version__",
    "connect",
    "connect_async",
    "errors",
    "verify_signature",
]
