"""SQLite database files txqueue creates: owner-only, and never named by a bad URL."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import txqueue
from txqueue.errors import InvalidArgument

QUEUE = "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_database_file_and_its_wal_and_shm_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    previous = os.umask(0o022)  # the usual umask: files would be 0644
    try:
        db = txqueue.connect(f"sqlite:///{path}")
        try:
            db.update_ddl([QUEUE])
            with db.batch() as batch:
                batch.send("Jobs", ("a",), b"x")
            modes = {
                name: _mode(tmp_path / name) for name in ("new.db", "new.db-wal", "new.db-shm")
            }
        finally:
            db.close()
    finally:
        os.umask(previous)
    assert modes == {"new.db": 0o600, "new.db-wal": 0o600, "new.db-shm": 0o600}


def test_an_existing_database_files_mode_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch()
    os.chmod(path, 0o640)  # the application chose to share it with its group
    db = txqueue.connect(f"sqlite:///{path}")
    try:
        db.update_ddl([QUEUE])
    finally:
        db.close()
    assert _mode(path) == 0o640


def test_a_nul_in_a_sqlite_url_is_refused_and_creates_no_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a%00b.db"
    with pytest.raises(InvalidArgument) as raised:
        txqueue.connect(url)
    message = str(raised.value)
    assert "NUL" in message and f"{tmp_path}/a%00b.db" in message
    assert os.listdir(tmp_path) == []
    with pytest.raises(InvalidArgument, match="NUL"):
        txqueue.connect(f"sqlite:///{tmp_path}/a\x00b.db")
    assert os.listdir(tmp_path) == []
