"""Fixtures of the conformance suite: a connected database holding the shared schema.

``database_url`` (from ``tests/conftest.py``) runs every test once on SQLite and once on a
fresh PostgreSQL database; the schema is created in whichever dialect the database records.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import txqueue

from .support import Env, Names


@pytest.fixture
def env(database_url: str) -> Iterator[Env]:
    """A database on ``database_url`` with ``Users`` and its interleaved ``UserTasks`` queue."""
    db = txqueue.connect(database_url)
    try:
        db.update_ddl(list(Names.for_dialect(db.dialect).ddl))
        yield Env(db, database_url)
    finally:
        db.close()
