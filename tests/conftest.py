"""Shared fixtures: database URLs for SQLite and a per-session PostgreSQL server.

PostgreSQL comes from ``$TXQUEUE_TEST_POSTGRES_URL`` or is started from the
``initdb``/``pg_ctl`` found on PATH (see ``tests/pgserver.py``). When neither is
available, PostgreSQL tests are skipped, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import inspect
import itertools
import os
import queue
import re
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgserver import PostgresServer, create_database, drop_database, find_or_start, with_database
from spannerfixtures import (
    spanner_database_url,
    spanner_emulator,
    spanner_params_on,
    spanner_postgresql_database_url,
    spanner_url,
    spanner_wanted,
)

__all__ = [  # fixtures of the Cloud Spanner emulator
    "spanner_database_url",
    "spanner_emulator",
    "spanner_postgresql_database_url",
    "spanner_url",
]

_MAX_IDENT_BYTES = 63  # NAMEDATALEN - 1
_db_counter = itertools.count(1)


def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


def pytest_sessionstart(session: pytest.Session) -> None:
    # A plain `kill` (SIGTERM) would skip fixture teardown and leave the session's
    # PostgreSQL server running; treat it like Ctrl-C so the server is cleaned up.
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, signal.default_int_handler)


#: Test files that load the machine and time things (a wheel build and fresh virtualenvs,
#: Chromium, a Patroni cluster, a load run): under pytest-xdist (``-n N``, the README's
#: command) they run one after another on one worker, never two at once.
HEAVY_FILES = (
    "tests/browser/",
    "tests/packaging/",
    "tests/faults/test_failover.py",
    "tests/integration/test_worker_load.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n N`` (``--dist load``): each test goes to the next free worker, except that
    ``HEAVY_FILES`` form one unit of work, handed to one worker first (the largest unit)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class HeavyTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "heavy" if nodeid.startswith(HEAVY_FILES) else nodeid

    return HeavyTogether(config, log)


class _SummaryLines:
    """What the suites' ``pytest_terminal_summary`` hooks write, kept on a pytest-xdist worker
    (whose terminal nobody sees) for the controller to print."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def section(self, title: str, sep: str = "=", **_: Any) -> None:
        self.lines.append(f" {title} ".center(80, sep))

    def write_line(self, line: str, **_: Any) -> None:
        self.lines.append(str(line))


_forwarded: list[str] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is None:  # not a pytest-xdist worker
        return
    reporter = _SummaryLines()
    arguments = {"terminalreporter": reporter, "exitstatus": exitstatus, "config": session.config}
    tests = str(Path(__file__).parent)
    for plugin in session.config.pluginmanager.get_plugins():
        hook = getattr(plugin, "pytest_terminal_summary", None)
        if hook is None or not str(getattr(plugin, "__file__", "")).startswith(tests):
            continue
        hook(**{name: arguments[name] for name in inspect.signature(hook).parameters})
    worker = getattr(session.config, "workerinput", {}).get("workerid", "worker")
    workeroutput["txqueue_summary_lines"] = [f"[{worker}] {line}" for line in reporter.lines]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    _forwarded.extend(getattr(node, "workeroutput", {}).get("txqueue_summary_lines", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _forwarded:  # the workers' summaries, under pytest-xdist
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Anything reaching the PostgreSQL (Cloud Spanner) fixtures counts as a postgres (spanner)
    # test, so `-m "not postgres"` deselects it (database_url marks only its own param).
    for item in items:
        if "_postgres" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if "spanner_emulator" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spanner)
    # database_url's Cloud Spanner params run where spanner_wanted says (by default in the
    # conformance and driver suites); elsewhere they are deselected.
    unwanted = [item for item in items if _on_spanner(item) and not spanner_wanted(item.path)]
    if unwanted:
        config.hook.pytest_deselected(items=unwanted)
        dropped = set(unwanted)
        items[:] = [item for item in items if item not in dropped]


def _on_spanner(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    engine = callspec.params.get("database_url") if callspec is not None else None
    return isinstance(engine, str) and engine.startswith("spanner")


@pytest.fixture(scope="session")
def _postgres() -> Iterator[tuple[str, PostgresServer | None]]:
    url, server, reason = find_or_start()
    if url is None:
        if _in_ci():
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    try:
        yield url, server
    finally:
        # Runs at session end, also after Ctrl-C (pytest tears fixtures down on
        # KeyboardInterrupt); pgserver's atexit hook is the last resort.
        if server is not None:
            server.cleanup()


@pytest.fixture(scope="session")
def postgres_server(_postgres: tuple[str, PostgresServer | None]) -> PostgresServer | None:
    """The session's PostgreSQL server, or None when an external URL is used."""
    return _postgres[1]


@pytest.fixture(scope="session")
def postgres_url(_postgres: tuple[str, PostgresServer | None]) -> str:
    """URL of the session server's maintenance database (``postgres``)."""
    return _postgres[0]


def _database_name(nodeid: str) -> str:
    """A unique, valid, unquoted-safe database name derived from a test node id."""
    suffix = f"_{next(_db_counter)}_{uuid.uuid4().hex[:8]}"
    stem = nodeid.rsplit("/", 1)[-1].replace(".py::", "::")  # test_mod::test_fn[param]
    stem = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")
    stem = stem[: _MAX_IDENT_BYTES - len("t_") - len(suffix)].rstrip("_")
    return f"t_{stem}{suffix}"


@pytest.fixture
def pg_database_url(request: pytest.FixtureRequest, postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test; dropped afterwards."""
    name = _database_name(request.node.nodeid)
    url = create_database(postgres_url, name)
    yield url
    drop_database(postgres_url, name)


class DatabaseSupply:
    """Fresh PostgreSQL databases made ahead of need by a background thread.

    Each is a copy of one template that txqueue has connected to (its catalog made, nothing
    recorded), the state a test's first connect would leave. Creating and dropping a database
    costs the server most of a second; done here while the tests run, it is off their path:
    the conformance and driver suites run each test on two faces, and this keeps their
    PostgreSQL half about as fast as one face was.
    """

    AHEAD = 3

    def __init__(self, postgres_url: str) -> None:
        import txqueue

        self._url = postgres_url
        self._template = f"t_txqueue_template_{uuid.uuid4().hex[:8]}"
        txqueue.connect(create_database(postgres_url, self._template)).close()
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=self.AHEAD)
        self._finished: queue.Queue[str | None] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="database-supply", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=10) as connection:
                strategy = " STRATEGY FILE_COPY" if connection.info.server_version >= 150000 else ""
                create = sql.SQL("CREATE DATABASE {} TEMPLATE {}" + strategy)
                drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                template = sql.Identifier(self._template)
                while not self._stopping.is_set():
                    while True:  # drop what the tests are done with first
                        try:
                            done = self._finished.get_nowait()
                        except queue.Empty:
                            break
                        if done is not None:
                            connection.execute(drop.format(sql.Identifier(done)))
                    if self._ready.full():
                        finished = self._finished.get(timeout=None)
                        self._finished.put(finished)
                        continue
                    name = f"t_supply_{next(_db_counter)}_{uuid.uuid4().hex[:8]}"
                    connection.execute(create.format(sql.Identifier(name), template))
                    self._ready.put(name)
        except BaseException as error:  # handed to the test that waits for a database
            self._ready.put(error)

    def take(self) -> str:
        """The URL of a fresh database; give it back with ``give_back`` when done."""
        name = self._ready.get(timeout=60)
        if isinstance(name, BaseException):
            raise name
        return with_database(self._url, name)

    def give_back(self, url: str) -> None:
        self._finished.put(url.rsplit("/", 1)[-1].split("?", 1)[0])

    def close(self) -> None:
        self._stopping.set()
        self._finished.put(None)
        self._thread.join(30)
        while not self._ready.empty():
            name = self._ready.get_nowait()
            if isinstance(name, str):
                drop_database(self._url, name)
        while not self._finished.empty():
            leftover = self._finished.get_nowait()
            if leftover is not None:
                drop_database(self._url, leftover)
        drop_database(self._url, self._template)


@pytest.fixture(scope="session")
def _database_supply(postgres_url: str) -> Iterator[DatabaseSupply]:
    supply = DatabaseSupply(postgres_url)
    try:
        yield supply
    finally:
        supply.close()


@pytest.fixture
def supplied_pg_database_url(_database_supply: DatabaseSupply) -> Iterator[str]:
    """A fresh PostgreSQL database for this test, made ahead by ``DatabaseSupply`` (in the
    state a first connect leaves: txqueue's catalog made, nothing recorded)."""
    url = _database_supply.take()
    try:
        yield url
    finally:
        _database_supply.give_back(url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/test.db"


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        # Cloud Spanner on its emulator, GoogleSQL and PostgreSQL dialect: by default in the
        # conformance and driver suites only (pytest_collection_modifyitems deselects the
        # rest); TXQUEUE_TEST_SPANNER=0 leaves them out, =1 runs them everywhere.
        *(
            [
                pytest.param("spanner", id="spanner", marks=pytest.mark.spanner),
                pytest.param(
                    "spanner_postgresql", id="spanner_postgresql", marks=pytest.mark.spanner
                ),
            ]
            if spanner_params_on()
            else []
        ),
    ]
)
def database_url(request: pytest.FixtureRequest) -> str:
    """Run the test once per engine: a SQLite file URL, then a fresh PostgreSQL database,
    then fresh Cloud Spanner databases on the emulator (see ``spanner_wanted``)."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    if request.param == "spanner":
        return str(request.getfixturevalue("spanner_database_url"))
    if request.param == "spanner_postgresql":  # a PostgreSQL-dialect Spanner database
        return str(request.getfixturevalue("spanner_postgresql_database_url"))
    return str(request.getfixturevalue("pg_database_url"))
