"""initialize, load_catalog, apply_ddl and close, on each driver."""

from __future__ import annotations

import pytest

from txqueue.core.schema import Dialect
from txqueue.errors import InvalidArgument

from .support import Harness, open_driver


def test_initialize_keeps_the_recorded_dialect_and_refuses_another(harness: Harness) -> None:
    driver = harness.driver
    dialect = harness.dialect  # recorded by the DDL applied (a Spanner database's own)
    other = Dialect.GOOGLESQL if dialect is Dialect.POSTGRESQL else Dialect.POSTGRESQL
    assert driver.initialize(None) == dialect
    assert driver.initialize(dialect) == dialect
    with pytest.raises(InvalidArgument, match="recorded dialect"):
        driver.initialize(other)


def test_load_catalog_names_tables_and_queues_in_lower_case(harness: Harness) -> None:
    tables, indexes = harness.driver.load_catalog()
    assert {"jobs", "accounts"} <= set(tables)
    jobs, accounts = tables["jobs"], tables["accounts"]
    assert (jobs.is_queue, accounts.is_queue) == (True, False)
    assert [column.name.lower() for column in jobs.key_columns] == ["id"]
    assert jobs.payload_column.name.lower() == "payload"
    assert accounts.primary_key == (("id",) if harness.dialect is Dialect.POSTGRESQL else ("Id",))
    assert indexes == {} or all(name == name.lower() for name in indexes)


def test_apply_ddl_adds_to_the_catalog_and_the_index_is_usable(harness: Harness) -> None:
    driver = harness.driver
    driver.apply_ddl(
        [
            harness.parse_ddl(
                "CREATE TABLE Notes (Id INT64 NOT NULL, Body STRING(MAX)) PRIMARY KEY (Id)",
                "CREATE TABLE notes (id bigint NOT NULL, body varchar, PRIMARY KEY (id))",
            ),
            harness.parse_ddl(
                "CREATE INDEX NotesByBody ON Notes (Body)",
                "CREATE INDEX notesbybody ON notes (body)",
            ),
        ]
    )

    tables, indexes = driver.load_catalog()
    assert "notes" in tables and not tables["notes"].is_queue
    assert "notesbybody" in indexes
    assert harness.query("SELECT COUNT(*) FROM notes") == [(0,)]


def test_apply_ddl_of_a_statement_the_engine_refuses_applies_none(harness: Harness) -> None:
    """All or none: the second statement names a table that is there already."""
    driver = harness.driver
    statements = [
        harness.parse_ddl(
            "CREATE TABLE Notes (Id INT64 NOT NULL) PRIMARY KEY (Id)",
            "CREATE TABLE notes (id bigint NOT NULL, PRIMARY KEY (id))",
        ),
        harness.parse_ddl(
            "CREATE TABLE Accounts (Id INT64 NOT NULL) PRIMARY KEY (Id)",
            "CREATE TABLE accounts (id bigint NOT NULL, PRIMARY KEY (id))",
        ),
    ]
    with pytest.raises(Exception) as caught:
        driver.apply_ddl(statements)
    assert type(caught.value).__module__ == "txqueue.errors"
    tables, _ = driver.load_catalog()
    assert "notes" not in tables


def test_close_twice_is_harmless(harness: Harness) -> None:
    harness.driver.close()
    harness.driver.close()


def test_a_second_driver_sees_the_first_ones_catalog(harness: Harness, face: str) -> None:
    other = open_driver(face, harness.url)
    try:
        assert other.initialize(None) == harness.dialect
        tables, _ = other.load_catalog()
        assert tables["jobs"] == harness.jobs
    finally:
        other.close()
