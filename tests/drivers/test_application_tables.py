"""application_tables on each driver: the application's own tables, made by plain SQL, read
from the engine's catalog; txqueue's tables and queues are never among them."""

from __future__ import annotations

import sqlite3

import pytest

from txqueue.core.schema import ApplicationTable, ColumnType

from .support import Harness


def _create(url: str, statement: str) -> None:
    if url.startswith("sqlite:"):
        connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            connection.execute(statement)
        finally:
            connection.close()
        return
    if not url.startswith("postgres"):
        pytest.skip("made with plain SQL on SQLite and PostgreSQL")
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(statement)


def test_application_tables_reads_the_engines_catalog(harness: Harness) -> None:
    _create(
        harness.url,
        'CREATE TABLE "Orders" (id bigint NOT NULL, line integer NOT NULL, note text, '
        "paid boolean, PRIMARY KEY (line, id))",
    )
    transaction = harness.driver.begin(read_only=True)
    try:
        named = transaction.application_tables(["ORDERS", "accounts", "missing"])
        everything = transaction.application_tables(None)
    finally:
        transaction.rollback()
    assert set(named) == {"orders"}  # accounts is txqueue's
    assert set(everything) == {"orders"}  # neither the Jobs queue nor txqueue_ tables
    orders = named["orders"]
    assert isinstance(orders, ApplicationTable) and orders.name == "Orders"
    assert [(c.name, c.type, c.nullable) for c in orders.columns] == [
        ("id", ColumnType.INT64, False),
        ("line", ColumnType.INT64, False),
        ("note", ColumnType.STRING, True),
        ("paid", ColumnType.BOOL, True),
    ]
    assert orders.primary_key == ("line", "id")
    assert orders.engine_types[2].lower() == "text"
