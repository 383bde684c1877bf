"""Throw-away Cloud Spanner emulators for the test suite.

Stdlib only: the emulator is driven through its REST gateway, so importing this module never
needs google-cloud-spanner.

``SpannerEmulator.start()`` runs the official emulator's ``gateway_main`` (Debian package
``google-cloud-cli-spanner-emulator``) on two free ports of 127.0.0.1 and waits until its
REST gateway answers. ``create_database`` makes the test instance when missing and a fresh
database in either dialect; ``url`` names it as txqueue's ``spanner://`` URL, to be used
with ``SPANNER_EMULATOR_HOST`` set to ``emulator.host``.

``find_or_start()`` is what the fixtures call: it prefers an emulator named by
``$TXQUEUE_TEST_SPANNER_EMULATOR_HOST`` and otherwise starts one when ``gateway_main`` is
installed. Run ``python tests/spannerserver.py`` to get one for manual poking.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ENV_HOST = "TXQUEUE_TEST_SPANNER_EMULATOR_HOST"
PROJECT = "txqueue-test"
INSTANCE = "txqueue"
PACKAGE = "google-cloud-cli-spanner-emulator"
_KNOWN_PATHS = ("/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/gateway_main",)
_START_TIMEOUT_S = 30
_REQUEST_TIMEOUT_S = 30
_live: set[SpannerEmulator] = set()


class SpannerEmulatorError(RuntimeError):
    """The emulator did not start, or a REST call to it failed; the message says why."""


def find_gateway() -> str | None:
    """The path of ``gateway_main``: on PATH, in the Debian package's files, or None."""
    found = shutil.which("gateway_main")
    if found:
        return found
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        listing = subprocess.run(
            ["dpkg", "-L", PACKAGE], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        for line in listing.splitlines():
            if line.endswith("/gateway_main") and os.access(line, os.X_OK):
                return line
    for path in _KNOWN_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rest(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}/v1/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=_REQUEST_TIMEOUT_S) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        raise SpannerEmulatorError(f"{method} {path}: HTTP {error.code}: {detail}") from None
    return json.loads(text) if text.strip() else {}


def _wait_for_operation(base: str, operation: dict[str, Any]) -> None:
    deadline = time.monotonic() + _REQUEST_TIMEOUT_S
    while not operation.get("done"):
        if time.monotonic() > deadline:
            raise SpannerEmulatorError(f"operation {operation.get('name')} did not finish")
        time.sleep(0.02)
        operation = _rest(base, "GET", operation["name"])
    if "error" in operation:
        raise SpannerEmulatorError(f"operation failed: {operation['error']}")


def create_instance(rest_base: str, project: str = PROJECT, instance: str = INSTANCE) -> None:
    """Create ``instance`` on the emulator unless it exists."""
    with contextlib.suppress(SpannerEmulatorError):
        _rest(rest_base, "GET", f"projects/{project}/instances/{instance}")
        return
    operation = _rest(
        rest_base,
        "POST",
        f"projects/{project}/instances",
        {
            "instanceId": instance,
            "instance": {
                "config": f"projects/{project}/instanceConfigs/emulator-config",
                "displayName": instance,
                "nodeCount": 1,
            },
        },
    )
    _wait_for_operation(rest_base, operation)


def create_database(
    rest_base: str,
    name: str,
    dialect: str = "googlesql",
    project: str = PROJECT,
    extra_statements: tuple[str, ...] = (),
) -> str:
    """Create database ``name`` (``googlesql`` or ``postgresql``) in the test instance, with
    ``extra_statements`` (DDL) applied; returns its ``spanner://`` URL."""
    create_instance(rest_base, project)
    quote = '"' if dialect == "postgresql" else "`"
    operation = _rest(
        rest_base,
        "POST",
        f"projects/{project}/instances/{INSTANCE}/databases",
        {
            "createStatement": f"CREATE DATABASE {quote}{name}{quote}",
            "databaseDialect": "POSTGRESQL" if dialect == "postgresql" else "GOOGLE_STANDARD_SQL",
            "extraStatements": list(extra_statements),
        },
    )
    _wait_for_operation(rest_base, operation)
    return f"spanner://projects/{project}/instances/{INSTANCE}/databases/{name}"


def drop_database(rest_base: str, url: str) -> None:
    """Drop the database a ``spanner://`` URL names (missing is fine)."""
    path = url.removeprefix("spanner://").split("?", 1)[0]
    with contextlib.suppress(SpannerEmulatorError):
        _rest(rest_base, "DELETE", path)


def database_name() -> str:
    """A fresh database name (Spanner: 2-30 characters, a letter first)."""
    return f"t{uuid.uuid4().hex[:20]}"


class SpannerEmulator:
    """One running emulator: ``host`` is its gRPC address (``SPANNER_EMULATOR_HOST``)."""

    def __init__(self, process: subprocess.Popen[bytes], grpc_port: int, http_port: int, log: Path):
        self.process = process
        self.host = f"127.0.0.1:{grpc_port}"
        self.rest_base = f"http://127.0.0.1:{http_port}"
        self.log = log

    @classmethod
    def start(cls, gateway: str | None = None) -> SpannerEmulator:
        """Start ``gateway_main`` on free ports; returns once its REST gateway answers."""
        gateway = gateway or find_gateway()
        if gateway is None:
            raise SpannerEmulatorError(f"gateway_main not found (install {PACKAGE})")
        grpc_port, http_port = _free_port(), _free_port()
        while http_port == grpc_port:
            http_port = _free_port()
        log = Path(tempfile.mkstemp(prefix="txqueue-spanner-", suffix=".log")[1])
        with log.open("wb") as output:
            process = subprocess.Popen(
                [
                    gateway,
                    "--hostname",
                    "127.0.0.1",
                    "--grpc_port",
                    str(grpc_port),
                    "--http_port",
                    str(http_port),
                    "--grpc_binary",
                    str(Path(gateway).with_name("emulator_main")),
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        emulator = cls(process, grpc_port, http_port, log)
        _live.add(emulator)
        try:
            emulator._wait_until_up()
        except BaseException:
            emulator.stop()
            raise
        return emulator

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise SpannerEmulatorError(
                    f"the emulator exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                _rest(self.rest_base, "GET", f"projects/{PROJECT}/instanceConfigs")
                return
            except (OSError, SpannerEmulatorError):
                if time.monotonic() > deadline:
                    raise SpannerEmulatorError(
                        f"the emulator did not answer in {_START_TIMEOUT_S} s:\n{self.log_tail()}"
                    ) from None
                time.sleep(0.05)

    def create_database(
        self, dialect: str = "googlesql", extra_statements: tuple[str, ...] = ()
    ) -> str:
        """A fresh database's ``spanner://`` URL (``extra_statements``: DDL applied to it)."""
        return create_database(self.rest_base, database_name(), dialect, PROJECT, extra_statements)

    def drop_database(self, url: str) -> None:
        drop_database(self.rest_base, url)

    def restart_if_dead(self) -> bool:
        """Start a new emulator in place of this one if it exited (the emulator crashes now
        and then, a segfault in its gRPC server), so that one crash costs one test, not the
        rest of the session; its databases are gone and ``host`` changes. True if it did."""
        if self.process.poll() is None:
            return False
        sys.stderr.write(
            f"the Cloud Spanner emulator exited ({self.process.returncode}); starting another."
            f" Its log ended:\n{self.log_tail()}\n"
        )
        self.stop()
        fresh = SpannerEmulator.start(str(self.process.args[0]))
        _live.discard(fresh)
        self.process, self.host, self.rest_base, self.log = (
            fresh.process,
            fresh.host,
            fresh.rest_base,
            fresh.log,
        )
        _live.add(self)
        return True

    def pause(self) -> None:
        """Stop the emulator's processes (SIGSTOP): every call waits inside it until
        ``resume``, as on a database holding a lock."""
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as error:
            return f"(no log: {error})"

    def stop(self) -> None:
        """Stop the gateway and the emulator it started (its process group)."""
        _live.discard(self)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 15)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, 9)
                self.process.wait(10)
        with contextlib.suppress(OSError):
            self.log.unlink()

    def __enter__(self) -> SpannerEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ExternalEmulator:
    """An emulator someone else runs (``$TXQUEUE_TEST_SPANNER_EMULATOR_HOST``, gRPC address;
    its REST gateway is assumed on the next port, as ``gcloud emulators spanner start`` does)."""

    def __init__(self, host: str, rest_base: str) -> None:
        self.host = host
        self.rest_base = rest_base

    def create_database(
        self, dialect: str = "googlesql", extra_statements: tuple[str, ...] = ()
    ) -> str:
        return create_database(self.rest_base, database_name(), dialect, PROJECT, extra_statements)

    def drop_database(self, url: str) -> None:
        drop_database(self.rest_base, url)

    def restart_if_dead(self) -> bool:
        """Not ours to restart."""
        return False

    def stop(self) -> None:
        """Not ours to stop."""


def find_or_start() -> tuple[SpannerEmulator | ExternalEmulator | None, str]:
    """An emulator for the tests and, when there is none, the reason."""
    external = os.environ.get(ENV_HOST)
    if external:
        host, _, port = external.rpartition(":")
        return ExternalEmulator(external, f"http://{host}:{int(port) + 10}"), ""
    gateway = find_gateway()
    if gateway is None:
        return None, f"the Cloud Spanner emulator is not installed (apt install {PACKAGE})"
    try:
        return SpannerEmulator.start(gateway), ""
    except SpannerEmulatorError as error:
        return None, f"the Cloud Spanner emulator did not start: {error}"


def running() -> list[SpannerEmulator]:
    """The emulators this process started and has not stopped."""
    return list(_live)


@atexit.register
def _stop_leftovers() -> None:
    for emulator in list(_live):
        emulator.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop it as Ctrl-C does
    with SpannerEmulator.start() as running:
        url = running.create_database()
        print(f"SPANNER_EMULATOR_HOST={running.host}\n{url}\nCtrl-C stops it.")
        with contextlib.suppress(KeyboardInterrupt):
            running.process.wait()
