"""Fixtures of the fault tests, and the figures they report.

Every fault test records its figures (drops injected and resolved, kills, lost / duplicated
/ ghost / stale counts, durations) in the ``fault_figures`` dict. They are written to
``tests/faults/.results/<test>.json`` (gitignored) whether the test passes or not, and
printed in a "fault figures" section at the end of the run, with or without ``-s``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pgserver import PostgresServer

RESULTS = Path(__file__).parent / ".results"
_reported: list[tuple[str, dict[str, Any]]] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: fault-injection test (tests/faults)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            if "private_postgres" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.postgres)


@pytest.fixture
def private_postgres() -> Iterator[Callable[..., PostgresServer]]:
    """Start PostgreSQL servers of the test's own, which it may crash; all removed afterwards.

    The session's shared server must not be crashed under other tests. Without the server
    binaries the test is skipped, except under ``CI=true`` where it fails.
    """
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but initdb/pg_ctl are not on PATH", pytrace=False)
        pytest.skip("initdb/pg_ctl not on PATH: cannot start a server to crash")
    servers: list[PostgresServer] = []

    def start(settings: dict[str, str] | None = None) -> PostgresServer:
        server = PostgresServer.start(settings)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.cleanup()


@pytest.fixture
def fault_figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A dict the test fills with its figures; saved and summarised after the test."""
    figures: dict[str, Any] = {}
    yield figures
    if not figures:
        return
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("::", 1)[-1])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")
    _reported.append((request.node.nodeid, figures))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _reported:
        return
    terminalreporter.section("fault figures")
    for nodeid, figures in _reported:
        shown = {k: v for k, v in figures.items() if not isinstance(v, (dict, list))}
        nested = {k: v for k, v in figures.items() if isinstance(v, dict)}
        terminalreporter.write_line(f"{nodeid}: {json.dumps(shown, default=str)}")
        for key, value in nested.items():
            value = {k: v for k, v in value.items() if k != "details"}
            terminalreporter.write_line(f"    {key}: {json.dumps(value, default=str)}")
    summary = {nodeid: figures for nodeid, figures in _reported}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
