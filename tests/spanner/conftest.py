"""Fixtures of the Cloud Spanner tests: a fresh emulator database per test, on both faces.

The emulator and ``spanner_url`` come from ``tests/spannerfixtures.py``; ``face`` runs a test
on the blocking face and on the asyncio face (through a Blocking view, ``tests/blocking.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conformance.support import FACES, Face


@pytest.fixture(params=[pytest.param(face, id=face.name) for face in FACES])
def face(request: pytest.FixtureRequest) -> Face:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def db(face: Face, spanner_url: str) -> Iterator[Any]:
    """A database holding ``Users`` and its interleaved ``UserTasks`` queue."""
    database = face.connect(spanner_url)
    try:
        database.update_ddl(
            [
                "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX))"
                " PRIMARY KEY (UserId)",
                "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
                " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
                " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
            ]
        )
        yield database
    finally:
        database.close()
