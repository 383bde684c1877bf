"""When a queue's planner statistics were taken while it was empty, take them again.

``ANALYZE`` (autovacuum's or anyone's) or ``VACUUM`` of a queue table whose pages hold only
dead rows records ``reltuples = 0`` with ``relpages > 0``, and the planner then takes the
table for empty, whatever it holds later. An idle queue is analyzed that way; when a burst
refills it, receives sort every ready row under a bitmap scan instead of walking the ready
index to their LIMIT, and a batch of acks reads the whole primary-key index instead of its
rows' locations: a batched drain of 20,000 ran 2.7-5x slower here, until the next
``ANALYZE`` (autovacuum's comes after its naptime, a minute by default). No shape of the
receive keeps its plan in that state: both plans are costed for the one row the planner
expects, and the sort wins. So the cure is the statistics.

Receives that keep coming back full prove a backlog: a *streak* of them leased at least as
many messages as were waiting. While a streak of a queue in this process has leased at
least ``MIN_STREAK`` messages and twice the batch size, the driver reads the planner's
estimate of the queue's rows (``STATISTICS_STALE``): at once, then at most once every
``CHECK_PERIOD`` while the streak lasts (something may analyze the queue meanwhile, in a
moment it was empty). It does so before the queue's next receive, not after the one that
made it due: an ANALYZE takes a while, and the leases of a batch already taken would run
out meanwhile.
If it is below half the streak, up to ``max(EVIDENCE, 4 x batch size)`` (the receive's plan
flips once the estimate falls below about the batch size; a long streak of a queue that
really holds few rows proves no more than that), the driver runs ``ANALYZE (SKIP_LOCKED)``
on the queue and reads the estimate again. An ANALYZE that left it low (the queue holds few
rows after all; or this role may not analyze the table, which PostgreSQL only warns about;
or a ``VACUUM`` held it) is not tried again by this process for ``QUIET_PERIOD``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CHECK_PERIOD", "EVIDENCE", "MIN_STREAK", "QUIET_PERIOD", "StatisticsWatch"]

#: The fewest messages a streak of full receives leases before the estimate is read.
MIN_STREAK = 100
#: The most rows a streak is taken to prove, for a batch size up to a quarter of it.
EVIDENCE = 1000
#: The shortest time between two reads of one queue's estimate by one process (seconds).
CHECK_PERIOD = 0.25
#: How long one process leaves a queue alone after an ANALYZE that did not help (seconds).
QUIET_PERIOD = 60.0


class StatisticsWatch:
    """One driver's streaks of full receives, by queue name."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._streaks: dict[str, int] = {}
        self._checked: dict[str, float] = {}  # when the estimate was last read, this streak
        self._in_vain: dict[str, float] = {}  # when an ANALYZE last left it low
        self._due: dict[str, float] = {}  # the fewest rows the estimate must show

    def received(self, queue: str, count: int, limit: int) -> None:
        """Record that a receive of ``queue`` leased ``count`` of at most ``limit``
        messages."""
        if count < limit:  # short: the backlog (if any) is gone
            self._streaks.pop(queue, None)
            self._checked.pop(queue, None)
            self._due.pop(queue, None)
            return
        streak = self._streaks.get(queue, 0) + count
        self._streaks[queue] = streak
        if streak < max(MIN_STREAK, 2 * limit):
            return
        now = self._clock()  # only past the threshold: most receives need no clock
        checked, quieted = self._checked.get(queue), self._in_vain.get(queue)
        if (checked is not None and now - checked < CHECK_PERIOD) or (
            quieted is not None and now - quieted < QUIET_PERIOD
        ):
            return
        self._checked[queue] = now
        self._due[queue] = min(streak, max(EVIDENCE, 4 * limit)) / 2

    def due(self, queue: str) -> float | None:
        """Before a receive of ``queue``: the fewest rows the planner's estimate must show,
        when it is due to be read (once)."""
        return self._due.pop(queue, None)

    def in_vain(self, queue: str) -> None:
        """Record that an ANALYZE of ``queue`` left the planner's estimate low."""
        self._in_vain[queue] = self._clock()
