"""The dispatcher: delivers every pipeline's pending deliveries, retrying what is transient.

Each delivery is a message of the internal queue ``txqueue_event_deliveries``, received under
a lease: several dispatchers (processes, hosts) never attempt one delivery at the same time,
and a dispatcher that dies mid-attempt leaves the message to be received again once its lease
expires, so no delivery is lost (delivery is at-least-once).

Every attempt ends in one transaction (see `recorder`; `settling` says what it writes) that
acks the delivery with its lease token, writes the attempt-log row and, for a retry, sends the
delivery again with deliver time now + `next_delay`; an attempt whose lease ran out first still
counts (`leases`).

An HTTP attempt ends at ``attempt_timeout``, a total deadline however slowly the endpoint
answers. The lease is twice that plus 5 s: a wait for a free HTTP thread (at most one attempt
ahead), the attempt, and its record; a delivery that waited over a second for room has its
lease renewed first. On `stop`, requests no thread has started are given back unattempted.

HTTP attempts run on ``concurrency`` threads with the synchronous
deliverer (half the CPU of httpx's asyncio client), each POSTing the request that publish
encoded (`sender`): a thread takes the next request as soon as its response is in, so
requests go on while the recorder commits, and the event loop collects the answers in
groups. Delays are measured on the dispatcher host's clock.

Configuration is re-read every ``config_refresh`` (1 s), so ``update`` of a pipeline applies
without a restart. The read runs beside the deliveries, which meanwhile go on with the
settings read before, so it does not hold up the events that arrive during it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import logging
import threading
import time
from datetime import datetime, timedelta, timezone

from txqueue import telemetry
from txqueue._async.database import AsyncDatabase
from txqueue.core.durations import MAX_DURATION, to_duration
from txqueue.core.text import printable
from txqueue.drivers._async_compat import done_within
from txqueue.errors import AlreadyExists, InvalidArgument, NotFound, TxqueueError
from txqueue.events._async.events import AsyncEvents
from txqueue.events.cloudevent import CloudEvent, from_json, to_binary_http
from txqueue.events.delivery import Attempt, HttpDeliverer
from txqueue.events.leases import give_back, log_lost, renewed, resume
from txqueue.events.outcomes import AttemptKind
from txqueue.events.recorder import AttemptRecord, LeaseLost, Recorder, Write
from txqueue.events.records import DELIVERIES, REFUSED, Catalog, Delivery
from txqueue.events.resources import Pipeline
from txqueue.events.sender import Request, Sender, pool_limits
from txqueue.events.settling import (
    MAX_HOPS,
    DispatcherStats,
    Settled,
    count,
    elapsed,
    forwarding,
    outcome,
    problem,
)
from txqueue.models import Message
from txqueue.worker.concurrency import cancel_and_wait
from txqueue.worker.registry import HEARTBEAT, DispatcherRegistration

__all__ = ["MAX_HOPS", "AsyncDispatcher", "DispatcherStats"]

logger = logging.getLogger("txqueue.events")

#: Longest a receive stream stays open: bounds how long a stop request waits.
RECEIVE_WINDOW = timedelta(seconds=0.5)
#: Attempts whose request is done and whose record waits for the recorder's next group,
#: beyond those handed to the HTTP threads: twice the recorder's group size, so requests go
#: on while one group commits and the next one fills.
_RECORD_BACKLOG = 128
#: How long the recorder waits for a fuller group while requests are in flight (`recorder`):
#: at 1,000 deliveries a second, groups of about 30 instead of 6.
_RECORD_LINGER = timedelta(milliseconds=20)
#: Attempts handed to the ``concurrency`` HTTP threads: up to this many times as many, so a
#: thread that finishes a request takes the next one at once instead of waiting for the
#: event loop to hand it over (requests in flight stay bounded by the threads).
_AHEAD = 2
#: Deliveries leased in one receive when that many are ready: a deep backlog is leased in
#: few transactions (one dispatcher's CPU per delivery fell by a fifth from 16 a receive;
#: 128 was slower again). Fewer ready are leased as they are, so nothing waits for a batch.
_LEASE_BATCH = 64
#: A delivery that waited longer than this for room is handed out with its lease renewed.
_RENEW_AFTER = 1.0
_ZERO = timedelta(0)


class AsyncDispatcher:
    """Delivers for every pipeline of ``database`` until `stop` is called.

    ``concurrency`` bounds HTTP requests in flight (threads, each with a keep-alive
    connection of the pool); ``attempt_timeout`` is one HTTP attempt's total deadline, and
    the lease on a delivery is twice that plus 5 s. Every ``purge_interval`` the dispatcher
    purges archive and log rows past their bus's retention (None: never). Every
    ``heartbeat`` it writes its row of the registry (``txqueue.worker.registry``), which the
    dashboard's Workers page lists; it deletes the row when it stops.
    """

    def __init__(
        self,
        database: AsyncDatabase,
        *,
        concurrency: int = 8,
        attempt_timeout: timedelta = timedelta(seconds=30),
        config_refresh: timedelta = timedelta(seconds=1),
        purge_interval: timedelta | None = timedelta(minutes=10),
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgument(f"concurrency must be a positive integer, got {concurrency!r}")
        self.database = database
        self.events = AsyncEvents(database)
        self.concurrency = concurrency
        self.attempt_timeout = to_duration(attempt_timeout, "attempt_timeout")
        longest = (MAX_DURATION - timedelta(seconds=5)) / 2  # its lease is twice it plus 5 s
        if self.attempt_timeout > longest:
            raise InvalidArgument(
                f"attempt_timeout must be at most {longest}, got {self.attempt_timeout}"
            )
        self.lease = self.attempt_timeout * 2 + timedelta(seconds=5)
        self.config_refresh = to_duration(config_refresh, "config_refresh").total_seconds()
        self.purge_interval = (
            None if purge_interval is None else to_duration(purge_interval, "purge_interval")
        )
        self.stats = DispatcherStats()
        self.registration = DispatcherRegistration(
            database,
            concurrency,
            self._pipeline_names,
            lambda: self._unfinished,
            heartbeat,
        )
        self._stopping = asyncio.Event()
        self._catalog: Catalog | None = None
        self._loaded_at = 0.0
        self._reloading: asyncio.Task[None] | None = None
        self._sender: Sender | None = None
        self._recorder = Recorder(
            database, linger=_RECORD_LINGER, more_coming=lambda: self._requests > 0
        )
        # Attempts handed to the HTTP threads and not answered, and attempts received and not
        # recorded; receiving waits for `_room` while either is at its bound.
        self._requests = 0
        self._unfinished = 0
        self._requests_bound = concurrency * _AHEAD
        self._unfinished_bound = concurrency * _AHEAD + _RECORD_BACKLOG
        self._room = asyncio.Event()
        self._idle = asyncio.Event()
        self._logging: set[asyncio.Task[None]] = set()  # attempts whose lease was lost
        self._holding: set[tuple[str, str]] = set()  # keys of the attempts received, unfinished
        self._traces: dict[tuple[str, str], str] = {}  # what a retry's resend carries, by key

    def stop(self) -> None:
        """Ask `run` to finish: attempts in flight complete (within their deadline), nothing
        new is received, and deliveries received but not started are given back."""
        self._stopping.set()
        self._room.set()  # a receive waiting for room looks at `_stopping`

    async def run(self) -> None:
        """Receive and deliver until `stop`; errors of one delivery never end the loop."""
        await self.events.ensure_tables()
        tasks: set[asyncio.Task[None]] = set()
        next_purge = time.monotonic()
        recorder = asyncio.create_task(self._recorder.run())
        beats = asyncio.create_task(self.registration.run())  # listed on the Workers page
        deliverer = HttpDeliverer(self.attempt_timeout, limits=pool_limits(self.concurrency))
        self._sender = Sender(deliverer, self.concurrency, self.database.now)
        # A dispatcher that owns its process (``txqueue dispatcher``) takes what exists now out
        # of the cyclic GC's full collections, as the worker does: scanning the imported
        # libraries stopped deliveries for 60-70 ms every few seconds at 200 events/s.
        frozen = threading.current_thread() is threading.main_thread()
        if frozen:
            gc.freeze()
        try:
            while not self._stopping.is_set():
                if self.purge_interval is not None and time.monotonic() >= next_purge:
                    next_purge = time.monotonic() + self.purge_interval.total_seconds()
                    await self._purge()
                try:
                    await self._receive(tasks)
                except TxqueueError as error:
                    logger.warning(
                        "receiving deliveries failed (%s); retrying in 1 s", printable(error)
                    )
                    await self._pause(1.0)
        finally:
            await self._give_back_requests(self._sender.abandon())  # not started: not attempted
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if self._unfinished:  # attempts in flight finish and are recorded
                await asyncio.wait(
                    [asyncio.ensure_future(self._idle.wait()), recorder],
                    return_when=asyncio.FIRST_COMPLETED,
                )
            reloading = [] if self._reloading is None else [self._reloading]
            await cancel_and_wait([recorder, beats, *reloading], nudge=0.5)
            await self.registration.remove()
            await asyncio.to_thread(self._sender.close)
            deliverer.close()
            if frozen:
                gc.unfreeze()  # collectable again, as before the dispatcher started

    async def _receive(self, tasks: set[asyncio.Task[None]]) -> None:
        stream = self.database.receive(
            DELIVERIES,
            max_duration=RECEIVE_WINDOW,
            max_batch_size=min(_LEASE_BATCH, self._unfinished_bound),
            lease_duration=self.lease,
        )
        batch_arrived: float | None = None
        try:
            async for message in stream:
                if batch_arrived is None:
                    batch_arrived = time.monotonic()
                if message.last_in_batch:
                    arrived, batch_arrived = batch_arrived, None
                else:
                    arrived = batch_arrived
                while (
                    self._requests >= self._requests_bound
                    or self._unfinished >= self._unfinished_bound
                ) and not self._stopping.is_set():
                    self._room.clear()
                    await self._room.wait()
                if self._stopping.is_set():
                    await give_back(self.database, [message])  # the rest: the stream's close
                    break
                kept = await self._keep(message, arrived)
                if kept is None:
                    continue
                message, key = kept, kept.key
                context = telemetry.carried(message)  # taken by the attempt's span
                if context is not None:
                    self._traces[key] = context
                self._unfinished += 1
                self._holding.add(key)
                self._idle.clear()
                try:
                    handed = await self._send(message)
                except Exception:  # e.g. reading the pipelines failed: `_attempt` logs it
                    handed = False
                except BaseException:
                    self._finished(key)
                    raise
                if not handed:
                    task = asyncio.create_task(self._attempt(message))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    task.add_done_callback(functools.partial(self._finished, key))
                if self._stopping.is_set():
                    break
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()  # releases received messages not handed out yet

    async def _keep(self, message: Message, arrived: float) -> Message | None:
        """``message`` ready to attempt, its lease renewed if it waited; None if not now.

        A delivery whose earlier lease ran out while this dispatcher still attempts it is
        given back until that attempt has ended and been logged: the log then decides.
        """
        if message.key in self._holding:
            await give_back(self.database, [message], self.attempt_timeout)
            return None
        if time.monotonic() - arrived > _RENEW_AFTER:
            return await renewed(self.database, message, self.lease)  # None: lost meanwhile
        return message

    async def _give_back_requests(self, requests: list[Request]) -> None:
        """Give back requests taken from the HTTP threads unstarted, and count them done."""
        await give_back(self.database, [request.message for request in requests])
        for request in requests:  # attempt None: nothing to record
            request.done(request)

    def _finished(self, key: tuple[str, str], *_: object) -> None:
        """The attempt of ``key`` received earlier is over (recorded, or left to its lease)."""
        self._unfinished -= 1
        self._holding.discard(key)
        self._traces.pop(key, None)
        if self._unfinished < self._unfinished_bound and self._requests < self._requests_bound:
            self._room.set()
        if not self._unfinished:
            self._idle.set()

    def _answered(self) -> None:
        """One request handed to the HTTP threads is answered."""
        self._requests -= 1
        if self._unfinished < self._unfinished_bound and self._requests < self._requests_bound:
            self._room.set()

    async def _send(self, message: Message) -> bool:
        """Hand the delivery to the HTTP threads if it only needs what publish encoded (the
        common case: no event to parse or check); False if it needs `_attempt`."""
        try:
            delivery = Delivery.decode(message.payload)
        except (ValueError, KeyError, TypeError):
            return False  # `_attempt` dead-letters it
        if delivery.http is None or message.delivery_count > 1:
            return False  # a lease ran out before: `_attempt` reads the log first
        pipeline = await self._pipeline(message.key[0])
        if (
            pipeline is None
            or pipeline.destination.kind != "http"
            or pipeline.input_payload_format is not None
        ):
            return False
        self._requests += 1
        assert self._sender is not None
        self._sender.submit(Request(message, delivery, pipeline, delivery.http, self._record))
        return True

    def _record(self, request: Request) -> None:
        """Record an answered request (on the event loop, without waiting for the commit)."""
        self._answered()
        attempt = request.attempt
        if attempt is None:  # given back, or failed unexpectedly (the lease expires)
            self._finished(request.message.key)
            return
        message = request.message
        record, settled = self._outcome(
            message, request.delivery, request.pipeline, attempt, request.started
        )

        def recorded(error: BaseException | None) -> None:
            if isinstance(error, LeaseLost):  # `run` waits for its row
                logged = asyncio.create_task(log_lost(self.database, record, error))
                self._logging.add(logged)
                logged.add_done_callback(self._logging.discard)
                logged.add_done_callback(functools.partial(self._finished, message.key))
                return
            self._finished(message.key)
            if error is None:
                count(self.stats, settled)
            else:  # the database failed: the lease expires and the attempt is redone
                logger.error(
                    "delivery %s failed unexpectedly; it will be retried",
                    printable(message.key),
                    exc_info=error,
                )

        self._recorder.submit(record, recorded)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` unless the dispatcher starts stopping."""
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await done_within(stopping, seconds)
        finally:
            stopping.cancel()

    async def _purge(self) -> None:
        try:
            messages, attempts = await self.events.purge()
        except TxqueueError as error:
            logger.warning("purging the event archive failed: %s", printable(error))
            return
        if messages or attempts:
            logger.info("purged %d archived messages and %d attempt rows", messages, attempts)

    async def _pipeline_names(self) -> list[str]:
        """The pipelines delivered for, as last read (for the registry's row)."""
        try:
            return list((await self._config()).pipelines)
        except TxqueueError:  # read again at the next heartbeat
            return [] if self._catalog is None else list(self._catalog.pipelines)

    async def _pipeline(self, name: str) -> Pipeline | None:
        """The pipeline's current settings (at most ``config_refresh`` old, never missing one
        created after the last read)."""
        pipeline = (await self._config()).pipelines.get(name)
        if pipeline is None:
            pipeline = (await self._config(force=True)).pipelines.get(name)
        return pipeline

    async def _config(self, force: bool = False) -> Catalog:
        if self._catalog is None or force or not self.config_refresh:
            await self._reload()
        elif self._reloading is None and time.monotonic() - self._loaded_at >= self.config_refresh:
            self._reloading = asyncio.create_task(self._reload_beside())
        assert self._catalog is not None
        return self._catalog

    async def _reload(self) -> None:
        self._catalog = await self.events.catalog()
        self._loaded_at = time.monotonic()

    async def _reload_beside(self) -> None:
        """Re-read the configuration while deliveries go on with the one read before."""
        try:
            await self._reload()
        except TxqueueError as error:  # tried again at the next delivery
            logger.warning("reading the pipelines failed: %s", printable(error))
        finally:
            self._reloading = None

    async def _attempt(self, message: Message) -> None:
        """Make one attempt of one delivery and record it; never raises."""
        try:
            with telemetry.consuming(message):  # in the publisher's trace, when tracing
                await self._attempt_unguarded(message)
        except Exception:  # a bug or an outage: the lease expires and the attempt is redone
            logger.exception(
                "delivery %s failed unexpectedly; it will be retried", printable(message.key)
            )

    async def _attempt_unguarded(self, message: Message) -> None:
        name, uid = message.key
        try:
            delivery = Delivery.decode(message.payload)
        except (ValueError, KeyError, TypeError) as error:  # not written by txqueue: keep it
            reason = f"unreadable delivery payload: {error!r}"
            await self.database.dead_letter(DELIVERIES, message.key, message.lease_token, reason)
            logger.error("delivery %s/%s dead-lettered: %s", *map(printable, (name, uid, reason)))
            return
        if message.delivery_count > 1:  # a lease ran out: was an attempt made meanwhile?
            rows = await self.events.attempts(uid, pipeline=name)
            resumed = await resume(self.database, message, delivery, rows)
            if resumed is None:
                return
            delivery = resumed
        started = self.database.now() or datetime.now(timezone.utc)
        pipeline = await self._pipeline(name)
        event: CloudEvent | None = None
        try:
            event = from_json(delivery.event)
        except InvalidArgument as error:
            text = f"stored event is invalid: {error}"
            attempt = Attempt.raised(AttemptKind.PERMANENT, error, text, _ZERO)
        else:
            refused = problem(pipeline, name, event, delivery)
            attempt = Attempt(None, AttemptKind.PERMANENT, refused, _ZERO, None, REFUSED)
        if attempt.error is not None or pipeline is None or event is None:
            await self._finish(message, delivery, pipeline, attempt, started)
            return
        if pipeline.destination.kind == "http":
            http = delivery.http if pipeline.input_payload_format is None else None
            request = await self._post(
                message, delivery, pipeline, http or to_binary_http(event, uid)
            )
            if request.attempt is not None:  # None: failed unexpectedly (logged); lease expires
                await self._finish(message, delivery, pipeline, request.attempt, request.started)
            return
        forward = forwarding(self.events, self.database, pipeline, event, uid, delivery)
        clock = time.monotonic()
        success = Attempt(None, AttemptKind.SUCCESS, None, _ZERO, None)
        try:
            await self._finish(message, delivery, pipeline, success, started, forward, clock)
        except (NotFound, InvalidArgument, AlreadyExists) as error:
            failed = Attempt.raised(AttemptKind.PERMANENT, error, str(error), elapsed(clock))
            await self._finish(message, delivery, pipeline, failed, started)
        except TxqueueError as error:  # the database is unavailable, or too busy: try again
            failed = Attempt.raised(AttemptKind.TRANSIENT, error, str(error), elapsed(clock))
            await self._finish(message, delivery, pipeline, failed, started)

    async def _post(
        self,
        message: Message,
        delivery: Delivery,
        pipeline: Pipeline,
        http: tuple[dict[str, str], bytes],
    ) -> Request:
        """One HTTP attempt on the HTTP threads, in this task's trace; the answered request."""
        assert self._sender is not None
        answered: asyncio.Future[Request] = asyncio.get_running_loop().create_future()

        def done(request: Request) -> None:
            self._answered()
            if not answered.done():
                answered.set_result(request)

        self._requests += 1
        context = contextvars.copy_context()
        self._sender.submit(Request(message, delivery, pipeline, http, done, context))
        return await answered

    async def _finish(
        self,
        message: Message,
        delivery: Delivery,
        pipeline: Pipeline | None,
        attempt: Attempt,
        started: datetime,
        forward: Write | None = None,
        clock: float | None = None,
    ) -> None:
        """Ack, log and (for a retry) resend the delivery, all in one transaction."""
        record, settled = self._outcome(
            message, delivery, pipeline, attempt, started, forward, clock
        )
        try:
            await self._recorder.record(record)
        except LeaseLost as lost:
            await log_lost(self.database, record, lost)
            return
        count(self.stats, settled)

    def _outcome(
        self,
        message: Message,
        delivery: Delivery,
        pipeline: Pipeline | None,
        attempt: Attempt,
        started: datetime,
        forward: Write | None = None,
        clock: float | None = None,
    ) -> tuple[AttemptRecord, Settled]:
        """What the attempt writes and leaves behind (`settling.outcome`)."""
        trace = self._traces.get(message.key)
        return outcome(
            message, delivery, pipeline, attempt, started, self.database.now, trace, forward, clock
        )
