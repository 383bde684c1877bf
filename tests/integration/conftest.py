"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from postgres_support import JOBS_QUEUE

import txqueue


@pytest.fixture
def db(pg_database_url: str) -> Iterator[txqueue.Database]:
    """A fresh PostgreSQL database holding the queue ``jobs``. (Modules that run on both
    engines define a ``db`` of their own.)"""
    with txqueue.connect(pg_database_url) as database:
        database.update_ddl([JOBS_QUEUE])
        yield database
