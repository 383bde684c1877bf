"""The delivery a handler is running for, visible to the handler and to txqueue's helpers.

A context variable, so it follows the handler into its thread (sync) or task (async).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import datetime, timezone

from txqueue.models import Message
from txqueue.worker.leases import Lease

__all__ = ["Delivery", "current_delivery", "lease_lost", "now"]


@dataclass
class Delivery:
    """A message being handled, its lease (None once settled) and the worker's clock."""

    message: Message
    lease: Lease | None
    clock: Callable[[], datetime]


_current: ContextVar[Delivery | None] = ContextVar("txqueue_delivery", default=None)


def current_delivery() -> Delivery | None:
    """The delivery the calling handler runs for, or None outside a handler."""
    return _current.get()


def enter(delivery: Delivery) -> Token[Delivery | None]:
    """Make ``delivery`` current in this context until ``leave`` (the worker, per message)."""
    return _current.set(delivery)


def leave(token: Token[Delivery | None]) -> None:
    """Undo the matching ``enter``."""
    _current.reset(token)


def lease_lost() -> bool:
    """True when the calling handler's lease was lost: stop, the message will be redelivered.

    Async handlers are cancelled when that happens; sync handlers cannot be, so a long sync
    handler should check this between steps. Its result is ignored either way (no ack).
    """
    delivery = _current.get()
    return bool(delivery and delivery.lease and delivery.lease.lost)


def now() -> datetime:
    """The worker's time for the current delivery (the pinned clock in tests), else UTC now."""
    delivery = _current.get()
    return delivery.clock() if delivery else datetime.now(timezone.utc)
