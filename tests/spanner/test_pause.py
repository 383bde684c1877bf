"""Pausing a queue on the Cloud Spanner engine (the emulator), on both faces: sends are taken,
receives lease nothing, leases already taken run their course, and the state is stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from conformance.support import Face


def _send(db: Any, *keys: tuple[int, str]) -> None:
    with db.batch() as batch:
        batch.insert_or_update(
            "Users", columns=("UserId", "UserName"), values=[(k[0], "u") for k in keys]
        )
        for key in keys:
            batch.send(queue="UserTasks", key=key, payload=b"x")


def _receive(db: Any, seconds: float = 0.5) -> list[Any]:
    stream = db.receive("UserTasks", max_duration=timedelta(seconds=seconds), max_batch_size=10)
    messages = []
    for message in stream:
        messages.append(message)
        if message.last_in_batch:
            break
    return messages


def test_a_paused_queue_takes_sends_and_leases_nothing_until_resumed(
    db: Any, face: Face, spanner_url: str
) -> None:
    _send(db, (1, "a"))
    [held] = db.receive_now("UserTasks")
    db.pause_queue("UserTasks")
    db.pause_queue("UserTasks")
    _send(db, (1, "b"))

    assert db.receive_now("UserTasks", max_batch_size=10) == []
    assert _receive(db) == []
    info = db.queue_info("UserTasks")
    assert (info.paused, info.ready, info.leased) == (True, 1, 1)
    [renewal] = db.renew_lease("UserTasks", [held.lease_token], timedelta(seconds=30))
    with db.batch() as batch:
        batch.ack("UserTasks", held.key, lease_token=renewal.new_token)
    with face.connect(spanner_url) as reopened:
        assert reopened.queue_info("UserTasks").paused is True

    db.resume_queue("UserTasks")
    assert db.queue_info("UserTasks").paused is False
    assert [m.key for m in _receive(db, 5)] == [(1, "b")]
