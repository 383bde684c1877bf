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
