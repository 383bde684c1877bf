"""Fixtures of the driver suite: each driver, opened directly, with a small schema.

Every test runs on four drivers: SQLite and PostgreSQL (``database_url``), each as the asyncio
driver and as the sync driver generated from it (``face``). The asyncio driver is driven
through a Blocking view (``tests/blocking.py``), so one test body exercises both; nothing
above the driver protocol (no Database, no batch, no checks of the public API) is involved.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import Harness, open_driver


@pytest.fixture
def pg_database_url(supplied_pg_database_url: str) -> str:
    """Each PostgreSQL test's fresh database, made ahead of need (see the root conftest)."""
    return supplied_pg_database_url


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> str:
    """The generated sync driver, then the asyncio driver it is generated from."""
    return str(request.param)


@pytest.fixture
def harness(face: str, database_url: str) -> Iterator[Harness]:
    """A driver on a fresh database holding the ``Accounts`` table and the ``Jobs`` queue."""
    driver = open_driver(face, database_url)
    try:
        yield Harness.create(driver, database_url)
    finally:
        driver.close()
