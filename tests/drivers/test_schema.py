"""initialize, load_catalog, apply_ddl and close, on each driver."""

from __future__ import annotations

import pytest

from txqueue.core.schema import Dialect
from txqueue.errors import InvalidArgument
from txqueue.sql.ddl import parse_ddl

from .support import Harness, open_driver


def test_initialize_keeps_the_recorded_dialect_and_refuses_another(harness: Harness) -> None:
    driver = harness.driver
    assert driver.initialize(None) == Dialect.GOOGLESQL  # recorded by the DDL applied
    assert driver.initialize(Dialect.GOOGLESQL) == Dialect.GOOGLESQL
    with pytest.raises(InvalidArgument, match="recorded dialect"):
        driver.initialize(Dialect.POSTGRESQL)


def test_load_catalog_names_tables_and_queues_in_lower_case(harness: Harness) -> None:
    tables, indexes = harness.driver.load_catalog()
    assert {"jobs", "accounts"} <= set(tables)
    jobs, accounts = tables["jobs"], tables["accounts"]
    assert (jobs.is_queue, accounts.is_queue) == (True, False)
    assert [column.name.lower() for column in jobs.key_columns] == ["id"]
    assert jobs.payload_column.name.lower() == "payload"
    assert accounts.primary_key == ("Id",)
    assert indexes == {} or all(name == name.lower() for name in indexes)


def test_apply_ddl_adds_to_the_catalog_and_the_index_is_usable(harness: Harness) -> None:
    driver = harness.driver
    statements = [
        "CREATE TABLE Notes (Id INT64 NOT NULL, Body STRING(MAX)) PRIMARY KEY (Id)",
        "CREATE INDEX NotesByBody ON Notes (Body)",
    ]
    driver.apply_ddl([parse_ddl(text, Dialect.GOOGLESQL) for text in statements])

    tables, indexes = driver.load_catalog()
    assert "notes" in tables and not tables["notes"].is_queue
    assert "notesbybody" in indexes
    assert harness.query("SELECT COUNT(*) FROM notes") == [(0,)]


def test_apply_ddl_of_a_statement_the_engine_refuses_applies_none(harness: Harness) -> None:
    """All or none: the second statement names a table that is there already."""
    driver = harness.driver
    statements = [
        "CREATE TABLE Notes (Id INT64 NOT NULL) PRIMARY KEY (Id)",
        "CREATE TABLE Accounts (Id INT64 NOT NULL) PRIMARY KEY (Id)",
    ]
    with pytest.raises(Exception) as caught:
        driver.apply_ddl([parse_ddl(text, Dialect.GOOGLESQL) for text in statements])
    assert type(caught.value).__module__ == "txqueue.errors"
    tables, _ = driver.load_catalog()
    assert "notes" not in tables


def test_close_twice_is_harmless(harness: Harness) -> None:
    harness.driver.close()
    harness.driver.close()


def test_a_second_driver_sees_the_first_ones_catalog(harness: Harness, face: str) -> None:
    other = open_driver(face, harness.url)
    try:
        assert other.initialize(None) == Dialect.GOOGLESQL
        tables, _ = other.load_catalog()
        assert tables["jobs"] == harness.jobs
    finally:
        other.close()
