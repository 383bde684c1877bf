"""The dispatcher's HTTP threads: they POST queued requests and hand the answers back in groups.

Each of ``threads`` threads takes the next `Request` from one queue as soon as its previous
request is answered, so no thread waits for the event loop between requests. Answers are
collected in a list; the event loop is woken once for all the answers that came in since it
last looked, not once per request, and runs each request's ``done`` there. A request carries
what its attempt needs (the pipeline, the headers and body publish encoded) and runs in the
publisher's trace, when tracing, as it would on the event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

import httpx

from txqueue import telemetry
from txqueue.core.text import printable
from txqueue.events.delivery import Attempt, HttpDeliverer
from txqueue.events.guarded import DEFAULT_LIMITS
from txqueue.events.records import Delivery
from txqueue.events.resources import Pipeline
from txqueue.events.signing import sign
from txqueue.models import Message

__all__ = ["Request", "Sender", "pool_limits"]

logger = logging.getLogger("txqueue.events")


class Request:
    """One HTTP attempt of ``delivery``: POST ``body`` with ``headers`` to ``pipeline``'s
    destination, then ``done(request)`` on the event loop (``request.attempt`` None: the
    attempt failed unexpectedly). It runs in ``context`` when given (the caller's trace),
    else in the trace ``message`` carries."""

    __slots__ = (
        "attempt",
        "body",
        "context",
        "delivery",
        "done",
        "headers",
        "message",
        "pipeline",
        "started",
    )

    def __init__(
        self,
        message: Message,
        delivery: Delivery,
        pipeline: Pipeline,
        http: tuple[dict[str, str], bytes],
        done: Callable[[Request], None],
        context: contextvars.Context | None = None,
    ) -> None:
        self.message = message
        self.delivery = delivery
        self.pipeline = pipeline
        self.headers, self.body = http
        self.done = done
        self.context = context
        self.started = datetime.min
        self.attempt: Attempt | None = None


class Sender:
    """``threads`` threads POSTing `Request`\\ s with ``deliverer``; `close` when done.

    ``clock`` is the database's pinned time (None: the host's), read as each attempt starts.
    """

    def __init__(
        self,
        deliverer: HttpDeliverer,
        threads: int,
        clock: Callable[[], datetime | None],
    ) -> None:
        self._deliverer = deliverer
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._requests: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._answered: list[Request] = []
        self._lock = threading.Lock()
        self._woken = False  # the event loop will collect: no need to wake it again
        self._threads = [
            threading.Thread(target=self._work, name="txqueue-http", daemon=True)
            for _ in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, request: Request) -> None:
        """Queue ``request`` for the next free thread."""
        self._requests.put(request)

    def abandon(self) -> list[Request]:
        """Take back the requests no thread has started (they are not attempted)."""
        taken: list[Request] = []
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return taken
            if request is None:  # closing: leave the stop signs for the threads
                self._requests.put(None)
                return taken
            taken.append(request)

    def close(self) -> None:
        """Stop the threads once the requests queued so far are answered."""
        for _ in self._threads:
            self._requests.put(None)
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            try:
                if request.context is None:
                    with telemetry.consuming(request.message):  # the publisher's trace
                        request.attempt = self._send(request)
                else:
                    request.attempt = request.context.run(self._send, request)
            except Exception:  # a bug: the delivery's lease expires and it is attempted again
                logger.exception(
                    "delivery %s failed unexpectedly; it will be retried",
                    printable(request.message.key),
                )
                request.attempt = None
            with self._lock:
                self._answered.append(request)
                if self._woken:
                    continue
                self._woken = True
            self._loop.call_soon_threadsafe(self._collect)

    def _send(self, request: Request) -> Attempt:
        pipeline = request.pipeline
        request.started = self._clock() or datetime.now(timezone.utc)
        headers = request.headers
        if pipeline.signing_secret is not None:
            uid, stamp = request.message.key[1], int(time.time())
            headers = {**headers, **sign(pipeline.signing_secret, uid, stamp, request.body)}
        target = pipeline.destination.target
        span, headers = telemetry.start_delivery(pipeline.name, target, headers)
        attempt = None
        try:
            attempt = self._deliverer.deliver(
                target,
                headers,
                request.body,
                pipeline.allow_private,  # the choice recorded with the pipeline decides
            )
            return attempt
        finally:
            telemetry.end_delivery(span, pipeline.name, attempt)

    def _collect(self) -> None:
        with self._lock:
            answered, self._answered = self._answered, []
            self._woken = False
        for request in answered:
            try:
                request.done(request)
            except Exception:
                logger.exception("recording an attempt failed unexpectedly")


def pool_limits(threads: int) -> httpx.Limits:
    """A keep-alive pool of a connection per HTTP thread, never below httpx's defaults."""
    return httpx.Limits(
        max_connections=max(DEFAULT_LIMITS.max_connections or 0, threads),
        max_keepalive_connections=max(DEFAULT_LIMITS.max_keepalive_connections or 0, threads),
    )
