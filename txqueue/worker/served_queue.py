"""The runtime state of one queue a worker serves: its places, and how far it receives ahead.

A queue's handlers run in at most ``limit`` places; it may hold more messages than that
(received ahead), so a quick handler finds its next message already in memory. How far ahead
is adapted to the handlers' running average duration (``ServedQueue.ahead``).
"""

from __future__ import annotations

from txqueue.worker.app import HandlerSpec
from txqueue.worker.concurrency import Slots
from txqueue.worker.leases import LeaseRenewer

__all__ = ["AVERAGE_WEIGHT", "QUICK", "ServedQueue"]

#: A queue receives ahead by default only while its handlers take less than this on average
#: and none has been running longer (a receive's round trip is then a fair part of their time;
#: slower ones gain nothing from it, and a message received ahead would wait for one of them).
#: It is also the horizon: a queue receives ahead what its handlers finish within this long at
#: their average pace, at most a full batch beyond its limit.
QUICK = 0.025
#: The weight of the newest handler duration in a queue's running average.
AVERAGE_WEIGHT = 0.1


class ServedQueue:
    """The runtime state of one served queue."""

    def __init__(
        self, spec: HandlerSpec, renewer: LeaseRenewer, limit: int, prefetch: int | None
    ) -> None:
        self.spec = spec
        self.renewer = renewer
        self.limit = limit
        self.fixed = prefetch  # None: adaptive (see ahead)
        # The most received ahead by default: a full batch with the running ones, or the limit.
        self.prefetch = max(limit, spec.max_batch_size - limit) if prefetch is None else prefetch
        self.average: float | None = None  # handler duration, seconds (None: none ended yet)
        self.started: dict[int, float] = {}  # start of each running handler, oldest first
        self.held = Slots(limit + self.prefetch)  # received, not finished; resized by ahead()
        self.running = Slots(limit)  # handlers running

    def ahead(self, now: float) -> int:
        """How many messages to receive ahead of free places now.

        Fixed when the worker was given a prefetch. By default none until the queue's handlers
        proved quick (an average under ``QUICK`` and none running for that long), then what
        they finish within ``QUICK`` at their average pace, up to ``prefetch``.
        """
        if self.fixed is not None:
            return self.fixed
        average = self.average
        if average is None or average >= QUICK:
            return 0
        if self.started and now - next(iter(self.started.values())) >= QUICK:
            return 0  # a handler is running long: the average is out of date
        if average * self.prefetch <= QUICK * self.limit:
            return self.prefetch
        return int(self.limit * QUICK / average)

    def began(self, handling: int, now: float) -> None:
        """Note that a handler started."""
        self.started[handling] = now

    def ended(self, handling: int, now: float) -> None:
        """Note that a handler ended, for its duration."""
        duration = now - self.started.pop(handling)
        if self.average is None:
            self.average = duration
        else:
            self.average += AVERAGE_WEIGHT * (duration - self.average)
