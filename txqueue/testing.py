"""Helpers for testing applications built on txqueue: a fake clock and ``drain``.

    clock = FakeClock()
    app = App(url, clock=clock)           # or txqueue.connect(url, clock=clock)
    ...send messages...
    outcomes = drain(app, "UserTasks")    # handlers run until nothing is ready
    assert [o.kind for o in outcomes] == [OutcomeKind.ACKED]

``drain`` uses the worker's own rules (the same code), without background lease renewal:
with a ``FakeClock`` leases expire only when the clock is moved.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from txqueue._async.database import AsyncDatabase, connect_async
from txqueue._sync.database import Database, connect
from txqueue.core.durations import require_aware
from txqueue.core.retry import RetryPolicy
from txqueue.errors import InvalidArgument
from txqueue.models import Message
from txqueue.worker.app import App, HandlerSpec
from txqueue.worker.concurrency import DaemonThreadPool
from txqueue.worker.database_access import AsyncDatabaseAccess, DatabaseAccess, SyncDatabaseAccess
from txqueue.worker.leases import Lease
from txqueue.worker.outcomes import Outcome, OutcomeKind
from txqueue.worker.process import Handling, process
from txqueue.worker.scenarios import schedule_send, seed_run

__all__ = ["FakeClock", "drain", "drain_async"]

_READY_NOW = timedelta(milliseconds=1)


class FakeClock:
    """A clock that moves only when told: pass it as ``clock=`` to ``connect`` or ``App``.

    It starts one minute ahead of the machine's clock by default: txqueue's own sends take
    "now" from it, while rows inserted with plain SQL are stamped by the database's clock,
    and so are ready at once too.
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            start = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=1)
        self._now = require_aware(start, "start")
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self().isoformat()})"

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (timezone-aware)."""
        moment = require_aware(moment, "moment")
        with self._lock:
            self._now = moment

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by ``delta`` (a timedelta or seconds); returns the new time."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=float(delta))
        if step < timedelta(0):
            raise InvalidArgument("a FakeClock does not go backwards: use set()")
        with self._lock:
            self._now += step
            return self._now


def drain(
    target: App | Database,
    queue: str,
    handler: App | Callable[..., Any] | None = None,
    *,
    retry: RetryPolicy | None = None,
    clock: FakeClock | None = None,
    advance_clock: bool = True,
    max_deliveries: int = 1000,
) -> list[Outcome]:
    """Run the handler of ``queue`` on every ready message until none is ready; the outcomes.

    ``target`` is an ``App`` (its URL, clock and handler) or a ``Database``, then with
    ``handler`` (a function, or an App whose handler for ``queue`` is used). With a
    ``FakeClock`` and ``advance_clock``, the clock jumps to each retry the drain scheduled, so
    a whole retry history plays out in one call. Runs on its own thread and event loop, so it
    works from sync and async tests alike.
    """
    result: list[list[Outcome]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(
                asyncio.run(
                    drain_async(
                        target,
                        queue,
                        handler,
                        retry=retry,
                        clock=clock,
                        advance_clock=advance_clock,
                        max_deliveries=max_deliveries,
                    )
                )
            )
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, name="txqueue-drain")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


async def drain_async(
    target: App | Database | AsyncDatabase,
    queue: str,
    handler: App | Callable[..., Any] | None = None,
    *,
    retry: RetryPolicy | None = None,
    clock: FakeClock | None = None,
    advance_clock: bool = True,
    max_deliveries: int = 1000,
) -> list[Outcome]:
    """``drain`` for async tests (``target`` may also be an ``AsyncDatabase``)."""
    spec = _spec(target, queue, handler, retry)
    if clock is None and isinstance(target, App) and isinstance(target.clock, FakeClock):
        clock = target.clock
    pool = DaemonThreadPool(4, name="txqueue-drain")
    opened: AsyncDatabase | None = None
    access: DatabaseAccess | None = None
    try:
        if isinstance(target, App):
            url = target.database
            if url is None:
                raise InvalidArgument("the App has no database URL: drain(db, queue, app)")
            opened = await connect_async(url, clock=target.clock)
            access = AsyncDatabaseAccess(opened, pool, lambda: connect(url, clock=target.clock))
        elif isinstance(target, AsyncDatabase):
            access = AsyncDatabaseAccess(target, pool)
        elif isinstance(target, Database):
            access = SyncDatabaseAccess(target)
        else:
            raise InvalidArgument("drain needs an App, a Database or an AsyncDatabase")
        return await _drain(access, spec, clock if advance_clock else None, max_deliveries)
    finally:
        pool.shutdown()
        if opened is not None:
            await opened.close()
        if opened is not None and isinstance(access, AsyncDatabaseAccess):
            access.close_sync()


def _spec(target: object, queue: str, handler: object, retry: RetryPolicy | None) -> HandlerSpec:
    if handler is None:
        if not isinstance(target, App):
            raise InvalidArgument("drain(db, queue, handler): give the handler (or an App)")
        return target.handler_for(queue)
    if isinstance(handler, App):
        return handler.handler_for(queue)
    if not callable(handler):
        raise InvalidArgument("handler must be a function or an App")
    app = App()
    app.handler(queue, retry=retry)(handler)
    return app.handler_for(queue)


async def _drain(
    access: DatabaseAccess, spec: HandlerSpec, clock: FakeClock | None, limit: int
) -> list[Outcome]:
    if spec.schedule is not None:
        table = await access.queue(spec.queue)
        await access.apply(
            [schedule_send(table, spec.schedule, seed_run(spec.schedule, access.now()))]
        )
    outcomes: list[Outcome] = []
    retries: list[datetime] = []
    while len(outcomes) < limit:
        message = await _receive_one(access, spec)
        if message is None:
            now = access.now()
            upcoming = [due for due in retries if due > now]
            if clock is None or not upcoming:
                break
            clock.set(min(upcoming))
            retries = [due for due in upcoming if due > min(upcoming)]
            continue
        token = message.lease_token

        async def settle(token: str = token) -> str | None:
            return token

        handling = Handling(spec, message, Lease(message, spec.lease_duration), settle)
        outcome = await process(handling, access)
        outcomes.append(outcome)
        if outcome.kind is OutcomeKind.RETRIED and outcome.delay is not None:
            retries.append(access.now() + outcome.delay)
    return outcomes


async def _receive_one(access: DatabaseAccess, spec: HandlerSpec) -> Message | None:
    if isinstance(access, SyncDatabaseAccess):
        stream = access.database.receive(
            spec.queue, max_duration=_READY_NOW, lease_duration=spec.lease_duration
        )
        try:
            return next(iter(stream), None)
        finally:
            stream.close()  # type: ignore[attr-defined]
    assert isinstance(access, AsyncDatabaseAccess)
    astream = access.database.receive(
        spec.queue, max_duration=_READY_NOW, lease_duration=spec.lease_duration
    )
    try:
        async for message in astream:
            return message
        return None
    finally:
        await astream.aclose()  # type: ignore[attr-defined]
