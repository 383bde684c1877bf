"""A PostgreSQL database created with ENCODING 'SQL_ASCII' keeps text as unchecked bytes,
which psycopg reads back as ``bytes``: a bus was created but could not be found again, and
the next connect failed with a bare ValueError. txqueue refuses such a database when it
connects, with a FailedPrecondition naming the encoding and what to do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest
from pgserver import drop_database, with_database
from psycopg import sql

import txqueue
from txqueue.errors import FailedPrecondition

pytestmark = pytest.mark.postgres

REFUSAL = r"encoding SQL_ASCII.*txqueue needs UTF8.*ENCODING 'UTF8'"


@pytest.fixture
def ascii_url(postgres_url: str) -> Iterator[str]:
    name = "t_sql_ascii_encoding"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'SQL_ASCII' TEMPLATE template0"
                " LC_COLLATE 'C' LC_CTYPE 'C'"
            ).format(sql.Identifier(name))
        )
    yield with_database(postgres_url, name)
    drop_database(postgres_url, name)


def test_events_on_a_sql_ascii_database_get_a_typed_error(ascii_url: str) -> None:
    with pytest.raises(FailedPrecondition, match=REFUSAL), txqueue.connect(ascii_url) as db:
        txqueue.Events(db).create_bus("orders")
    with pytest.raises(FailedPrecondition, match=REFUSAL):  # a second time, as the first
        txqueue.connect(ascii_url)


def test_the_asyncio_face_too(ascii_url: str) -> None:
    with pytest.raises(FailedPrecondition, match=REFUSAL):
        asyncio.run(txqueue.connect_async(ascii_url))
