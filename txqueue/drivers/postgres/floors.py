"""Where a receive starts its walk up the ready index, so acked rows cost nothing to skip.

An acked message leaves its entries in the queue's ready index until VACUUM, and they sort
ahead of every message still waiting: a receive that walks the index from its start passes
all of them (killed entries are not read from the heap, but their index pages are). Behind
a million acks that walk costs a receive dozens of times what the same batch costs from a
fresh table (figures in docs/performance-history.md).

A receive that leased a full batch knows where the waiting messages begin: every message it
did not take was ready no earlier than the batch's own, and a message is never ready before
its deliver time. So the next receive of the same queue in this process starts its walk at
the batch's oldest deliver time (its *floor*) and skips the acked rows behind it.

What can lie below a floor: a message sent later with an older deliver time (an explicit
one, or ``now()`` of a transaction that began before the floor), or one a concurrent receive
had locked and then rolled back. A send committed by this process drops the queue's floor,
and a receive that comes back short from a floor drops it: ``receive_now`` looks again from
the oldest for the rest of its batch at once, a stream with its next receive
(``AsyncPostgresDriver.lease``), so such a message is not left behind while a batch has room
for it. Only while receives keep coming back full may it wait behind newer ones, and one
receive every ``FULL_SCAN_PERIOD`` starts from the oldest. Order is oldest deliver time
first, best effort (as Spanner promises); nothing waits longer than that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from txqueue.models import Message

__all__ = ["FULL_SCAN_PERIOD", "ReceiveFloors"]

#: The longest a receive may start at a floor before it walks the ready index from its start.
FULL_SCAN_PERIOD = 1.0


class ReceiveFloors:
    """One driver's floors, by queue name. A hint shared by its receivers: a race between
    two of them at worst costs one walk from the start."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._floors: dict[str, tuple[datetime, float]] = {}  # floor, last walk from the start

    def floor(self, queue: str) -> datetime | None:
        """Where the next receive of ``queue`` may start; None: from the start."""
        entry = self._floors.get(queue)
        if entry is None or self._clock() - entry[1] >= FULL_SCAN_PERIOD:
            return None
        return entry[0]

    def forget(self, queues: Iterable[str]) -> None:
        """This process sent to ``queues``: their next receives start from the oldest, so a
        message it sent with an older deliver time is not passed over."""
        for queue in queues:
            self._floors.pop(queue, None)

    def received(
        self, queue: str, messages: Sequence[Message], limit: int, floor: datetime | None
    ) -> None:
        """Record what a receive of ``queue`` (started at ``floor``) leased."""
        if len(messages) < limit:  # short: no backlog to skip into; start from the oldest
            self._floors.pop(queue, None)
            return
        oldest = min(message.deliver_time for message in messages)
        if floor is None:
            self._floors[queue] = (oldest, self._clock())
            return
        entry = self._floors.get(queue)
        if entry is not None:  # else another receive came back short: start over
            self._floors[queue] = (oldest, entry[1])
