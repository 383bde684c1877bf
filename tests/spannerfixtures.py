"""Pytest fixtures for the Cloud Spanner emulator (the root conftest imports them).

``spanner_emulator`` starts one emulator per session (``tests/spannerserver.py``) and points
the client at it with ``SPANNER_EMULATOR_HOST``; ``spanner_url`` is a fresh GoogleSQL database
per test. Without the emulator or google-cloud-spanner the tests are skipped, except under
``CI=true`` where they fail. The conformance and driver suites run on Cloud Spanner too
(``database_url``): a GoogleSQL database (``spanner_database_url``) and a PostgreSQL-dialect
one (``spanner_postgresql_database_url``); ``TXQUEUE_TEST_SPANNER=0`` leaves them out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spannerserver import ExternalEmulator, SpannerEmulator, find_or_start

#: Which tests take ``database_url``'s Cloud Spanner params: unset, the conformance and
#: driver suites (``SUITES``); ``0``, none (quick local runs); ``1``, every test that takes
#: ``database_url``. Without the emulator they skip, or fail under ``CI=true``.
ENV_SWITCH = "TXQUEUE_TEST_SPANNER"
#: The suites that run on Cloud Spanner by default, a GoogleSQL and a PostgreSQL-dialect
#: database each (``tests/spanner`` runs on the emulator always).
SUITES = tuple(Path(__file__).parent / name for name in ("conformance", "drivers"))


def _switch() -> str:
    value = os.environ.get(ENV_SWITCH, "")
    if value not in ("", "0", "1"):
        raise pytest.UsageError(f"{ENV_SWITCH} must be 0, 1 or unset, not {value!r}")
    return value


def spanner_params_on() -> bool:
    """Whether ``database_url`` has its Cloud Spanner params: unless ``TXQUEUE_TEST_SPANNER=0``."""
    return _switch() != "0"


def spanner_wanted(path: Path) -> bool:
    """Whether the test in ``path`` runs on ``database_url``'s Cloud Spanner params: in
    ``SUITES``, or anywhere with ``TXQUEUE_TEST_SPANNER=1``; nowhere with ``0``."""
    switch = _switch()
    if switch:
        return switch == "1"
    return any(path.is_relative_to(suite) for suite in SUITES)


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


def _alive(emulator: SpannerEmulator | ExternalEmulator) -> SpannerEmulator | ExternalEmulator:
    """``emulator``, started anew if it crashed since the last test (the client finds it
    through ``SPANNER_EMULATOR_HOST``, read at each connect)."""
    if emulator.restart_if_dead():
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.host
    return emulator


@pytest.fixture
def spanner_url(spanner_emulator: SpannerEmulator | ExternalEmulator) -> Iterator[str]:
    """A fresh GoogleSQL database on the emulator; dropped afterwards."""
    url = _alive(spanner_emulator).create_database()
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

    url = _alive(spanner_emulator).create_database(extra_statements=tuple(CATALOG))
    try:
        yield url
    finally:
        spanner_emulator.drop_database(url)


@pytest.fixture
def spanner_postgresql_database_url(
    spanner_emulator: SpannerEmulator | ExternalEmulator,
) -> Iterator[str]:
    """A fresh PostgreSQL-dialect database in the state a first connect leaves (txqueue's
    catalog made, in that dialect), for ``database_url``'s ``spanner_postgresql``."""
    from txqueue.drivers.spanner.statements import CATALOG_POSTGRESQL

    url = _alive(spanner_emulator).create_database(
        dialect="postgresql", extra_statements=tuple(CATALOG_POSTGRESQL)
    )
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
        [[dialect]] = list(
            self._session.snapshot().execute_sql(
                "SELECT option_value FROM INFORMATION_SCHEMA.DATABASE_OPTIONS"
                " WHERE option_name = 'database_dialect'"
            )
        )
        #: a PostgreSQL-dialect database takes ``$1, $2 …`` bound to ``p1, p2 …``
        self.postgresql = dialect == "POSTGRESQL"
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
        if self.postgresql:
            numbers = {name: f"p{n}" for n, name in enumerate(params, 1)}
            statement = re.sub(r":(\w+)", lambda m: "$" + numbers[m.group(1)][1:], sql)
            values = {numbers[k]: v for k, v in values.items()}
            types = {numbers[k]: t for k, t in types.items()}
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
