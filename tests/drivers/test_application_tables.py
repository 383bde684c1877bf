"""application_tables on each driver: the application's own tables, made by plain SQL (on
Cloud Spanner, by the client's own schema change), read from the engine's catalog; txqueue's
tables and queues are never among them."""

from __future__ import annotations

import sqlite3

from txqueue.core.schema import ApplicationTable, ColumnType

from .support import Harness

#: The application's table, as SQLite, PostgreSQL and a PostgreSQL-dialect Spanner take it.
ORDERS = (
    'CREATE TABLE "Orders" (id bigint NOT NULL, line integer NOT NULL, note text, '
    "paid boolean, PRIMARY KEY (line, id))"
)
#: The same table in GoogleSQL, for a GoogleSQL Spanner database.
ORDERS_GOOGLESQL = (
    "CREATE TABLE Orders (id INT64 NOT NULL, line INT64 NOT NULL, note STRING(MAX), "
    "paid BOOL) PRIMARY KEY (line, id)"
)


def _create_orders(url: str) -> str:
    """Make the application's ``Orders`` table, outside txqueue; returns the engine's own
    spelling of its ``note`` column's type."""
    if url.startswith("sqlite:"):
        connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            connection.execute(ORDERS)
        finally:
            connection.close()
        return "text"
    if url.startswith("spanner:"):
        return _create_on_spanner(url)
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(ORDERS)
    return "text"


def _create_on_spanner(url: str) -> str:
    """The schema change through google-cloud-spanner (on the emulator the tests point it at),
    in the database's own dialect."""
    from google.cloud import spanner

    _, project, _, instance, _, name = url.removeprefix("spanner://").split("?", 1)[0].split("/")
    client = spanner.Client(project=project)
    try:
        database = client.instance(instance).database(name)
        with database.snapshot() as snapshot:  # the emulator leaves database_dialect unset
            [[dialect]] = snapshot.execute_sql(
                "SELECT option_value FROM information_schema.database_options"
                " WHERE option_name = 'database_dialect'"
            )
        googlesql = dialect == "GOOGLE_STANDARD_SQL"
        database.update_ddl([ORDERS_GOOGLESQL if googlesql else ORDERS]).result(60)
    finally:
        client.close()
    return "STRING(MAX)" if googlesql else "character varying"


def test_application_tables_reads_the_engines_catalog(harness: Harness) -> None:
    note_type = _create_orders(harness.url)
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
    assert orders.engine_types[2].lower() == note_type.lower()
