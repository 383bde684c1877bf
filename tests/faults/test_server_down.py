"""A PostgreSQL server that is down (a free port, nothing listening): ``connect`` waits for it,
saying so — one warning naming host:port and the reason through the ``txqueue.postgres``
logger (the API), one line per retry on stderr (the CLI) — psycopg_pool logs nothing, and the
final ``Unavailable`` carries the last reason. The wait is shortened to a few seconds here.

A SQLite path whose directory is missing is ``NotFound``, not ``Unavailable``.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import txqueue
from txqueue.drivers.postgres import _sync as postgres_driver
from txqueue.errors import NotFound, Unavailable

WAIT = 3.0  # seconds connect waits for the server here (30 by default)


@pytest.fixture
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connect_to_a_server_that_is_down_warns_once_and_keeps_the_reason(
    free_port: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(postgres_driver, "OPEN_TIMEOUT", WAIT)
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        txqueue.connect(f"postgresql://postgres@127.0.0.1:{free_port}/app")
    elapsed = time.monotonic() - started
    assert WAIT <= elapsed < WAIT + 5, elapsed
    message = str(caught.value)
    assert f"127.0.0.1:{free_port}" in message, message
    assert "refused" in message.lower(), message  # the last reason, not "pool incomplete"
    assert "initialization incomplete" not in message, message
    assert caught.value.__cause__ is not None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert f"127.0.0.1:{free_port}" in warnings[0].getMessage()
    assert "refused" in warnings[0].getMessage().lower()
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]


def test_the_cli_prints_one_line_per_retry(free_port: int, tmp_path: Path) -> None:
    code = (
        "import txqueue.drivers.postgres._sync as driver\n"
        f"driver.OPEN_TIMEOUT = {WAIT}\n"
        "from txqueue.cli.main import main\n"
        f"main(['queues', '--database', 'postgresql://postgres@127.0.0.1:{free_port}/app'],"
        " prog_name='txqueue')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    retries = [line for line in lines if f"127.0.0.1:{free_port}" in line]
    assert len(retries) >= 3, result.stderr  # a line per attempt, and the final error
    assert all("refused" in line.lower() for line in retries), result.stderr
    assert "Traceback" not in result.stderr
    assert "psycopg" not in result.stderr, result.stderr  # the pool's own lines are quiet


def test_a_missing_sqlite_directory_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "app.db"
    with pytest.raises(NotFound) as caught:
        txqueue.connect(f"sqlite:///{missing}")
    assert str(missing.parent) in str(caught.value)
    assert not missing.parent.exists()
