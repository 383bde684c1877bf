"""SQLite wake-ups: a sender reuses its listing of receiver sockets only while it is safe.

``wakeup.notify`` lists the socket directory again only when the directory's timestamp
changed, and trusts an unchanged timestamp only for a listing taken well after the last
change (a change within the same clock tick could otherwise keep the old timestamp). These
tests set the directory's timestamp by hand to stand for "changed long ago" and "changed in
the same tick", and check which sockets get the datagram.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

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
    real_mkdir = os.mkdir
    calls = []

    def mkdir_then_lose_it(path: str, mode: int = 0o777) -> None:
        real_mkdir(path, mode)
        calls.append(path)
        if len(calls) == 1:
            os.rmdir(path)  # as the other process's close does

    monkeypatch.setattr(wakeup.os, "mkdir", mkdir_then_lose_it)
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


# ---- the directory must be ours: another user's, or a symlink, is never used -------------------

SOMEONE_ELSE = 65534  # "nobody"; the tests run as root, so they can hand a directory to it


@pytest.fixture
def temp_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wake-up directories under the temp dir (the shared place another user can squat)."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


def _squat(path: str) -> None:
    """Create ``path`` as another user would: their directory, open to everyone."""
    os.mkdir(path)
    os.chmod(path, 0o777)
    os.chown(path, SOMEONE_ELSE, SOMEONE_ELSE)


def _remove_tree(path: str) -> None:
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)


@pytest.fixture
def squatted(temp_base: None, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A database path whose wake-up directory another user created first (mode 0777)."""
    database = str(tmp_path / "squatted.db")
    preferred = wakeup.wakeup_directory(database)
    _squat(preferred)
    made = [preferred]
    yield database, made
    for path in made:
        wakeup._listings.pop(path, None)
        _remove_tree(path)


def _wait_for_socket(directories: list[str], deadline: float) -> str:
    """The directory (one of ``directories``) where a receiver's socket appears."""
    while time.monotonic() < deadline:
        for directory in directories:
            if os.path.isdir(directory) and os.listdir(directory):
                return directory
        time.sleep(0.01)
    raise AssertionError(f"no receiver socket appeared in {directories}")


def test_a_receiver_does_not_bind_in_another_users_directory(
    squatted: tuple[str, list[str]],
) -> None:
    database, made = squatted
    preferred = made[0]
    receiver = wakeup.WakeupSocket(wakeup.wakeup_directory(database))
    try:
        assert os.listdir(preferred) == [], "bound in a directory another user owns"
        assert receiver.directory is not None and receiver.directory != preferred
        made.append(receiver.directory)
        status = os.lstat(receiver.directory)
        assert status.st_uid == os.geteuid()
        assert stat.S_IMODE(status.st_mode) == 0o700
        wakeup.notify(wakeup.wakeup_directory(database), ["Jobs"])  # senders agree on it
        assert receiver.drain("Jobs")
    finally:
        receiver.close()


def test_a_sender_sends_nothing_into_another_users_directory(
    squatted: tuple[str, list[str]],
) -> None:
    database, made = squatted
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.setblocking(False)
    listener.bind(os.path.join(made[0], "listener.sock"))  # the other user's socket
    try:
        wakeup.notify(wakeup.wakeup_directory(database), ["Jobs"])
        with pytest.raises(BlockingIOError):
            listener.recv(65536)  # the queue's name must not reach it
    finally:
        listener.close()


def test_a_send_wakes_a_waiting_receiver_when_another_user_squats_the_directory(
    squatted: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: the receive is woken by the send's datagram, not by the fallback tick
    (made a minute long here), and no socket of it lands in the other user's directory."""
    import threading

    import txqueue
    from txqueue.drivers.sqlite import _sync as sqlite_sync

    database, made = squatted
    monkeypatch.setattr(sqlite_sync, "FALLBACK_POLL", 60.0)
    db = txqueue.connect(f"sqlite:///{database}")
    received: list[Any] = []
    try:
        db.update_ddl(
            [
                "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (Id)"
            ]
        )

        def receive() -> None:
            for message in db.receive("Jobs", max_duration=timedelta(seconds=30)):
                received.append(message)
                return

        thread = threading.Thread(target=receive)
        thread.start()
        base = wakeup.wakeup_directory(database)
        candidates = wakeup.candidate_directories(base)
        made.extend(candidates[1:])
        found = _wait_for_socket(candidates, time.monotonic() + 10)
        assert found != made[0], "the receiver bound in a directory another user owns"
        started = time.monotonic()
        with db.batch() as batch:
            batch.send("Jobs", ("a",), b"payload")
        thread.join(timeout=20)
        assert [m.key for m in received] == [("a",)]
        assert time.monotonic() - started < 10
        assert os.listdir(made[0]) == []
    finally:
        db.close()


def test_a_symlink_at_the_directorys_path_is_not_followed(temp_base: None, tmp_path: Path) -> None:
    database = str(tmp_path / "linked.db")
    preferred = wakeup.wakeup_directory(database)
    target = tempfile.mkdtemp()  # ours and 0700: still, a link someone placed is not used
    os.symlink(target, preferred)
    receiver = None
    try:
        receiver = wakeup.WakeupSocket(preferred)
        assert os.listdir(target) == [], "the symlink was followed"
        assert receiver.directory is not None and receiver.directory != preferred
        wakeup.notify(preferred, ["Jobs"])
        assert receiver.drain("Jobs")
    finally:
        if receiver is not None:
            receiver.close()
        for path in wakeup.candidate_directories(preferred):
            wakeup._listings.pop(path, None)
            _remove_tree(path)
        _remove_tree(target)


def test_when_every_directory_is_taken_receivers_still_receive_by_polling(
    temp_base: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No safe directory: wake-ups are off for the database (a warning says so) and a
    receive still gets a send through its fallback tick."""
    import threading

    import txqueue

    database = str(tmp_path / "crowded.db")
    candidates = wakeup.candidate_directories(wakeup.wakeup_directory(database))
    for path in candidates:
        _squat(path)
    db = txqueue.connect(f"sqlite:///{database}")
    try:
        db.update_ddl(
            [
                "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (Id)"
            ]
        )
        received: list[Any] = []

        def receive() -> None:
            for message in db.receive("Jobs", max_duration=timedelta(seconds=10)):
                received.append(message)
                return

        with caplog.at_level("WARNING", logger="txqueue"):
            thread = threading.Thread(target=receive)
            thread.start()
            deadline = time.monotonic() + 10
            while not caplog.records and time.monotonic() < deadline:
                time.sleep(0.01)  # until the receiver found no directory of ours
            with db.batch() as batch:
                batch.send("Jobs", ("a",), b"payload")
            thread.join(timeout=15)
        assert [m.key for m in received] == [("a",)]
        assert all(os.listdir(path) == [] for path in candidates)
        assert any("wake-up" in record.getMessage() for record in caplog.records)
    finally:
        db.close()
        for path in candidates:
            _remove_tree(path)


def test_directories_and_sockets_are_owner_only_whatever_the_umask(directory: str) -> None:
    previous = os.umask(0o222)  # would make the directory 0500 and the socket 0555
    try:
        receiver = wakeup.WakeupSocket(directory)
    finally:
        os.umask(previous)
    try:
        assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
        assert receiver.path is not None
        assert stat.S_IMODE(os.lstat(receiver.path).st_mode) == 0o600
    finally:
        receiver.close()


def test_the_runtime_directory_is_preferred_when_it_is_the_users_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runtime = tempfile.mkdtemp()  # short: socket paths are limited to ~100 bytes
    try:
        os.chmod(runtime, 0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
        chosen = wakeup.wakeup_directory(str(tmp_path / "runtime.db"))
        assert os.path.dirname(chosen) == runtime
        os.chmod(runtime, 0o777)  # open to everyone: not usable, the temp dir instead
        chosen = wakeup.wakeup_directory(str(tmp_path / "runtime.db"))
        assert os.path.dirname(chosen) == tempfile.gettempdir()
    finally:
        os.rmdir(runtime)


def test_the_processs_sender_socket_is_closed_at_exit(directory: str) -> None:
    """The one sending socket a process keeps is closed at exit, not left to its finalizer
    (which warns: ``ResourceWarning: unclosed <socket.socket …>``)."""
    program = (
        "import sys\n"
        "from txqueue.drivers.sqlite import wakeup\n"
        "receiver = wakeup.WakeupSocket(sys.argv[1])\n"
        "wakeup.notify(sys.argv[1], ['Jobs'])\n"
        "assert receiver.drain('Jobs')\n"
        "receiver.close()\n"
    )
    finished = subprocess.run(
        [sys.executable, "-W", "default", "-c", program, directory],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    assert "ResourceWarning" not in finished.stderr, finished.stderr
