"""``txqueue worker`` as a command-line user expects: a handler-signature error is one line,
a worker whose queue is missing never says it stopped, a signal during the start-up is a
clean stop, the metrics port listens on 127.0.0.1 unless ``--metrics-host`` says otherwise."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import txqueue

QUEUE = "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


def _app(directory: Path, name: str, body: str) -> None:
    (directory / f"{name}.py").write_text("import txqueue\napp = txqueue.App()\n\n" + body)


def _worker(directory: Path, *args: str) -> subprocess.Popen[str]:
    path = os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))
    # A crash (once, SIGSEGV as a worker stopped right after it started) prints every
    # thread's Python stack into the stderr an assertion shows.
    environment = {**os.environ, "PYTHONPATH": path, "PYTHONFAULTHANDLER": "1"}
    command = [sys.executable, "-m", "txqueue.cli.main", "worker", *args, "--no-status"]
    return subprocess.Popen(
        command, cwd=directory, env=environment, stderr=subprocess.PIPE, text=True
    )


def _database(directory: Path) -> str:
    url = f"sqlite:///{directory}/worker.db"
    with txqueue.connect(url) as db:
        db.update_ddl([QUEUE])
    return url


def test_a_handler_signature_error_is_one_line(tmp_path: Path) -> None:
    _app(tmp_path, "bad", '@app.handler("Mail")\ndef handle(a, b, c):\n    pass\n')
    worker = _worker(tmp_path, "bad:app", "--database", _database(tmp_path))
    _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 1, errors
    assert "Traceback" not in errors
    assert errors.strip().splitlines() == [
        "Error: InvalidArgument: handler 'handle' must accept (message)"
    ]


def test_a_worker_whose_queue_is_missing_does_not_log_stopped(tmp_path: Path) -> None:
    _app(tmp_path, "missing", '@app.handler("Nope")\ndef handle(message):\n    pass\n')
    worker = _worker(tmp_path, "missing:app", "--database", _database(tmp_path))
    _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 1, errors
    assert "'Nope', which does not exist" in errors
    assert "stopped" not in errors and "started" not in errors


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_metrics_port_listens_on_loopback_by_default(tmp_path: Path) -> None:
    _app(tmp_path, "good", '@app.handler("Mail")\ndef handle(message):\n    pass\n')
    port = _free_port()
    url = _database(tmp_path)
    worker = _worker(tmp_path, "good:app", "--database", url, "--metrics-port", str(port))
    try:
        deadline = time.monotonic() + 30
        while not _listening(port) and time.monotonic() < deadline:
            assert worker.poll() is None, worker.communicate()[1]
            time.sleep(0.05)
        assert _listening(port) == ["0100007F"]  # 127.0.0.1, not 0.0.0.0
    finally:
        worker.send_signal(signal.SIGINT)
        _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 0, errors


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_app_imports_is_a_clean_stop(
    tmp_path: Path, number: signal.Signals
) -> None:
    marker = tmp_path / "importing"
    _app(
        tmp_path,
        "slow",
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n",
    )
    worker = _worker(tmp_path, "slow:app", "--database", _database(tmp_path))
    _wait_for(marker.exists, worker)
    worker.send_signal(number)
    _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 0, errors
    assert "Traceback" not in errors and "Aborted" not in errors, errors


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_worker_connects_is_a_clean_stop(
    tmp_path: Path, number: signal.Signals
) -> None:
    """A server that accepts and never answers holds the connect; the signal ends it at once."""
    pytest.importorskip("psycopg")
    _app(tmp_path, "good", '@app.handler("Mail")\ndef handle(message):\n    pass\n')
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"postgresql://nobody@127.0.0.1:{silent.getsockname()[1]}/nothing"
        worker = _worker(tmp_path, "good:app", "--database", url)
        accepted, _ = silent.accept()  # the worker is inside its connect now
        with accepted:
            started = time.monotonic()
            worker.send_signal(number)
            _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 0, errors
    assert "Traceback" not in errors and "Aborted" not in errors, errors
    assert time.monotonic() - started < 5


def _wait_for(condition: Callable[[], bool], worker: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert worker.poll() is None, worker.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_metrics_host_is_a_worker_option() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "txqueue.cli.main", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--metrics-host" in done.stdout and "127.0.0.1" in done.stdout
