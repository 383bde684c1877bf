"""The sends and acks a transaction buffers, shared by every driver.

A driver's transaction buffers sends and acks (as Spanner buffers mutations) and applies
them with its next statement, at commit, or once ``FLUSH_AT`` are pending; it applies them
one statement per run of the same operation on the same queue (``runs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from txqueue.drivers.base import AckParams, SendParams

__all__ = ["FLUSH_AT", "Buffered", "runs"]

#: Buffered sends and acks are applied once this many are pending.
FLUSH_AT = 1000

Buffered = SendParams | AckParams


def runs(pending: Sequence[Buffered]) -> list[list[Buffered]]:
    """Consecutive sends (or acks) to one queue, in order: each run is applied as one
    statement (or one ``executemany``)."""
    return [list(group) for _, group in groupby(pending, key=_run_key)]


def _run_key(item: Buffered) -> tuple[type, str]:
    return type(item), item.queue.name
