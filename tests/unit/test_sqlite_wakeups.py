"""SQLite wake-ups: a sender reuses its listing of receiver sockets only while it is safe.

``wakeup.notify`` lists the socket directory again only when the directory's timestamp
changed, and trusts an unchanged timestamp only for a listing taken well after the last
change (a change within the same clock tick could otherwise keep the old timestamp). These
tests set the directory's timestamp by hand to stand for "changed long ago" and "changed in
the same tick", and check which sockets get the datagram.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from txqueue.drivers.sqlite import wakeup


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[str]:
    # Unix socket paths are short: a directory under the temp dir, not tmp_path itself.
    path = wakeup.wakeup_directory(str(tmp_path / "wakeups.db"))
    yield path
    wakeup._listings.pop(path, None)
    if os.path.isdir(path):
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)


def _set_changed(directory: str, nanoseconds: int) -> None:
    os.utime(directory, ns=(nanoseconds, nanoseconds))


def test_a_receiver_bound_after_a_settled_listing_is_woken(directory: str) -> None:
    first = wakeup.WakeupSocket(directory)
    _set_changed(directory, time.time_ns() - 10 * wakeup.SETTLED_NS)
    wakeup.notify(directory, ["Jobs"])  # lists and keeps the (settled) listing
    assert first.drain("Jobs")
    second = wakeup.WakeupSocket(directory)  # binding changes the directory's timestamp
    wakeup.notify(directory, ["Jobs"])
    assert second.drain("Jobs")
    assert first.drain("Jobs")
    first.close()
    second.close()


def test_a_settled_listing_is_reused_while_the_timestamp_is_unchanged(directory: str) -> None:
    first = wakeup.WakeupSocket(directory)
    old = time.time_ns() - 10 * wakeup.SETTLED_NS
    _set_changed(directory, old)
    wakeup.notify(directory, ["Jobs"])
    second = wakeup.WakeupSocket(directory)
    _set_changed(directory, old)  # as if the bind kept the old timestamp
    wakeup.notify(directory, ["Jobs"])
    assert first.drain("Jobs")
    assert not second.drain("Jobs"), "the cached listing should have been used"
    first.close()
    second.close()


def test_a_listing_taken_soon_after_a_change_is_not_trusted(directory: str) -> None:
    first = wakeup.WakeupSocket(directory)
    recent = time.time_ns()
    _set_changed(directory, recent)
    wakeup.notify(directory, ["Jobs"])  # the listing is not settled: not reused
    second = wakeup.WakeupSocket(directory)
    _set_changed(directory, recent)  # a change within the same clock tick
    wakeup.notify(directory, ["Jobs"])
    assert second.drain("Jobs")
    first.close()
    second.close()


def test_a_dead_receivers_socket_is_removed_and_the_listing_forgotten(directory: str) -> None:
    live = wakeup.WakeupSocket(directory)
    dead = wakeup.WakeupSocket(directory)
    _set_changed(directory, time.time_ns() - 10 * wakeup.SETTLED_NS)
    dead.socket.close()  # its file stays, as after a SIGKILL
    wakeup.notify(directory, ["Jobs"])
    assert not os.path.exists(dead.path)
    assert directory not in wakeup._listings
    assert live.drain("Jobs")
    live.close()


def test_the_last_receiver_to_close_removes_the_directory(directory: str) -> None:
    first = wakeup.WakeupSocket(directory)
    second = wakeup.WakeupSocket(directory)
    first.close()
    assert os.listdir(directory) == [os.path.basename(second.path)]
    second.close()
    assert not os.path.exists(directory)
    wakeup.notify(directory, ["Jobs"])  # a sender meets no directory: nothing to wake


def test_a_receiver_binds_when_the_directory_vanishes_before_it_binds(
    directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's last receiver may remove the (empty) directory between this one
    creating it and binding in it: the receiver creates it again."""
    real_makedirs = os.makedirs
    calls = []

    def makedirs_then_lose_it(path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        real_makedirs(path, mode, exist_ok)
        calls.append(path)
        if len(calls) == 1:
            os.rmdir(path)  # as the other process's close does

    monkeypatch.setattr(wakeup.os, "makedirs", makedirs_then_lose_it)
    receiver = wakeup.WakeupSocket(directory)
    assert len(calls) == 2
    wakeup.notify(directory, ["Jobs"])
    assert receiver.drain("Jobs")
    receiver.close()


def test_a_database_leaves_no_wakeup_directory_behind(tmp_path: Path) -> None:
    """A receiver that waited on a SQLite database takes its directory along when done
    (a test suite used to leave one in the temp dir per database it opened)."""
    import txqueue

    path = tmp_path / "left.db"
    db = txqueue.connect(f"sqlite:///{path}")
    try:
        db.update_ddl(
            [
                "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (Id)"
            ]
        )
        received = list(db.receive("Jobs", max_duration=timedelta(milliseconds=50)))
        assert received == []
        assert not os.path.exists(wakeup.wakeup_directory(str(path)))
    finally:
        db.close()


def test_closing_removes_sockets_left_by_killed_receivers(directory: str) -> None:
    dead = wakeup.WakeupSocket(directory)
    dead.socket.close()  # its file stays, as after a SIGKILL
    live = wakeup.WakeupSocket(directory)
    closing = wakeup.WakeupSocket(directory)
    closing.close()
    assert os.listdir(directory) == [os.path.basename(live.path)]
    assert not live.drain("Jobs")  # the sweep sent it nothing
    live.close()
    assert not os.path.exists(directory)
