"""Periodic slots and keys: pure functions, no database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.errors import InvalidArgument
from txqueue.worker.app import Schedule
from txqueue.worker.scenarios import next_slot, schedule_send, seed_slot, slot_of

HOUR = timedelta(hours=1)
T = datetime(2030, 5, 1, 10, 20, 30, tzinfo=timezone.utc)


def _queue(*key_types: ColumnType, payload: ColumnType = ColumnType.BYTES) -> Table:
    keys = [Column(f"K{i}", kind, nullable=False) for i, kind in enumerate(key_types)]
    return Table(
        "Agg",
        (*keys, Column("Payload", payload, nullable=False)),
        tuple(c.name for c in keys),
        is_queue=True,
    )


def test_next_slot_is_the_next_boundary() -> None:
    assert next_slot(T, HOUR) == datetime(2030, 5, 1, 11, tzinfo=timezone.utc)
    assert next_slot(T.replace(minute=0, second=0), HOUR) == datetime(
        2030, 5, 1, 11, tzinfo=timezone.utc
    )


def test_next_slot_never_repeats_the_current_one() -> None:
    current = datetime(2030, 5, 1, 11, tzinfo=timezone.utc)
    # a clock behind the database's: "now" still in the previous slot
    assert next_slot(current - timedelta(seconds=1), HOUR, current) == current + HOUR


def test_late_runs_skip_missed_slots() -> None:
    current = datetime(2030, 5, 1, 7, tzinfo=timezone.utc)
    assert next_slot(T, HOUR, current) == datetime(2030, 5, 1, 11, tzinfo=timezone.utc)


def test_seed_slot_keeps_a_margin() -> None:
    assert seed_slot(datetime(2030, 5, 1, 10, 59, 55, tzinfo=timezone.utc), HOUR) == datetime(
        2030, 5, 1, 12, tzinfo=timezone.utc
    )
    assert seed_slot(T, HOUR) == datetime(2030, 5, 1, 11, tzinfo=timezone.utc)
    second = timedelta(seconds=1)
    assert seed_slot(T + timedelta(microseconds=400_000), second) == T + second
    assert seed_slot(T + timedelta(microseconds=600_000), second) == T + 2 * second


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (_queue(ColumnType.STRING, ColumnType.STRING), ("hourly", "2030-05-01T11:00:00Z")),
        (_queue(ColumnType.STRING, ColumnType.INT64), ("hourly", 1903863600)),
        (_queue(ColumnType.STRING), ("hourly@2030-05-01T11:00:00Z",)),
        (
            _queue(ColumnType.STRING, ColumnType.TIMESTAMP),
            ("hourly", datetime(2030, 5, 1, 11, tzinfo=timezone.utc)),
        ),
    ],
)
def test_slot_keys_round_trip(table: Table, key: tuple[object, ...]) -> None:
    slot = datetime(2030, 5, 1, 11, tzinfo=timezone.utc)
    send = schedule_send(table, Schedule("hourly", HOUR), slot)
    assert send.key == key and send.deliver_time == slot and send.if_absent
    assert slot_of(table, send.key) == slot


def test_payload_follows_the_payload_column() -> None:
    slot = datetime(2030, 5, 1, 11, tzinfo=timezone.utc)
    schedule = Schedule("hourly", HOUR)
    assert (
        schedule_send(_queue(ColumnType.STRING, ColumnType.STRING), schedule, slot).payload == b""
    )
    text = _queue(ColumnType.STRING, ColumnType.STRING, payload=ColumnType.STRING)
    assert schedule_send(text, schedule, slot).payload == ""
    document = _queue(ColumnType.STRING, ColumnType.STRING, payload=ColumnType.JSON)
    assert schedule_send(document, schedule, slot).payload == {
        "schedule": "hourly",
        "slot": "2030-05-01T11:00:00Z",
    }


def test_unsuitable_keys_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="periodic queue Agg"):
        schedule_send(_queue(ColumnType.INT64), Schedule("x", HOUR), T)


def test_slot_of_a_foreign_key_is_none() -> None:
    assert slot_of(_queue(ColumnType.STRING, ColumnType.STRING), ("x", "not a time")) is None
