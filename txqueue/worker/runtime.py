"""The worker runtime: one asyncio process serving every queue of an ``App``.

One receive loop per queue feeds handler tasks. Running handlers are capped per queue and in
total; a queue with work receives batches sized to the free places, an idle queue waits on a
one-message stream (woken by sends) without holding a place. Leases are kept alive by one
``LeaseRenewer`` per queue and acks are group-committed by one ``AckBatcher``.

Shutdown (SIGINT/SIGTERM, or ``stop()``): receiving stops, running handlers get ``grace`` to
finish, the leases of those that did not are released (visible again at once), and ``run``
returns. A second signal skips the rest of the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from txqueue import telemetry
from txqueue._async.database import AsyncDatabase, connect_async
from txqueue._sync.database import connect
from txqueue.core.text import printable
from txqueue.drivers.engines import traits_named, with_pool_size
from txqueue.errors import InvalidArgument, NotFound, TxqueueError
from txqueue.models import Message
from txqueue.worker.acks import AckBatcher
from txqueue.worker.app import App
from txqueue.worker.concurrency import DaemonThreadPool, Slots, cancel_and_wait
from txqueue.worker.database_access import AsyncDatabaseAccess
from txqueue.worker.leases import Lease, LeaseRenewer
from txqueue.worker.observe import Stats
from txqueue.worker.outcomes import Outcome, OutcomeKind
from txqueue.worker.process import Handling, process
from txqueue.worker.registry import HEARTBEAT, Registration, check_heartbeat
from txqueue.worker.scenarios import schedule_send, seed_run
from txqueue.worker.served_queue import ServedQueue

__all__ = ["Worker"]

log = logging.getLogger("txqueue.worker")
T = TypeVar("T")

#: How long an idle queue's one-message stream waits before it is opened again.
IDLE_WAIT = timedelta(seconds=5)
#: A receive that only takes what is ready now (one database round trip).
READY_NOW = timedelta(milliseconds=1)
#: A busy queue waits up to this long for a fuller batch of free places before receiving.
FILL_WITHIN = 0.002
#: How often queue counts are read for metrics and the status line.
POLL_SECONDS = 2.0
#: At shutdown, how long a cancelled task may run on before it is cancelled again
#: (``concurrency.cancel_and_wait``). Handlers get longer: cancelled, they release their
#: leases, which a second cancel would cut short.
BACKGROUND_NUDGE_SECONDS = 0.5
HANDLER_NUDGE_SECONDS = 5.0
#: The log level of each outcome (others: WARNING).
_LEVELS = {
    OutcomeKind.ACKED: logging.DEBUG,
    OutcomeKind.RETRIED: logging.WARNING,
    OutcomeKind.DEAD_LETTERED: logging.ERROR,
}


class Worker:
    """Serves the handlers of ``app`` until stopped; see the module docstring.

    ``database`` overrides the app's URL; ``queues`` restricts the worker to some queues.
    ``prefetch`` is how many messages a queue may receive ahead of its free places: they wait,
    their leases kept alive, for a handler to finish, so the next batch is on hand when places
    free up. By default a queue receives ahead only while its handlers are quick (see
    ``QUICK``), as many as they finish within that time, up to a full receive (its
    ``max_batch_size``) with the running ones; 0 receives only what can start at once.
    ``heartbeat`` is how often it writes its row in the worker registry (``registry``).
    """

    def __init__(
        self,
        app: App,
        *,
        database: str | None = None,
        concurrency: int = 16,
        grace: timedelta = timedelta(seconds=30),
        queues: Sequence[str] | None = None,
        stats: Stats | None = None,
        ack_window: float = 0.005,
        prefetch: int | None = None,
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgument(f"concurrency must be a positive integer, got {concurrency!r}")
        if prefetch is not None and (
            isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0
        ):
            raise InvalidArgument(f"prefetch must be a non-negative integer, got {prefetch!r}")
        if not isinstance(grace, timedelta) or grace < timedelta(0):
            raise InvalidArgument("grace must be a non-negative datetime.timedelta")
        url = database or app.database
        if not url:
            raise InvalidArgument("no database: give the App a URL or pass --database")
        specs = app.handlers if queues is None else [app.handler_for(q) for q in queues]
        if not specs:
            raise InvalidArgument("the app has no handlers: decorate functions with @app.handler")
        self.app = app
        self.url = url
        self.concurrency = concurrency
        self.grace = grace
        self.specs = specs
        self.stats = stats or Stats()
        self._ack_window = ack_window
        self.prefetch = prefetch
        self.heartbeat = check_heartbeat(heartbeat)  # of the worker registry
        self._stopping = asyncio.Event()
        self._force = asyncio.Event()
        self._running = Slots(concurrency)
        self._tasks: dict[int, asyncio.Task[None]] = {}  # by id() of their Handling
        self._waiting: set[int] = set()  # deliveries received ahead, waiting for a place
        self._abandoned_in_transaction = False
        self._starting: asyncio.Task[None] | None = None  # run()'s task until the worker starts

    def stop(self) -> None:
        """Begin a graceful shutdown; a second call skips the rest of the grace period."""
        if self._stopping.is_set():
            log.warning("stopping now: the leases of running handlers are released")
            self._force.set()
        elif self._starting is not None:  # nothing received yet: the start-up is abandoned
            log.info("stopping during start-up")
            self._stopping.set()
            self._starting.cancel()
        else:
            log.info("stopping: no more receives; waiting for running handlers")
            self._stopping.set()

    async def run(self) -> None:
        """Serve until ``stop()`` (or SIGINT/SIGTERM in the main thread), then shut down.

        A stop during the start-up (the connect, the queue checks) cancels it and returns.
        """
        self._install_signals()
        self._starting = asyncio.current_task()
        try:
            await self._serve()
        except asyncio.CancelledError:
            task = self._starting
            if task is None or not self._stopping.is_set():
                raise  # cancelled from outside, or after the start: not ours to swallow
            if hasattr(task, "uncancel"):  # Python 3.11+: the cancel was ours and is handled
                task.uncancel()
        finally:
            self._starting = None
            self._remove_signals()

    async def _serve(self) -> None:
        database = await connect_async(
            with_pool_size(self.url, self.concurrency + len(self.specs) + 4), clock=self.app.clock
        )
        pool = DaemonThreadPool(self.concurrency)
        acks = AckBatcher(database, window=self._ack_window)
        clock = self.app.clock
        sync_url = with_pool_size(self.url, self.concurrency + 2)
        access = AsyncDatabaseAccess(database, pool, lambda: connect(sync_url, clock=clock), acks)
        self._access = access
        self._one_writer = asyncio.Lock() if traits_named(database.engine).one_writer else None
        background: list[asyncio.Task[Any]] = []
        frozen = started = False
        names = [spec.queue for spec in self.specs]
        registration = Registration(database, self.stats, names, self.concurrency, self.heartbeat)
        try:
            queues = await self._prepare(database, access)
            background.append(asyncio.create_task(registration.run()))
            acks.start()
            for queue in queues:
                background.append(asyncio.create_task(queue.renewer.run(), name="txqueue-leases"))
            background.append(asyncio.create_task(self._poll(database, queues)))
            # What exists now lives as long as the worker: out of the cyclic GC's full
            # collections, which would otherwise rescan it every few thousand messages.
            gc.freeze()
            frozen = True
            loops = [asyncio.create_task(self._receive_loop(database, q)) for q in queues]
            log.info(
                "worker started",
                extra={
                    "queues": [q.spec.queue for q in queues],
                    "concurrency": self.concurrency,
                    "pid": os.getpid(),
                },
            )
            started = True
            self._starting = None
            self.stats.started(queues=[q.spec.queue for q in queues], concurrency=self.concurrency)
            await self._stopping.wait()
            await asyncio.gather(*loops, return_exceptions=True)
            await self._drain_handlers()
        finally:
            if frozen:
                gc.unfreeze()  # collectable again, as before the worker started
            await cancel_and_wait(background, nudge=BACKGROUND_NUDGE_SECONDS)
            await acks.close()
            await registration.remove()
            pool.shutdown()
            if not self._abandoned_in_transaction:  # else its thread still uses that pool
                await asyncio.to_thread(access.close_sync)
            await database.close()
            if started:  # a worker that never started (a queue missing) did not stop either
                log.info("worker stopped", extra={"pid": os.getpid()})

    async def _prepare(
        self, database: AsyncDatabase, access: AsyncDatabaseAccess
    ) -> list[ServedQueue]:
        queues = []
        for spec in self.specs:
            try:
                if spec.tasks is not None:  # a task queue is created on first use
                    await spec.tasks.ensure_async(database.batch())
                table = await database.queue(spec.queue)
            except NotFound:
                raise InvalidArgument(
                    f"handler {spec.name} is registered for queue {spec.queue!r}, which does not "
                    "exist in this database (create it with CREATE QUEUE)"
                ) from None
            if spec.schedule is not None:
                slot = seed_run(spec.schedule, access.now())
                await access.apply([schedule_send(table, spec.schedule, slot)])
                self.stats.sent(spec.queue)

            def lost(lease: Lease, queue: str = spec.queue) -> None:
                self.stats.lease_lost(queue)

            async def renew(
                tokens: Sequence[str], extension: timedelta, q: str = spec.queue
            ) -> Any:
                return await database.renew_lease(q, tokens, extension)

            renewer = LeaseRenewer(spec.queue, spec.lease_duration, renew, lost)
            limit = min(spec.concurrency or self.concurrency, self.concurrency)
            queues.append(ServedQueue(spec, renewer, limit, self.prefetch))
        return queues

    # ---- receiving ----------------------------------------------------------------------

    async def _receive_loop(self, database: AsyncDatabase, queue: ServedQueue) -> None:
        busy, failures = True, 0
        while not self._stopping.is_set():
            try:
                if busy:
                    busy = await self._receive_ready(database, queue)
                else:
                    busy = await self._receive_idle(database, queue)
                failures = 0
            except Exception as error:  # database down, or a bug: keep serving, slower
                failures += 1
                wait = min(0.5 * 2**failures, 30.0)
                log.warning(
                    "receive failed (%s); trying again in %.1f s",
                    printable(error),
                    wait,
                    exc_info=not isinstance(error, TxqueueError | OSError),
                    extra={"queue": queue.spec.queue, "error": repr(error)},
                )
                await self._until_stopped(asyncio.sleep(wait))

    async def _receive_ready(self, database: AsyncDatabase, queue: ServedQueue) -> bool:
        """Take what is ready now, as many as the queue may hold; True if any."""
        ahead = queue.ahead(time.monotonic())
        queue.held.size = queue.limit + ahead  # hold at most the limit plus ``ahead``
        take = queue.held.take(queue.spec.max_batch_size, fill_within=FILL_WITHIN)
        # Free places: taking them waits FILL_WITHIN at most, so no stop watch is needed.
        room = await (take if queue.held.free else self._until_stopped(take))
        if room is None:
            return False
        reserved = 0
        if not ahead:  # receive only what can start at once: take the places first
            if room > queue.running.free:
                queue.held.give(room - queue.running.free)
                room = queue.running.free
            if room == 0:  # every place of the queue is busy (received ahead before)
                await self._until_stopped(queue.running.wait_free())
                return True
            take_running = self._running.take(room)
            running = await (
                take_running if self._running.free else self._until_stopped(take_running)
            )
            if running is None:
                queue.held.give(room)
                return False
            queue.held.give(room - running)
            room = reserved = running
        try:
            messages = await self._receive(database, queue, room, READY_NOW)
        except BaseException:
            queue.held.give(room)
            self._running.give(reserved)
            raise
        queue.held.give(room - len(messages))
        self._running.give(max(reserved - len(messages), 0))
        for index, message in enumerate(messages):
            self._start(queue, message, reserved=index < reserved)
        return bool(messages)

    async def _receive_idle(self, database: AsyncDatabase, queue: ServedQueue) -> bool:
        """Wait for one message (sends wake the stream) without holding a running place."""
        if await self._until_stopped(queue.held.take(1)) is None:
            return False
        try:
            messages = await self._until_stopped(self._receive(database, queue, 1, IDLE_WAIT))
        except BaseException:
            queue.held.give(1)
            raise
        if not messages:
            queue.held.give(1)
            return False
        self._start(queue, messages[0], reserved=False)
        return True

    async def _receive(
        self, database: AsyncDatabase, queue: ServedQueue, count: int, wait: timedelta
    ) -> list[Message]:
        spec = queue.spec
        if wait == READY_NOW:  # busy: take the next batch in one statement, no stream
            ready = await database.receive_now(
                spec.queue, max_batch_size=count, lease_duration=spec.lease_duration
            )
            if ready:
                self.stats.received(spec.queue, len(ready))
            return ready
        stream = database.receive(
            spec.queue, max_duration=wait, max_batch_size=count, lease_duration=spec.lease_duration
        )
        messages: list[Message] = []
        try:
            async for message in stream:
                messages.append(message)
                if message.last_in_batch or len(messages) >= count:
                    break
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if messages:
            self.stats.received(spec.queue, len(messages))
        return messages

    async def _until_stopped(self, awaitable: Awaitable[T]) -> T | None:
        """Await ``awaitable`` unless the worker starts stopping first (then cancel it)."""
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task.done():
            return task.result()
        task.cancel()
        try:
            return await task  # a receive that finished meanwhile still hands its messages over
        except asyncio.CancelledError:
            return None

    # ---- handling -----------------------------------------------------------------------

    def _start(self, queue: ServedQueue, message: Message, reserved: bool) -> None:
        """Start delivering ``message``; ``reserved``: it holds a worker place already."""
        lease = queue.renewer.track(message)
        handling = Handling(
            queue.spec, message, lease, functools.partial(queue.renewer.settle, lease)
        )
        in_queue = queue.running.take_now()
        in_worker = reserved or (in_queue and self._running.take_now())
        delivery = self._deliver(queue, handling, in_queue, in_worker)
        self._tasks[id(handling)] = asyncio.create_task(delivery)

    async def _deliver(
        self, queue: ServedQueue, handling: Handling, in_queue: bool, in_worker: bool
    ) -> None:
        """Run one delivery once it has a running place in its queue and in the worker; its
        places are given back when the handler ends (before the ack commits, so group commit
        overlaps the next handlers) or at the latest at the end."""
        held = {"worker": in_worker, "queue": in_queue, "held": True, "counted": False}

        def give_back() -> None:
            if held["counted"]:
                held["counted"] = False
                self.stats.running(queue.spec.queue, -1)
                queue.ended(id(handling), time.monotonic())
            if held["worker"]:
                held["worker"] = False
                self._running.give(1)
            if held["queue"]:
                held["queue"] = False
                queue.running.give(1)
            if held["held"]:
                held["held"] = False
                queue.held.give(1)

        handling.handler_done = give_back
        outcome: Outcome | None = None
        started = False
        try:
            if not (held["queue"] and held["worker"]):  # wait for a place: the queue's, then ours
                self._waiting.add(id(handling))
                if not held["queue"]:
                    await queue.running.take(1)
                    held["queue"] = True
                if not held["worker"]:
                    await self._running.take(1)
                    held["worker"] = True
                self._waiting.discard(id(handling))
            async with self._writer(handling):
                held["counted"] = started = True
                queue.began(id(handling), time.monotonic())
                self.stats.running(queue.spec.queue, 1)
                outcome = await process(handling, self._access)
        except asyncio.CancelledError:
            if not started:  # still waiting for a place: give the message back
                token = await handling.settle()
                if token is not None:
                    await self._release_quietly(handling, token)
            outcome = self._abandoned(handling)
            self._abandoned_in_transaction |= handling.in_transaction
        except Exception as error:
            await handling.settle()
            log.error(
                "handling failed: %s; the message is redelivered when its lease expires",
                printable(error),
                exc_info=True,
                extra=_fields(handling.message, error=repr(error)),
            )
        finally:
            give_back()
            handling.handler_done = _nothing  # it holds the handling: no cycle past the end
            self._waiting.discard(id(handling))
            self._tasks.pop(id(handling), None)
        if outcome is None:
            return
        if handling.lease.span is None:
            self._report(outcome)
            return
        with telemetry.current(handling.lease.span):  # the log line carries its trace id
            self._report(outcome)

    def _writer(self, handling: Handling) -> contextlib.AbstractAsyncContextManager[Any]:
        """SQLite has one writer: its transactional handlers run one at a time per process
        (concurrent ones would only wait for the write lock, holding threads meanwhile)."""
        if handling.spec.transactional and self._one_writer is not None:
            return self._one_writer
        return _NO_LOCK

    async def _release_quietly(self, handling: Handling, token: str) -> None:
        with contextlib.suppress(Exception):
            await self._access.release(handling.message.queue, token, timedelta(0), None)

    def _abandoned(self, handling: Handling) -> Outcome:
        message = handling.message
        note = (
            "in transaction: visible again when its lease expires"
            if handling.in_transaction
            else None
        )
        return Outcome(
            message.queue,
            message.key,
            message.delivery_count,
            OutcomeKind.RELEASED,
            self._access.now(),
            error=note,
        )

    def _report(self, outcome: Outcome) -> None:
        self.stats.outcome(outcome)
        level = _LEVELS.get(outcome.kind, logging.WARNING)
        if not log.isEnabledFor(level):
            return
        fields = {
            "queue": outcome.queue,
            "key": list(outcome.key),
            "delivery_count": outcome.delivery_count,
            "outcome": outcome.kind.value,
            "duration_ms": round(outcome.duration * 1000, 3),
        }
        if outcome.delay is not None:
            fields["delay_s"] = outcome.delay.total_seconds()
        if outcome.error is not None:
            fields["error"] = outcome.error
        log.log(
            level,
            "%s %s %s",
            outcome.kind.value,
            outcome.queue,
            list(outcome.key),
            exc_info=outcome.exception,  # the traceback, in the same record
            extra=fields,
        )

    async def _drain_handlers(self) -> None:
        """Release what waits for a place, give running handlers ``grace`` to finish, then
        abandon the rest."""
        waiting = [self._tasks[key] for key in self._waiting if key in self._tasks]
        # Not started: cancelled, each releases its lease at once.
        await cancel_and_wait(waiting, nudge=HANDLER_NUDGE_SECONDS)
        pending = set(self._tasks.values())
        if pending and not self._force.is_set():
            log.info(
                "waiting up to %.0f s for %d running handler(s)",
                self.grace.total_seconds(),
                len(pending),
            )
            forced = asyncio.ensure_future(self._force.wait())
            await _wait_all_or(pending, forced, self.grace.total_seconds())
            forced.cancel()
        pending = {task for task in self._tasks.values() if not task.done()}
        if pending:
            log.warning("releasing the leases of %d unfinished handler(s)", len(pending))
        await cancel_and_wait(pending, nudge=HANDLER_NUDGE_SECONDS)

    # ---- observability ------------------------------------------------------------------

    async def _poll(self, database: AsyncDatabase, queues: list[ServedQueue]) -> None:
        while True:
            for queue in queues:
                try:
                    self.stats.queue_info(await database.queue_info(queue.spec.queue))
                except (TxqueueError, OSError) as error:
                    log.debug(
                        "queue_info failed: %s", printable(error), extra={"queue": queue.spec.queue}
                    )
            await asyncio.sleep(POLL_SECONDS)

    def _install_signals(self) -> None:
        self._signals: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(number, self.stop)
                self._signals.append(number)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
                pass

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for number in getattr(self, "_signals", []):
            loop.remove_signal_handler(number)


async def _wait_all_or(
    tasks: set[asyncio.Task[None]], forced: asyncio.Future[Any], timeout: float
) -> None:
    """Wait until every task is done, ``forced`` completes, or ``timeout`` passes."""
    everything = asyncio.ensure_future(asyncio.wait(tasks))
    try:
        await asyncio.wait(
            {everything, forced}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        everything.cancel()


_NO_LOCK: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()


def _nothing() -> None:
    pass


def _fields(message: Message, **more: Any) -> dict[str, Any]:
    return {
        "queue": message.queue,
        "key": list(message.key),
        "delivery_count": message.delivery_count,
        **more,
    }
