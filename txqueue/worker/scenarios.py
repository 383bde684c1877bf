"""Helpers for Spanner's queue scenarios: periodic runs, checkpoints, joins.

- periodic: one message per schedule slot, keyed ``(name, slot)``; the run acks its message and
  sends the next slot's in one transaction. Keys are deterministic, so a duplicate send (a
  second worker, a restart) hits AlreadyExists and is dropped: exactly one chain.
- checkpoint: ack the current message and send its continuation carrying new state, due
  later, in one transaction.
- join (several events, then act): a pattern over a state table and a check queue, shown in
  ``docs/scenarios.md``; it needs nothing beyond transactional handlers.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from txqueue.core.durations import EPOCH, require_aware
from txqueue.core.schema import ColumnType, Table
from txqueue.errors import InvalidArgument
from txqueue.worker._async_apply import checkpoint as checkpoint_async
from txqueue.worker._sync_apply import checkpoint
from txqueue.worker.app import Schedule
from txqueue.worker.cron import next_cron_slot, zone
from txqueue.worker.operations import Send

__all__ = [
    "checkpoint",
    "checkpoint_async",
    "next_run",
    "next_slot",
    "schedule_send",
    "seed_run",
    "seed_slot",
    "slot_of",
]

#: A worker starting this close to a slot boundary seeds the slot after it, so its seed cannot
#: land after the chain already ran that slot (bounded by half the period).
SEED_MARGIN = timedelta(seconds=10)


def _floor(moment: datetime, every: timedelta) -> datetime:
    micros = (moment - EPOCH) // timedelta(microseconds=1)
    step = every // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=micros - micros % step)


def next_slot(now: datetime, every: timedelta, after: datetime | None = None) -> datetime:
    """The first slot boundary after ``now`` (and after the slot ``after``, if given).

    Runs that start late skip to the next future boundary: missed slots are not replayed.
    """
    slot = _floor(now, every) + every
    if after is not None and slot <= after:
        slot = after + every
    return slot


def seed_slot(now: datetime, every: timedelta) -> datetime:
    """The slot a starting worker seeds: the next boundary at least a margin away."""
    return next_slot(now + min(every / 2, SEED_MARGIN), every)


def next_run(schedule: Schedule, now: datetime, after: datetime | None = None) -> datetime:
    """The slot after ``now`` (and after ``after``) of a period or cron schedule.

    Runs that start late skip to the next future slot: missed slots are not replayed.
    """
    if schedule.every is not None:
        return next_slot(now, schedule.every, after)
    assert schedule.cron is not None
    start = now if after is None or after < now else after
    return next_cron_slot(schedule.cron, zone(schedule.timezone), start)


def seed_run(schedule: Schedule, now: datetime) -> datetime:
    """The slot a starting worker seeds, a margin away from ``now`` (as ``seed_slot``)."""
    if schedule.every is not None:
        return seed_slot(now, schedule.every)
    return next_run(schedule, now + SEED_MARGIN)


def _slot_text(slot: datetime) -> str:
    return slot.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _slot_key(table: Table, name: str, slot: datetime) -> tuple[Any, ...]:
    columns = [table.column(c) for c in table.primary_key]
    if len(columns) == 1 and columns[0].type is ColumnType.STRING:
        return (f"{name}@{_slot_text(slot)}",)
    if len(columns) == 2 and columns[0].type is ColumnType.STRING:
        kind = columns[1].type
        if kind is ColumnType.STRING:
            return (name, _slot_text(slot))
        if kind is ColumnType.TIMESTAMP:
            return (name, slot)
        if kind is ColumnType.INT64:
            return (name, (slot - EPOCH) // timedelta(seconds=1))
    raise InvalidArgument(
        f"periodic queue {table.name} needs the key (name STRING, slot STRING|TIMESTAMP|INT64) "
        "or (key STRING): the worker keys each run by schedule name and slot"
    )


def slot_of(table: Table, key: tuple[Any, ...]) -> datetime | None:
    """The slot a periodic message's key names (None when the key is not a slot key)."""
    value = key[-1]
    try:
        if isinstance(value, datetime):
            return require_aware(value, "slot")
        if isinstance(value, int) and not isinstance(value, bool):
            return EPOCH + timedelta(seconds=value)
        if isinstance(value, str):
            text = value.rsplit("@", 1)[-1] if len(key) == 1 else value
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, InvalidArgument):
        return None
    return None


def _slot_payload(table: Table, name: str, slot: datetime) -> Any:
    kind = table.payload_column.type
    if kind is ColumnType.JSON:
        return {"schedule": name, "slot": _slot_text(slot)}
    return "" if kind is ColumnType.STRING else b""


def schedule_send(table: Table, schedule: Schedule, slot: datetime) -> Send:
    """The (deduplicated) send of ``schedule``'s message for ``slot``, due at the slot."""
    return Send(
        table.name,
        _slot_key(table, schedule.name, slot),
        _slot_payload(table, schedule.name, slot),
        deliver_time=slot,
        if_absent=True,
    )
