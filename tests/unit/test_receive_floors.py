"""Where a PostgreSQL receive starts its walk up the ready index (drivers.postgres.floors)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from fakes import MonotonicClock

from txqueue.drivers.postgres.floors import FULL_SCAN_PERIOD, ReceiveFloors
from txqueue.models import Message

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def batch(*minutes: int) -> list[Message]:
    return [
        Message("jobs", (m,), b"x", T0 + timedelta(minutes=m), T0, f"token{m}", 1) for m in minutes
    ]


def test_no_floor_until_a_receive_from_the_start_leases_a_full_batch() -> None:
    floors = ReceiveFloors(MonotonicClock())
    assert floors.floor("jobs") is None
    floors.received("jobs", batch(5, 3), limit=3, floor=None)  # short
    assert floors.floor("jobs") is None
    floors.received("jobs", batch(5, 3, 7), limit=3, floor=None)
    assert floors.floor("jobs") == T0 + timedelta(minutes=3)  # the oldest deliver time
    assert floors.floor("other") is None


def test_a_full_batch_from_the_floor_moves_it_and_a_short_one_drops_it() -> None:
    floors = ReceiveFloors(MonotonicClock())
    floors.received("jobs", batch(1, 2), limit=2, floor=None)
    floor = floors.floor("jobs")
    floors.received("jobs", batch(4, 3), limit=2, floor=floor)
    assert floors.floor("jobs") == T0 + timedelta(minutes=3)
    floors.received("jobs", batch(9), limit=2, floor=floors.floor("jobs"))
    assert floors.floor("jobs") is None


def test_the_walk_from_the_start_comes_back_every_period_while_batches_stay_full() -> None:
    clock = MonotonicClock()
    floors = ReceiveFloors(clock)
    floors.received("jobs", batch(1, 2), limit=2, floor=None)
    clock.now += FULL_SCAN_PERIOD / 2
    floors.received("jobs", batch(3, 4), limit=2, floor=floors.floor("jobs"))
    clock.now += FULL_SCAN_PERIOD / 2  # a period since the last walk from the start
    assert floors.floor("jobs") is None
    floors.received("jobs", batch(0, 5), limit=2, floor=None)
    assert floors.floor("jobs") == T0


def test_a_floor_dropped_meanwhile_is_not_brought_back_by_a_receive_from_it() -> None:
    floors = ReceiveFloors(MonotonicClock())
    floors.received("jobs", batch(1, 2), limit=2, floor=None)
    floor = floors.floor("jobs")
    floors.received("jobs", batch(3), limit=2, floor=floor)  # another receiver: short
    floors.received("jobs", batch(4, 5), limit=2, floor=floor)  # this one started earlier
    assert floors.floor("jobs") is None


def test_a_send_of_this_process_drops_the_floor_of_its_queue() -> None:
    floors = ReceiveFloors(MonotonicClock())
    floors.received("jobs", batch(1, 2), limit=2, floor=None)
    floors.received("other", batch(1, 2), limit=2, floor=None)
    floors.forget(["jobs", "unknown"])
    assert floors.floor("jobs") is None
    assert floors.floor("other") == T0 + timedelta(minutes=1)
