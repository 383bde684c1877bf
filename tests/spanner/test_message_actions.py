"""Acting on chosen messages on Cloud Spanner (the emulator), through the public API on both
faces: delete and make ready, all or none, a live lease refused unless forced."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound


def _send(db: Any, *keys: tuple[int, str], deliver_time: datetime | None = None) -> None:
    with db.batch() as batch:
        batch.insert_or_update(
            "Users", columns=("UserId", "UserName"), values=[(k[0], "u") for k in keys]
        )
        for key in keys:
            batch.send(queue="UserTasks", key=key, payload=b"x", deliver_time=deliver_time)


def _keys(db: Any) -> list[tuple[Any, ...]]:
    return [m.key for m in db.list_messages("UserTasks")]


def test_delete_messages_refuses_leased_and_unknown_ones_and_forces(db: Any) -> None:
    _send(db, (1, "a"), (2, "b"), (3, "c"))
    [leased] = db.receive_now("UserTasks", lease_duration=timedelta(seconds=30))
    waiting = [k for k in [(1, "a"), (2, "b"), (3, "c")] if k != leased.key]
    with pytest.raises(FailedPrecondition, match="live lease"):
        db.delete_messages("UserTasks", [*waiting, leased.key])
    with pytest.raises(NotFound, match=r"\(9, 'z'\)"):
        db.delete_messages("UserTasks", [*waiting, (9, "z")])
    assert len(_keys(db)) == 3
    assert db.delete_messages("UserTasks", waiting) == 2
    assert db.delete_messages("UserTasks", [leased.key], force=True) == 1
    with pytest.raises(NotFound), db.batch() as batch:
        batch.ack("UserTasks", leased.key, lease_token=leased.lease_token)
    assert _keys(db) == []


def test_make_ready_brings_a_scheduled_message_forward_and_puts_one_off(db: Any) -> None:
    now = datetime.now(timezone.utc)
    _send(db, (1, "a"), deliver_time=now + timedelta(days=1))
    _send(db, (2, "b"))
    assert db.make_ready("UserTasks", [(1, "a")]) == 1
    later = now + timedelta(hours=5)
    assert db.make_ready("UserTasks", [(2, "b")], deliver_time=later) == 1
    [message] = db.receive_now("UserTasks", max_batch_size=10)
    assert message.key == (1, "a")
    with pytest.raises(FailedPrecondition):
        db.make_ready("UserTasks", [(1, "a")])
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        db.make_ready("UserTasks", [(2, "b")], deliver_time=later.replace(tzinfo=None))
    [scheduled] = db.list_messages("UserTasks", state="scheduled")
    assert (scheduled.key, scheduled.deliver_time) == ((2, "b"), later)
    assert db.make_ready("UserTasks", [(1, "a")], force=True) == 1
    assert [m.key for m in db.list_messages("UserTasks", state="ready")] == [(1, "a")]


def test_a_selection_larger_than_one_query_s_parameters_is_deleted_at_once(db: Any) -> None:
    """500 keys of two columns bind more values than one Spanner query takes (950)."""
    keys = [(1, f"m{n:03}") for n in range(500)]
    _send(db, *keys)
    with pytest.raises(NotFound, match=r"\(2, 'zz'\)"):
        db.delete_messages("UserTasks", [*keys, (2, "zz")])
    assert db.delete_messages("UserTasks", keys) == 500
    assert _keys(db) == []
