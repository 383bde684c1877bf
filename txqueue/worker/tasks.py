"""Tasks: plain functions sent as messages, on top of queues and handlers.

``@app.task(queue="Emails")`` turns ``def send_welcome(user_id: int) -> None`` into a `Task`.
``send_welcome.send(txn, user_id=5)`` writes a message in the caller's transaction (a `Batch`
or `Transaction`; ``send_async`` for the asyncio face), after checking the arguments against
the signature; a worker then calls ``send_welcome(user_id=5)``. Retries, dead letters, tracing
and the dashboard see an ordinary queue and handler: a task queue is one, with a standard shape
(`task_queue_ddl`) and a handler that routes each message to its task by name.

The message's payload is JSON: ``{"task": name, "version": n, "arguments": {...}}``. The
compatibility rule, for a task whose signature changes while messages wait:

- a message whose arguments still bind to the current signature runs (a parameter added with a
  default, or a widened type, needs nothing);
- one that no longer binds, or names no task of the queue, is dead-lettered at once (no retry
  can fix it), with the reason; replay it once the code takes it again;
- one sent with a higher ``version`` than the running code's (during a rolling deploy) is
  retried, under the queue's retry policy, for a newer worker to take.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from txqueue.core.schema import Dialect
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound
from txqueue.worker.outcomes import GiveUp, Retry
from txqueue.worker.task_arguments import TaskSignature

if TYPE_CHECKING:
    from txqueue._async.database import AsyncDatabase
    from txqueue._sync.database import Database
    from txqueue.models import Message

__all__ = ["Task", "TaskQueue", "new_task_id", "task_queue_ddl"]

P = ParamSpec("P")
R = TypeVar("R")

#: The key column of a task queue, by dialect, and its length.
TASK_ID_LENGTH = 128


def task_queue_ddl(queue: str, dialect: Dialect | str) -> str:
    """The standard shape of a task queue: a string key and a JSON payload.

    GoogleSQL: ``CREATE QUEUE IF NOT EXISTS Q (TaskId STRING(128) NOT NULL, Payload JSON NOT
    NULL) PRIMARY KEY (TaskId)``; PostgreSQL: ``task_id varchar(128)``, ``payload jsonb``.
    """
    if Dialect(dialect) is Dialect.POSTGRESQL:
        return (
            f"CREATE QUEUE IF NOT EXISTS {queue} (task_id varchar({TASK_ID_LENGTH}) NOT NULL, "
            "payload jsonb NOT NULL, PRIMARY KEY (task_id))"
        )
    return (
        f"CREATE QUEUE IF NOT EXISTS {queue} (TaskId STRING({TASK_ID_LENGTH}) NOT NULL, "
        "Payload JSON NOT NULL) PRIMARY KEY (TaskId)"
    )


def new_task_id() -> str:
    """A unique, time-ordered message key: 48 bits of milliseconds, then 80 random bits, in hex.

    Time order keeps the queue's index appends at its end (docs/performance.md: time-ordered
    keys are cheaper than random ones).
    """
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


class Task(Generic[P, R]):
    """A function that can also be sent as a message (see the module docstring).

    Calling the task calls the function, as before. ``send`` / ``send_async`` take the
    function's arguments, plus ``key`` (the message key: a string of at most 128 characters;
    a second send with the same key is ``AlreadyExists``, so a chosen key makes a send
    idempotent; default: a new time-ordered id) and ``deliver_time`` (a UTC ``datetime``;
    default: now).
    """

    def __init__(
        self,
        function: Callable[P, R],
        queue: TaskQueue,
        name: str,
        version: int,
    ) -> None:
        self.function = function
        self.queue = queue
        self.name = name
        self.version = version
        self.signature = TaskSignature(function, name)
        self.is_async = inspect.iscoroutinefunction(function)
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", name)
        self.__qualname__ = getattr(function, "__qualname__", name)
        self.__module__ = getattr(function, "__module__", __name__)
        self.__wrapped__ = function

    def __repr__(self) -> str:
        return f"<Task {self.name} on queue {self.queue.name} (version {self.version})>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def message(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[str], dict[str, Any], datetime | None]:
        """The key, payload and deliver time of a send with these arguments (checked here)."""
        key = kwargs.pop("key", None)
        deliver_time = kwargs.pop("deliver_time", None)
        if key is None:
            key = new_task_id()
        elif not isinstance(key, str) or not key or len(key) > TASK_ID_LENGTH:
            raise InvalidArgument(
                f"task {self.name}: key must be a non-empty string of at most "
                f"{TASK_ID_LENGTH} characters, got {key!r:.80}"
            )
        arguments = self.signature.arguments(args, kwargs)
        payload = {"task": self.name, "version": self.version, "arguments": arguments}
        return (key,), payload, deliver_time

    def send(self, txn: Any, /, *args: Any, **kwargs: Any) -> str:
        """Send a message that calls this task, in ``txn`` (a `Batch` or a `Transaction`).

        Returns the message key. The arguments are checked before anything is written.
        """
        key, payload, deliver_time = self.message(args, kwargs)
        self.queue.ensure(txn)
        txn.send(self.queue.name, key, payload, deliver_time=deliver_time)
        return key[0]

    async def send_async(self, txn: Any, /, *args: Any, **kwargs: Any) -> str:
        """``send`` in an `AsyncBatch` or an `AsyncTransaction`."""
        key, payload, deliver_time = self.message(args, kwargs)
        await self.queue.ensure_async(txn)
        sent = txn.send(self.queue.name, key, payload, deliver_time=deliver_time)
        if inspect.isawaitable(sent):  # an AsyncTransaction's send; an AsyncBatch's records
            await sent
        return key[0]

    def arguments_of(self, payload: Any) -> dict[str, Any]:
        """The arguments of a received message for this task; GiveUp or Retry when it cannot
        run here (the compatibility rule of the module docstring)."""
        version = payload.get("version", 1)
        arguments = payload.get("arguments")
        if isinstance(version, int) and version > self.version:
            raise Retry(
                reason=f"task {self.name}: message of version {version}, "
                f"this worker runs version {self.version}"
            )
        if not isinstance(arguments, dict):
            raise GiveUp(f"task {self.name}: the message has no arguments object")
        try:
            return self.signature.arguments((), arguments)
        except InvalidArgument as error:
            raise GiveUp(f"{error} (message version {version})") from None


class TaskQueue:
    """The tasks of one queue, and the handler the worker runs for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._ensured: set[int] = set()

    @property
    def is_async(self) -> bool:
        return any(task.is_async for task in self.tasks.values())

    def add(self, task: Task[Any, Any]) -> None:
        if task.name in self.tasks:
            raise InvalidArgument(f"queue {self.name!r} already has a task named {task.name!r}")
        if self.tasks and task.is_async != self.is_async:
            raise InvalidArgument(
                f"task {task.name}: queue {self.name!r} holds "
                f"{'async' if self.is_async else 'sync'} tasks; give this one its own queue"
            )
        self.tasks[task.name] = task

    def task_of(self, message: Message) -> tuple[Task[Any, Any], dict[str, Any]]:
        payload = message.payload
        name = payload.get("task") if isinstance(payload, dict) else None
        task = self.tasks.get(name) if isinstance(name, str) else None
        if task is None:
            raise GiveUp(f"queue {self.name!r} has no task named {name!r:.80}")
        return task, task.arguments_of(payload)

    def handler(self) -> Callable[[Message], Any]:
        """The queue's handler: route each message to its task and call it."""
        if self.is_async:

            async def handle_async(message: Message) -> Any:
                task, arguments = self.task_of(message)
                return await task.function(**arguments)

            handle_async.__qualname__ = handle_async.__name__ = f"tasks[{self.name}]"
            return handle_async

        def handle(message: Message) -> Any:
            task, arguments = self.task_of(message)
            return task.function(**arguments)

        handle.__qualname__ = handle.__name__ = f"tasks[{self.name}]"
        return handle

    # ---- the queue exists before the first send ----------------------------------------

    def ensure(self, txn: Any) -> None:
        """Create the queue on first use, through a batch of txqueue's own (it holds no lock
        yet); inside a transaction that may hold one, a missing queue is FailedPrecondition."""
        database: Database | None = getattr(txn, "_database", None)
        if database is None or id(database) in self._ensured:
            return
        try:
            database.queue(self.name)
        except NotFound:
            self._refuse_unless_own_batch(txn)
            database.update_ddl([task_queue_ddl(self.name, database.dialect)])
        self._ensured.add(id(database))

    async def ensure_async(self, txn: Any) -> None:
        """``ensure`` for the asyncio face."""
        database: AsyncDatabase | None = getattr(txn, "_database", None)
        if database is None or id(database) in self._ensured:
            return
        try:
            await database.queue(self.name)
        except NotFound:
            self._refuse_unless_own_batch(txn)
            await database.update_ddl([task_queue_ddl(self.name, database.dialect)])
        self._ensured.add(id(database))

    def _refuse_unless_own_batch(self, txn: Any) -> None:
        if getattr(txn, "_connection", "transaction") is None:
            return  # a batch on txqueue's own connections: nothing is locked until it commits
        raise FailedPrecondition(
            f"task queue {self.name!r} does not exist yet, and it cannot be created inside "
            "this transaction: create it first with app.create_task_queues(db) (or start "
            "`txqueue worker`, which creates it, or send once through db.batch())"
        )
