"""SQLite writer turns between processes (``drivers/sqlite/turns.py``).

A write transaction, and a receive, take this process's turn and then the database's turn
among processes (an ``flock`` on a file of its own) before SQLite's write lock, so a writer
of another process starts within a millisecond of the one before it instead of sleeping in
SQLite's busy handler. The other process here is a second open file description of the same
file (``flock`` locks conflict between those as between processes), or a real process.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import txqueue
from txqueue._sync import database as sync_database
from txqueue.drivers.sqlite.turns import WriterTurns
from txqueue.drivers.sqlite.wakeup import wakeup_directory
from txqueue.errors import Aborted

QUEUE = "CREATE QUEUE Jobs (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


@pytest.fixture
def path(tmp_path: Path) -> Iterator[str]:
    turns = str(tmp_path / "turns.lock")
    yield turns


def _hold(path: str) -> int:
    """Another process's turn: the lock on a descriptor of our own."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return descriptor


def test_a_turn_is_not_had_while_another_holds_it_and_is_had_after(path: str) -> None:
    turns = WriterTurns(path)
    assert turns.take_now()
    turns.give()
    other = _hold(path)
    try:
        assert not turns.take_now()
    finally:
        os.close(other)
    assert turns.take_now()
    turns.close()


def test_a_turn_keeps_others_out_until_given(path: str) -> None:
    turns = WriterTurns(path)
    assert turns.take_now()
    descriptor = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        turns.give()
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(descriptor)
        turns.close()


def test_closing_removes_the_file_unless_another_process_holds_it(path: str) -> None:
    turns = WriterTurns(path)
    assert turns.take_now()
    turns.give()
    other = _hold(path)
    turns.close()
    assert os.path.exists(path)  # in use: it stays
    os.close(other)
    again = WriterTurns(path)
    assert again.take_now()
    again.give()
    again.close()
    assert not os.path.exists(path)


def test_a_turn_on_a_removed_file_is_taken_again_at_the_new_one(path: str) -> None:
    """A process that opened the file before another removed it must not take its turn on
    the removed file, where no one else looks."""
    turns = WriterTurns(path)
    assert turns.take_now()
    turns.give()
    os.unlink(path)  # what a closing process does when no one holds the turn
    other = _hold(path)  # a new process takes its turn at the new file
    try:
        assert not turns.take_now()
    finally:
        os.close(other)
    assert turns.take_now()
    turns.close()


def test_a_symlink_is_never_followed_and_turns_are_left_to_sqlite(
    path: str, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, path)
    turns = WriterTurns(path)
    assert turns.take_now()  # unusable: the busy handler decides, as without turns
    turns.give()
    turns.close()
    assert target.read_text() == "keep"
    assert os.path.islink(path)


def test_a_file_others_may_open_is_not_used(path: str) -> None:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.fchmod(descriptor, 0o644)
    os.close(descriptor)
    turns = WriterTurns(path)
    other = _hold(path)
    try:
        assert turns.take_now()  # not ours to trust: no turn is waited for
    finally:
        os.close(other)
        turns.close()


def test_a_forked_child_does_not_share_its_parents_turn(path: str) -> None:
    turns = WriterTurns(path)
    assert turns.take_now()
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[str] = context.Queue()

    def child() -> None:
        answers.put("taken" if turns.take_now() else "waiting")

    process = context.Process(target=child)
    process.start()
    process.join(30)
    assert answers.get(timeout=5) == "waiting"
    turns.give()
    turns.close()


def test_writes_and_receives_wait_for_another_processs_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write transaction and a receive take the database's turn: while another process
    holds it past the busy timeout, the write fails as Aborted and writes nothing, and the
    receive leases nothing though a message is ready (as when SQLite's lock is held); once
    the turn is given, both go through."""
    monkeypatch.setattr(sync_database, "MAX_ATTEMPTS", 1)  # a busy write is not tried again
    database = tmp_path / "turns.db"
    db = txqueue.connect(f"sqlite:///{database}?busy_timeout_ms=200")
    try:
        db.update_ddl([QUEUE])
        with db.batch() as batch:
            batch.send(queue="Jobs", key=(1,), payload=b"x")
        other = _hold(wakeup_directory(str(database)) + ".lock")
        try:
            with pytest.raises(Aborted, match="busy"), db.batch() as batch:
                batch.send(queue="Jobs", key=(2,), payload=b"y")
            assert db.receive_now("Jobs", max_batch_size=2) == []
        finally:
            os.close(other)
        assert db.queue_info("Jobs").ready == 1
        with db.batch() as batch:
            batch.send(queue="Jobs", key=(2,), payload=b"y")
        received = db.receive_now("Jobs", max_batch_size=2, lease_duration=timedelta(seconds=5))
        assert sorted(message.key for message in received) == [(1,), (2,)]
    finally:
        db.close()
    assert not os.path.exists(wakeup_directory(str(database)) + ".lock")
