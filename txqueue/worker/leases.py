"""Keeping leases alive while handlers run: one background renewer per queue.

A lease past half its duration is renewed, with every due lease of the queue in one
``renew_lease`` call. Each renewal returns a new token and invalidates the old one, so the
worker always acks with ``Lease.token`` (the newest). A renewal that comes back without a new
token, or a lease that ran out while renewals failed, marks the lease lost: the handler is
told (async handlers are cancelled) and the message is never acked by this worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from txqueue import telemetry
from txqueue.core.text import printable
from txqueue.errors import TxqueueError
from txqueue.models import LeaseRenewal, Message

__all__ = ["Lease", "LeaseRenewer"]

log = logging.getLogger("txqueue.worker")

Renew = Callable[[Sequence[str], timedelta], Awaitable[list[LeaseRenewal]]]


class Lease:
    """One message's lease as this worker holds it: the newest token, and whether it is lost.

    Times are the local monotonic clock, measured from when the message (or the renewal)
    arrived: the database's lease started before that, so the real expiry is a little
    earlier, and renewing at half the duration leaves the other half as margin.
    """

    def __init__(self, message: Message, duration: timedelta) -> None:
        now = time.monotonic()
        self.message = message
        self.token = message.lease_token
        self.duration = duration.total_seconds()
        self.expires_at = now + self.duration
        self.renew_at = now + self.duration / 2
        self.lost = False
        self.settled = False
        self.span: Any = None  # the handler run's process span, when tracing
        self._listeners: list[Callable[[], None]] = []

    def on_lost(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the lease is lost (at once if it already is)."""
        if self.lost:
            listener()
        else:
            self._listeners.append(listener)

    def off_lost(self, listener: Callable[[], None]) -> None:
        """Stop telling ``listener`` (a handler that ended), so no cycle outlives it."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def lose(self) -> None:
        """Mark the lease lost and tell the listeners (once)."""
        if self.lost:
            return
        self.lost = True
        for listener in self._listeners:
            listener()


class LeaseRenewer:
    """Renews the tracked leases of one queue in the background until they are settled."""

    def __init__(
        self,
        queue: str,
        duration: timedelta,
        renew: Renew,
        lost: Callable[[Lease], None] | None = None,
    ) -> None:
        self.queue = queue
        self.duration = duration
        self._renew = renew
        self._lost = lost or (lambda lease: None)
        self._leases: dict[int, Lease] = {}
        self._lock = asyncio.Lock()
        self.tick = min(max(duration.total_seconds() / 4, 0.05), 1.0)

    def track(self, message: Message) -> Lease:
        """Start keeping ``message``'s lease alive."""
        lease = Lease(message, self.duration)
        self._leases[id(lease)] = lease
        return lease

    async def settle(self, lease: Lease) -> str | None:
        """Stop renewing ``lease``; its final token, or None when it was lost.

        Waits for a renewal in flight, so the token returned is the one the database holds.
        """
        if self._lock.locked():  # a renewal is in flight: wait for its new token
            async with self._lock:
                return self._settle(lease)
        return self._settle(lease)

    def _settle(self, lease: Lease) -> str | None:
        self._leases.pop(id(lease), None)
        lease.settled = True
        return None if lease.lost else lease.token

    @property
    def held(self) -> int:
        """How many leases are being kept alive."""
        return len(self._leases)

    async def run(self) -> None:
        """Renew due leases every ``tick`` seconds, forever (cancel to stop)."""
        while True:
            await asyncio.sleep(self.tick)
            await self.renew_due()

    async def renew_due(self) -> None:
        """Renew, in one call, every lease whose renewal time has come."""
        if not any(lease.renew_at <= time.monotonic() for lease in self._leases.values()):
            return
        async with self._lock:
            now = time.monotonic()
            due = [lease for lease in self._leases.values() if lease.renew_at <= now]
            if not due:
                return
            try:
                renewals = await self._renew([lease.token for lease in due], self.duration)
            except TxqueueError as error:
                log.warning(
                    "lease renewal failed: %s",
                    printable(error),
                    extra={"queue": self.queue, "error": repr(error)},
                )
                for lease in due:
                    if time.monotonic() >= lease.expires_at:
                        self._drop(lease)
                return
            by_token = {renewal.old_token: renewal for renewal in renewals}
            for lease in due:
                renewal = by_token.get(lease.token)
                if renewal is None or renewal.new_token is None:
                    self._drop(lease)
                    continue
                lease.token = renewal.new_token
                lease.expires_at = now + lease.duration
                lease.renew_at = now + lease.duration / 2
                telemetry.lease_renewed(lease.span, self.queue, renewal.lease_expiration)

    def _drop(self, lease: Lease) -> None:
        self._leases.pop(id(lease), None)
        lease.lose()
        self._lost(lease)
