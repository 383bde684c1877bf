"""``App``: the registry of handlers a worker serves, one handler per queue.

Nothing is registered at import time of txqueue and there is no global app: an application
creates its own ``App`` and decorates its functions; ``txqueue worker module:app`` runs it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from txqueue.core.durations import to_duration
from txqueue.core.leases import DEFAULT_LEASE
from txqueue.core.retry import RetryPolicy
from txqueue.core.schema import Dialect, validate_name
from txqueue.core.values import check_count
from txqueue.errors import InvalidArgument
from txqueue.worker.cron import check_cron, zone
from txqueue.worker.tasks import Task, TaskQueue, task_queue_ddl

if TYPE_CHECKING:
    from txqueue._async.database import AsyncDatabase
    from txqueue._sync.database import Database

__all__ = ["App", "HandlerSpec", "Schedule"]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Schedule:
    """A periodic run named ``name``: every ``every`` (aligned to multiples of it since 1970),
    or at the times of the cron expression ``cron`` in the IANA zone ``timezone``."""

    name: str
    every: timedelta | None
    cron: str | None = None
    timezone: str = "UTC"


@dataclass(frozen=True)
class HandlerSpec:
    """How one queue is handled: the function and the options it was registered with."""

    queue: str
    function: Callable[..., Any]
    retry: RetryPolicy
    transactional: bool = False
    concurrency: int | None = None
    lease_duration: timedelta = DEFAULT_LEASE
    max_batch_size: int = 100
    resend_after: timedelta | None = None
    schedule: Schedule | None = None
    #: The tasks of a task queue (``App.task``): the worker creates the queue when missing.
    tasks: TaskQueue | None = None

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether the function is a coroutine function (run on the loop, not in a thread)."""
        return inspect.iscoroutinefunction(self.function)

    @property
    def name(self) -> str:
        """The function's dotted name, for logs."""
        function = self.function
        module = getattr(function, "__module__", None) or "?"
        return f"{module}.{getattr(function, '__qualname__', repr(function))}"


class App:
    """Handlers by queue, plus the database URL and clock a worker uses by default.

    ``database`` may be left out and given to the worker instead (``--database``); ``clock``
    pins "now" for tests (see ``txqueue.testing.FakeClock``).
    """

    def __init__(
        self,
        database: str | None = None,
        *,
        clock: Callable[[], datetime | None] | None = None,
    ) -> None:
        if database is not None and not isinstance(database, str):
            raise InvalidArgument("database must be a URL string")
        self.database = database
        self.clock = clock
        self._handlers: dict[str, HandlerSpec] = {}
        self._task_queues: dict[str, TaskQueue] = {}

    def __repr__(self) -> str:
        return f"App(database={self.database!r}, queues={[s.queue for s in self.handlers]})"

    @property
    def handlers(self) -> list[HandlerSpec]:
        """Every registered handler, in registration order."""
        return list(self._handlers.values())

    def handler_for(self, queue: str) -> HandlerSpec:
        """The handler registered for ``queue`` (case-insensitive)."""
        found = self._handlers.get(queue.lower()) if isinstance(queue, str) else None
        if found is None:
            raise InvalidArgument(f"no handler is registered for queue {queue!r}")
        return found

    def handler(
        self,
        queue: str,
        *,
        retry: RetryPolicy | None = None,
        transactional: bool = False,
        concurrency: int | None = None,
        lease_duration: timedelta | str = DEFAULT_LEASE,
        max_batch_size: int = 100,
        resend_after: timedelta | str | None = None,
    ) -> Callable[[F], F]:
        """Register ``function(message)`` (or ``function(message, txn)``) for ``queue``.

        ``transactional``: the handler runs inside ``run_in_transaction`` with the ack in the
        same transaction, so its writes are applied exactly once. ``concurrency`` caps this
        queue's running handlers (default: the worker's total). ``max_batch_size`` caps one
        receive (it never takes more than the free places, so a large cap hoards nothing).
        ``resend_after``: ack on
        arrival and send a copy due after that long, acked when the handler succeeds
        (at-most-once per delivery, no lease to keep; a crash or failure brings the copy back).
        """

        def register(function: F) -> F:
            self._add(
                HandlerSpec(
                    queue=_queue_name(queue),
                    function=_callable(function, 2 if transactional else 1),
                    retry=_policy(retry),
                    transactional=_flag(transactional, "transactional"),
                    concurrency=_limit(concurrency),
                    lease_duration=_lease(lease_duration),
                    max_batch_size=_batch(max_batch_size),
                    resend_after=_resend(resend_after, transactional),
                )
            )
            return function

        return register

    def periodic(
        self,
        queue: str,
        *,
        every: timedelta | str | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        transactional: bool = False,
        lease_duration: timedelta | str = DEFAULT_LEASE,
    ) -> Callable[[F], F]:
        """Register a function run once per slot through ``queue`` (Spanner's periodic-action scenario).

        The slots: ``every`` (a period, aligned to multiples of it since 1970), or ``cron`` (a
        cron expression, e.g. ``"*/5 * * * *"``) read in ``timezone`` (an IANA name, default
        UTC; see `txqueue.worker.cron` for daylight saving). Each run's message has the key
        ``(name, slot)``; the worker acks it and sends the next slot's message in one
        transaction, and seeds the first one when it starts. Keys are deterministic, so many
        workers keep exactly one chain: a duplicate send is dropped. After downtime the
        missed run happens once, late, and the chain goes on from the next future slot.
        """
        if (every is None) == (cron is None):
            raise InvalidArgument("periodic needs exactly one of every= and cron=")
        period: timedelta | None = None
        zone_name = "UTC"
        if every is not None:
            if timezone is not None:
                raise InvalidArgument("timezone applies to cron= schedules only")
            period = to_duration(every, "every")
            if period < timedelta(seconds=1):
                raise InvalidArgument(f"every must be at least 1 s, got {period}")
        else:
            zone_name = "UTC" if timezone is None else timezone
            check_cron(cron, zone(zone_name))

        def register(function: F) -> F:
            label = name if name is not None else getattr(function, "__name__", "periodic")
            if not isinstance(label, str) or not label:
                raise InvalidArgument("name must be a non-empty string")
            schedule = Schedule(label, period, cron, zone_name)
            self._add(
                HandlerSpec(
                    queue=_queue_name(queue),
                    function=_callable(function, 2 if transactional else 1),
                    retry=_policy(retry),
                    transactional=_flag(transactional, "transactional"),
                    concurrency=1,
                    lease_duration=_lease(lease_duration),
                    max_batch_size=1,
                    schedule=schedule,
                )
            )
            return function

        return register

    def task(
        self,
        queue: str | None = None,
        *,
        name: str | None = None,
        version: int = 1,
        retry: RetryPolicy | None = None,
        concurrency: int | None = None,
        lease_duration: timedelta | str | None = None,
        max_batch_size: int | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function as a task (`txqueue.worker.tasks`): ``f.send(txn, ...)`` sends
        it in the caller's transaction, a worker calls ``f(...)`` with the arguments.

        ``queue`` defaults to the function's name; several tasks may share a queue (its
        handler routes by task name) and its options (``retry``, ``concurrency``,
        ``lease_duration``, ``max_batch_size``: the first task's; a later task may leave them
        out, not change them). ``name`` (default: the function's ``__name__``) is what
        messages carry; keep it when moving the function. ``version``: raise it when a change
        of signature makes old messages unfit; see the compatibility rule.
        """
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidArgument(f"version must be a positive integer, got {version!r}")
        policy = None if retry is None else _policy(retry)
        limit = _limit(concurrency)
        lease = None if lease_duration is None else _lease(lease_duration)
        batch = None if max_batch_size is None else _batch(max_batch_size)
        given: dict[str, object] = {
            "retry": policy,
            "concurrency": limit,
            "lease_duration": lease,
            "max_batch_size": batch,
        }

        def register(function: Callable[P, R]) -> Task[P, R]:
            if not callable(function):
                raise InvalidArgument(f"a task must be callable, got {type(function).__name__}")
            label = name if name is not None else getattr(function, "__name__", None)
            if not isinstance(label, str) or not label:
                raise InvalidArgument("name must be a non-empty string")
            target = validate_name(queue if queue is not None else label, "queue name")
            tasks = self._task_queues.get(target.lower())
            spec = self._handlers.get(target.lower())
            if spec is not None and tasks is None:
                raise InvalidArgument(f"queue {target!r} already has a handler")
            if spec is not None:
                changed = [k for k, v in given.items() if v is not None and getattr(spec, k) != v]
                if changed:
                    raise InvalidArgument(
                        f"task {label}: queue {target!r} has other {', '.join(changed)}: tasks "
                        "of one queue share the first task's options (leave them out)"
                    )
            tasks = tasks if tasks is not None else TaskQueue(target)
            task = Task(function, tasks, label, version)
            tasks.add(task)  # refuses a second task of that name, or a sync/async mix
            if spec is None:
                self._task_queues[target.lower()] = tasks
                self._add(
                    HandlerSpec(
                        queue=target,
                        function=tasks.handler(),
                        retry=policy or RetryPolicy(),
                        concurrency=limit,
                        lease_duration=lease or DEFAULT_LEASE,
                        max_batch_size=batch or 100,
                        tasks=tasks,
                    )
                )
            return task

        return register

    @property
    def tasks(self) -> list[Task[Any, Any]]:
        """Every registered task, by queue then registration order."""
        return [task for queue in self._task_queues.values() for task in queue.tasks.values()]

    def task_queue_ddl(self, dialect: Dialect | str) -> list[str]:
        """``CREATE QUEUE IF NOT EXISTS`` for every task queue, in ``dialect`` (for migrations)."""
        return [task_queue_ddl(queue.name, dialect) for queue in self._task_queues.values()]

    def create_task_queues(self, database: Database) -> None:
        """Create the task queues that do not exist yet (idempotent)."""
        statements = self.task_queue_ddl(database.dialect)
        if statements:
            database.update_ddl(statements)

    async def create_task_queues_async(self, database: AsyncDatabase) -> None:
        """``create_task_queues`` for the asyncio face."""
        statements = self.task_queue_ddl(database.dialect)
        if statements:
            await database.update_ddl(statements)

    def _add(self, spec: HandlerSpec) -> None:
        if spec.queue.lower() in self._handlers:
            raise InvalidArgument(f"queue {spec.queue!r} already has a handler")
        self._handlers[spec.queue.lower()] = spec

    def run(
        self,
        *,
        database: str | None = None,
        concurrency: int = 16,
        grace: timedelta = timedelta(seconds=30),
        queues: Sequence[str] | None = None,
    ) -> None:
        """Run a worker for this app until SIGINT/SIGTERM (see ``txqueue.worker.Worker``)."""
        import asyncio

        from txqueue.worker.runtime import Worker

        worker = Worker(
            self, database=database, concurrency=concurrency, grace=grace, queues=queues
        )
        asyncio.run(worker.run())


def _queue_name(queue: object) -> str:
    if not isinstance(queue, str) or not queue:
        raise InvalidArgument("queue must be a non-empty string")
    return queue


def _callable(function: Any, arguments: int) -> Callable[..., Any]:
    if not callable(function):
        raise InvalidArgument(f"a handler must be callable, got {type(function).__name__}")
    try:
        inspect.signature(function).bind(*([None] * arguments))
    except TypeError:
        shape = "(message, txn)" if arguments == 2 else "(message)"
        raise InvalidArgument(
            f"handler {getattr(function, '__qualname__', function)!r} must accept {shape}"
        ) from None
    except ValueError:  # no signature (some builtins): trust the caller
        pass
    return function  # type: ignore[no-any-return]


def _policy(retry: object) -> RetryPolicy:
    if retry is None:
        return RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise InvalidArgument("retry must be a txqueue.RetryPolicy")
    return retry


def _flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{field} must be a bool")
    return value


def _limit(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"concurrency must be a positive integer, got {value!r}")
    return value


def _batch(value: object) -> int:
    return check_count(value, "max_batch_size")


def _lease(value: object) -> timedelta:
    lease = to_duration(value, "lease_duration")
    if lease < timedelta(seconds=1):
        raise InvalidArgument(f"lease_duration must be at least 1 s, got {lease}")
    return lease


def _resend(value: object, transactional: bool) -> timedelta | None:
    if value is None:
        return None
    if transactional:
        raise InvalidArgument("resend_after and transactional cannot be combined")
    return to_duration(value, "resend_after")
