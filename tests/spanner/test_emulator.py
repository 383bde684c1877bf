"""The emulator fixture itself: it starts, answers, and makes databases in both dialects."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from txqueue.drivers.engines import parse_url
from txqueue.errors import InvalidArgument


def _client_database(url: str) -> Any:
    from google.cloud import spanner

    _, project, _, instance, _, database = url.removeprefix("spanner://").split("/")
    return spanner.Client(project=project).instance(instance).database(database)


@pytest.mark.parametrize("dialect", ["googlesql", "postgresql"])
def test_the_emulator_answers_on_a_fresh_database(spanner_emulator: Any, dialect: str) -> None:
    url = spanner_emulator.create_database(dialect)
    try:
        database = _client_database(url)
        with database.snapshot() as snapshot:
            rows = list(
                snapshot.execute_sql(
                    "SELECT option_value FROM INFORMATION_SCHEMA.DATABASE_OPTIONS"
                    " WHERE option_name = 'database_dialect'"
                )
            )
        assert rows == [["POSTGRESQL" if dialect == "postgresql" else "GOOGLE_STANDARD_SQL"]]
    finally:
        spanner_emulator.drop_database(url)


def test_a_spanner_url_names_project_instance_and_database() -> None:
    parsed = parse_url("spanner://projects/my-project/instances/main/databases/orders")
    assert (parsed.engine, parsed.target) == (
        "spanner",
        "projects/my-project/instances/main/databases/orders",
    )


@pytest.mark.parametrize(
    "url",
    [
        "spanner://projects/my-project/instances/main",
        "spanner://projects/my-project/instances/main/databases/Orders",
        "spanner://projects/my-project/instances/main/databases/orders/extra",
        "spanner://host:9010/databases/orders",
        "spanner://projects/my-project/instances/main/databases/orders?pool_size=3",
    ],
)
def test_a_malformed_spanner_url_is_refused_naming_the_rule(url: str) -> None:
    with pytest.raises(InvalidArgument, match="Spanner URL"):
        parse_url(url)


def test_a_crashed_emulator_is_started_anew_for_the_next_test(spanner_emulator: Any) -> None:
    """The emulator crashes now and then (a segfault in its gRPC server, and the gateway
    then exits): the database fixtures start another in its place (``restart_if_dead``), so
    one crash costs one test, not every Spanner test after it in the session."""
    from spannerserver import SpannerEmulator

    emulator = SpannerEmulator.start()
    try:
        first_host = emulator.host
        assert emulator.restart_if_dead() is False
        gateway = emulator.process.pid
        children = Path(f"/proc/{gateway}/task/{gateway}/children").read_text().split()
        for child in children:  # emulator_main, as when it segfaults
            os.kill(int(child), signal.SIGSEGV)
        emulator.process.wait(30)
        assert emulator.restart_if_dead() is True
        assert emulator.process.poll() is None and emulator.host != first_host
        url = emulator.create_database()  # the new one answers
        emulator.drop_database(url)
    finally:
        emulator.stop()
