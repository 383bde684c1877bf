"""Pytest fixtures for the Cloud Spanner emulator (the root conftest imports them).

``spanner_emulator`` starts one emulator per session (``tests/spannerserver.py``) and points
the client at it with ``SPANNER_EMULATOR_HOST``; ``spanner_url`` is a fresh GoogleSQL database
per test. Without the emulator or google-cloud-spanner the tests are skipped, except under
``CI=true`` where they fail. ``TXQUEUE_TEST_SPANNER=1`` adds Cloud Spanner to the engines
the conformance and driver suites run on (``database_url``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from spannerserver import ExternalEmulator, SpannerEmulator, find_or_start

#: Set to 1 to run the conformance and driver suites on Cloud Spanner too (without the
#: emulator its tests then fail or skip as the ``spanner_emulator`` fixture says).
ENV_OPT_IN = "TXQUEUE_TEST_SPANNER"


def spanner_opted_in() -> bool:
    """Whether ``database_url`` runs on Cloud Spanner too: with ``TXQUEUE_TEST_SPANNER=1``.
    Not by default, even under ``CI=true``: on the emulator the conformance and driver suites
    take over ten minutes, more than CI's budget allows yet (``tests/spanner`` runs always)."""
    return os.environ.get(ENV_OPT_IN) == "1"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spanner_emulator() -> Iterator[SpannerEmulator | ExternalEmulator]:
    """The session's emulator, with ``SPANNER_EMULATOR_HOST`` pointing at it."""
    if importlib.util.find_spec("google.cloud.spanner") is None:
        _unavailable("google-cloud-spanner is not installed (pip install 'txqueue[spanner]')")
    emulator, reason = find_or_start()
    if emulator is None:
        _unavailable(reason)
    assert emulator is not None
    previous = os.environ.get("SPANNER_EMULATOR_HOST")
    os.environ["SPANNER_EMULATOR_HOST"] = emulator.host
    try:
        yield emulator
    finally:
        if previous is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = previous
        emulator.stop()


@pytest.fixture
def spanner_url(spanner_emulator: SpannerEmulator | ExternalEmulator) -> Iterator[str]:
    """A fresh GoogleSQL database on the emulator; dropped afterwards."""
    url = spanner_emulator.create_database()
    try:
        yield url
    finally:
        spanner_emulator.drop_database(url)


@pytest.fixture
def spanner_database_url(spanner_emulator: SpannerEmulator | ExternalEmulator) -> Iterator[str]:
    """A fresh GoogleSQL database in the state a first connect leaves (txqueue's catalog
    made), for ``database_url``: made in one request with the catalog's DDL, which saves
    each test the connect's schema change (about 0.1 s on the emulator)."""
    from txqueue.drivers.spanner.statements import CATALOG

    url = spanner_emulator.create_database(extra_statements=tuple(CATALOG))
    try:
        yield url
    finally:
        spanner_emulator.drop_database(url)


class SpannerAppTransaction:
    """The application's own read-write transaction with the google-cloud-spanner client, as
    a test's "own connection" on Spanner (what sqlite3/psycopg are on the other engines).

    ``conn`` is the open client ``Transaction`` (what ``db.batch(connection=...)`` joins);
    ``execute`` runs DML with ``:name`` parameters in it; ``commit`` and ``rollback`` end it
    and begin the next one, as a DB-API connection would on its next statement. An aborted
    commit is retried as a Spanner application does (and as the client's DB-API does): its
    DML again, then the buffered mutations, in a new transaction. The emulator aborts an open
    transaction whenever another one takes locks, which these tests do on purpose.
    """

    ATTEMPTS = 5

    def __init__(self, url: str) -> None:
        from google.cloud import spanner
        from google.cloud.spanner_v1.session import Session

        path = url.removeprefix("spanner://").split("?", 1)[0]
        _, project, _, instance, _, database = path.split("/")
        self._client = spanner.Client(project=project)
        self._database = self._client.instance(instance).database(database)
        self._session = Session(self._database, is_multiplexed=False)
        self._session.create()
        self.conn: Any = None
        self._statements: list[tuple[str, Any, Any]] = []
        self._begin()

    def _begin(self) -> None:
        self.conn = self._session.transaction()
        self.conn.begin()
        self._statements = []

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        import base64

        from google.cloud.spanner_v1 import param_types

        kinds = {bytes: param_types.BYTES, int: param_types.INT64, str: param_types.STRING}
        values = {k: base64.b64encode(v) if isinstance(v, bytes) else v for k, v in params.items()}
        types = {k: kinds[type(v)] for k, v in params.items()}
        statement = re.sub(r":(\w+)", r"@\1", sql)
        count = int(self.conn.execute_update(statement, params=values, param_types=types))
        self._statements.append((statement, values, types))
        return count

    def commit(self) -> None:
        from google.api_core.exceptions import Aborted

        for attempt in range(1, self.ATTEMPTS + 1):
            try:
                self.conn.commit()
                break
            except Aborted:
                if attempt == self.ATTEMPTS:
                    raise
                mutations = list(self.conn._mutations)
                statements = self._statements
                self._begin()
                for statement, values, types in statements:
                    self.conn.execute_update(statement, params=values, param_types=types)
                self._statements = statements
                self.conn._mutations.extend(mutations)
        self._begin()

    def rollback(self) -> None:
        if self.conn.committed is None and not self.conn.rolled_back:
            self.conn.rollback()
        self._begin()

    def close(self) -> None:
        if self.conn.committed is None and not self.conn.rolled_back:
            with contextlib.suppress(Exception):
                self.conn.rollback()
        with contextlib.suppress(Exception):
            self._session.delete()
        self._client.close()
