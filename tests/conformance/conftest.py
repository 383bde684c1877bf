"""Fixtures of the conformance suite: a connected database holding the shared schema.

``database_url`` (from ``tests/conftest.py``) runs every test once on SQLite and once on a
fresh PostgreSQL database; ``face`` runs it once on the blocking face and once on the asyncio
face (through a Blocking view, see ``tests/blocking.py``). The schema is created in whichever
dialect the database records.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import FACES, Env, Face, Names, default_dialect


@pytest.fixture
def pg_database_url(supplied_pg_database_url: str) -> str:
    """Each PostgreSQL test's fresh database, made ahead of need (see the root conftest)."""
    return supplied_pg_database_url


@pytest.fixture(params=[pytest.param(face, id=face.name) for face in FACES])
def face(request: pytest.FixtureRequest) -> Face:
    """The public API's blocking face, then its asyncio face."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def expected_dialect(request: pytest.FixtureRequest, database_url: str) -> str:
    """The dialect a connect without ``dialect=`` must give on ``database_url``'s fresh
    database: the URL's default, or on Cloud Spanner the dialect the database was made in
    (the ``spanner_postgresql`` param makes a PostgreSQL-dialect one)."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("database_url") == "spanner_postgresql":
        return "postgresql"
    return default_dialect(database_url)


@pytest.fixture
def env(face: Face, database_url: str) -> Iterator[Env]:
    """A database on ``database_url`` with ``Users`` and its interleaved ``UserTasks`` queue."""
    db = face.connect(database_url)
    try:
        db.update_ddl(list(Names.for_dialect(db.dialect).ddl))
        yield Env(db, database_url, face)
    finally:
        db.close()
