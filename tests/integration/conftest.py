"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from events_receiver import Receiver, running_receiver
from postgres_support import JOBS_QUEUE

import txqueue


@pytest.fixture
def db(pg_database_url: str) -> Iterator[txqueue.Database]:
    """A fresh PostgreSQL database holding the queue ``jobs``. (Modules that run on both
    engines define a ``db`` of their own.)"""
    with txqueue.connect(pg_database_url) as database:
        database.update_ddl([JOBS_QUEUE])
        yield database


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP server recording the deliveries it receives (tests/integration/events_receiver)."""
    with running_receiver() as server:
        yield server


@pytest.fixture
def events(db: txqueue.Database) -> txqueue.Events:
    """The event layer over the module's ``db``, with the bus ``orders``."""
    events = txqueue.Events(db)
    events.create_bus("orders")
    return events


_summary_lines: list[str] = []


@pytest.fixture(scope="session")
def summary_lines() -> list[str]:
    """Lines a test adds to print after the run (the schemathesis contract's counts)."""
    return _summary_lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _summary_lines:
        terminalreporter.write_line(line)
