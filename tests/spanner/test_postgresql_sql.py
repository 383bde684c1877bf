"""The SQL front end's target for PostgreSQL-dialect Cloud Spanner databases, on the emulator.

The statements are translated for ``spanner_postgresql`` (no txqueue driver involved) and run
with the google-cloud-spanner client on a fresh PostgreSQL-dialect database, the ``?`` markers
numbered ``$1, $2 …`` as the driver does: txqueue's internal GoogleSQL (the event layer's and
the worker registry's), the conformance suite's PostgreSQL-dialect statements, the rewrites
for what Spanner's PostgreSQL dialect spells differently (INTERVAL arithmetic, UUIDs, JSON
paths), INFORMATION_SCHEMA, and ASSERT_ROWS_MODIFIED's count query.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conformance.support import POSTGRESQL_DDL

from txqueue.core.schema import ColumnType, CreateTable, Dialect, Table
from txqueue.drivers.spanner.assertion import rows_modified
from txqueue.events.records import CONFIG_QUERY
from txqueue.events.records import TABLES as EVENT_TABLES
from txqueue.events.unmatched import unmatched_query
from txqueue.sql import DmlPlan, QueryPlan, parse_sql
from txqueue.sql.ddl import parse_ddl
from txqueue.worker.registry import DISPATCHER_TABLES
from txqueue.worker.registry import TABLES as REGISTRY_TABLES

TARGET = "spanner_postgresql"
NOW = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
_PG_TYPES = {
    ColumnType.STRING: "varchar",
    ColumnType.INT64: "bigint",
    ColumnType.BOOL: "boolean",
    ColumnType.TIMESTAMP: "timestamptz",
    ColumnType.FLOAT64: "float8",
    ColumnType.BYTES: "bytea",
    ColumnType.JSON: "jsonb",
}


def _application_tables() -> dict[str, Table]:
    tables = {}
    for text in POSTGRESQL_DDL:
        statement = parse_ddl(text, Dialect.POSTGRESQL)
        assert isinstance(statement, CreateTable)
        tables[statement.table.name.lower()] = statement.table
    return tables


INTERNAL = {t.name: t for t in (*EVENT_TABLES, *REGISTRY_TABLES, *DISPATCHER_TABLES)}
APPLICATION = _application_tables()
CATALOG: dict[str, Table] = {**INTERNAL, **APPLICATION}


def _create(table: Table) -> str:
    """Plain Spanner PostgreSQL DDL for ``table`` (a queue as its columns and deliver_time)."""
    columns = [
        f'"{c.name}" {_PG_TYPES[c.type]}{"[]" if c.array else ""}'
        f"{'' if c.nullable else ' NOT NULL'}"
        for c in table.columns
    ]
    if table.is_queue:
        columns.append('"deliver_time" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP')
    key = ", ".join(f'"{name}"' for name in table.primary_key)
    parent = f" INTERLEAVE IN PARENT {table.parent} ON DELETE CASCADE" if table.parent else ""
    return f'CREATE TABLE "{table.name}" ({", ".join(columns)}, PRIMARY KEY ({key})){parent}'


def _numbered(sql: str, params: Any) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """``?`` markers (outside quotes) as ``$1, $2 …`` and their values with types, as the
    driver sends them."""
    from google.cloud.spanner_v1 import param_types

    pieces, count, quote = [], 0, None
    for character in sql:
        if quote is not None:
            quote = None if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "?":
            count += 1
            pieces.append(f"${count}")
            continue
        pieces.append(character)
    assert isinstance(params, list) and count == len(params), (sql, params)
    kinds = {
        bool: param_types.BOOL,
        int: param_types.INT64,
        float: param_types.FLOAT64,
        str: param_types.STRING,
        bytes: param_types.BYTES,
        datetime: param_types.TIMESTAMP,
    }
    values = {f"p{n}": value for n, value in enumerate(params, 1)}
    types = {
        f"p{n}": kinds[type(value)] for n, value in enumerate(params, 1) if type(value) in kinds
    }
    for name, value in values.items():
        if isinstance(value, bytes):
            values[name] = base64.b64encode(value)
    return "".join(pieces), values or None, types or None


def _plan(sql: str, dialect: Dialect, params: Any = None, internal: bool = False) -> Any:
    statement = parse_sql(sql, dialect, internal=internal)
    tables = {name.lower(): CATALOG[name.lower()] for name in statement.tables}
    catalog = (dict(APPLICATION), {}) if statement.reads_information_schema else None
    return statement.plan(tables, TARGET, params, catalog=catalog)


@pytest.fixture
def database(spanner_emulator: Any) -> Iterator[Any]:
    """A fresh PostgreSQL-dialect database holding the conformance schema and txqueue's
    event and registry tables, as the google-cloud-spanner client's Database."""
    from google.cloud import spanner

    statements = tuple(_create(table) for table in CATALOG.values())
    url = spanner_emulator.create_database("postgresql", extra_statements=statements)
    _, project, _, instance, _, name = url.removeprefix("spanner://").split("/")
    try:
        yield spanner.Client(project=project).instance(instance).database(name)
    finally:
        spanner_emulator.drop_database(url)


def query(database: Any, sql: str, dialect: Dialect, params: Any = None, **kw: Any) -> list[Any]:
    plan = _plan(sql, dialect, params, **kw)
    assert isinstance(plan, QueryPlan)
    with database.snapshot() as snapshot:
        text, values, types = _numbered(plan.sql, plan.params)
        return [tuple(row) for row in snapshot.execute_sql(text, params=values, param_types=types)]


def update(database: Any, sql: str, dialect: Dialect, params: Any = None, **kw: Any) -> int:
    plan = _plan(sql, dialect, params, **kw)
    assert isinstance(plan, DmlPlan)
    text, values, types = _numbered(plan.sql, plan.params)
    return int(
        database.run_in_transaction(
            lambda txn: txn.execute_update(text, params=values, param_types=types)
        )
    )


def _seed(database: Any) -> None:
    statements = [
        "INSERT INTO users (userid, username) VALUES (1, 'Ada'), (2, 'Grace')",
        "INSERT INTO usertasks (userid, messageid, payload, deliver_time)"
        " VALUES (1, 'a', 'x'::bytea, now()), (1, 'b', 'y'::bytea, now())",
    ]
    database.run_in_transaction(lambda txn: [txn.execute_update(s) for s in statements])


G, P = Dialect.GOOGLESQL, Dialect.POSTGRESQL


def test_the_worker_registrys_internal_sql_runs(database: Any) -> None:
    from txqueue.worker import registry

    update(
        database,
        "INSERT INTO txqueue_worker_throughput (worker, queue, minute, handled, failed,"
        " dead_lettered) VALUES (@w, @q, @m, 3, 1, 0)",
        G,
        {"w": "w1", "q": "Mail", "m": NOW},
        internal=True,
    )
    rows = query(
        database,
        registry._THROUGHPUT.format(only=" AND LOWER(queue) = LOWER(@queue)"),
        G,
        {"since": NOW - timedelta(hours=1), "queue": "mail"},
        internal=True,
    )
    assert rows == [("Mail", NOW, 3, 1, 0)]
    live = registry._LIVE.format(table="txqueue_workers", listed="queues")
    assert query(database, live, G, {"now": NOW}, internal=True) == []
    assert update(database, registry._OLD_BUCKETS, G, {"before": NOW}, internal=True) == 0
    expired = registry._EXPIRED.format(table="txqueue_dispatchers")
    assert update(database, expired, G, {"now": NOW}, internal=True) == 0


def test_the_event_layers_internal_sql_runs(database: Any) -> None:
    from txqueue.events import recorder
    from txqueue.events._async import archive

    update(
        database,
        "INSERT INTO txqueue_event_messages (message_uid, bus, event_id, event_source,"
        " event_type, event, publish_time) VALUES ('m1', 'orders', 'e', 's', 't', '{}', @now)",
        G,
        {"now": NOW},
        internal=True,
    )
    update(
        database,
        "INSERT INTO txqueue_event_attempts (message_uid, pipeline, attempt, bus, attempt_time,"
        " state, traceback) VALUES ('m1', '', 1, 'orders', @now, 'failed', 'tb')",
        G,
        {"now": NOW},
        internal=True,
    )
    assert query(database, CONFIG_QUERY, G, internal=True) == []
    sql, params = unmatched_query("orders", NOW - timedelta(days=1), 10)
    assert query(database, sql, G, params, internal=True) == [("m1", "orders", "{}", NOW)]
    undelivered = archive._UNDELIVERED + " AND a.pipeline <> '' ORDER BY m.publish_time,"
    undelivered += " a.message_uid, a.pipeline LIMIT @limit"
    assert query(database, undelivered, G, {"limit": 5}, internal=True) == []
    forget = {"uid": "m1", "pipeline": "", "oldest": 1}
    assert update(database, recorder._FORGET_TRACEBACKS, G, forget, internal=True) == 1
    purge = "DELETE FROM txqueue_event_messages WHERE publish_time < @cutoff AND bus = @bus"
    cutoff = {"cutoff": NOW + timedelta(seconds=1), "bus": "orders"}
    assert update(database, purge, G, cutoff, internal=True) == 1


def test_googlesql_functions_are_spelled_as_spanners_postgresql_dialect(database: Any) -> None:
    (row,) = query(
        database,
        "SELECT TIMESTAMP_ADD(@now, INTERVAL 29 DAY), TIMESTAMP_SUB(@now, INTERVAL @n SECOND),"
        " TIMESTAMP_ADD(@now, INTERVAL 5 MILLISECOND), LENGTH(GENERATE_UUID()),"
        " FARM_FINGERPRINT('x'), IFNULL(NULL, 'dflt'), CURRENT_TIMESTAMP() IS NOT NULL",
        G,
        {"now": NOW, "n": 90},
        internal=True,
    )
    assert row == (
        NOW + timedelta(days=29),
        NOW - timedelta(seconds=90),
        NOW + timedelta(milliseconds=5),
        36,
        -4503883598042011646,
        "dflt",
        True,
    )


def test_the_conformance_suites_postgresql_statements_run(database: Any) -> None:
    assert update(database, "INSERT INTO users (userid, username) VALUES (1, 'Ada')", P) == 1
    assert (
        update(database, "INSERT INTO users (userid, username) VALUES ($1, $2)", P, [2, "Gr"]) == 1
    )
    update(database, "UPDATE users SET username = 'Grace' WHERE userid = 2", P)
    update(
        database,
        "INSERT INTO usertasks (userid, messageid, payload) VALUES (1, 'a', 'x'::bytea),"
        " (1, 'b', CAST('y' AS bytea)), (2, 'c', $1)",
        P,
        [b"z"],
    )
    assert query(database, "SELECT userid, username FROM users ORDER BY userid", P) == [
        (1, "Ada"),
        (2, "Grace"),
    ]
    assert query(database, "SELECT COUNT(*) FROM usertasks", P) == [(3,)]
    keys = query(database, "SELECT userid, messageid FROM usertasks ORDER BY userid, messageid", P)
    assert keys == [(1, "a"), (1, "b"), (2, "c")]
    (star,) = query(database, "SELECT * FROM usertasks WHERE messageid = 'c'", P)
    assert star[:2] == (2, "c") and isinstance(star[3], datetime)
    assert base64.b64decode(star[2]) == b"z"  # the client gives BYTES as base64
    (functions,) = query(
        database,
        "SELECT count(*), max(length(username)), lower(min(username)), upper('x'),"
        " coalesce(NULL, 3), abs(-2), substr('abcdef', 2, 3), concat('a', 'b'),"
        " now() IS NOT NULL, replace('aXa', 'X', 'b'), btrim(' t ')"
        " FROM users WHERE username LIKE '%a%'",
        P,
    )
    assert functions == (2, 5, "ada", "X", 3, 2, "bcd", "ab", True, "aba", "t")
    deleted = update(database, "DELETE FROM usertasks WHERE userid = 1 AND messageid = 'a'", P)
    assert deleted == 1
    assert query(database, "SELECT userid FROM users WHERE userid = ANY($1)", P, [[2, 9]]) == [(2,)]


def test_postgresql_interval_arithmetic_and_functions_run(database: Any) -> None:
    (row,) = query(
        database,
        "SELECT $1 + INTERVAL '29 DAY', $1 - INTERVAL '1 hour 30 minutes',"
        " INTERVAL '2 SECOND' + $1, CAST(gen_random_uuid() AS varchar) IS NOT NULL",
        P,
        [NOW],
    )
    assert row == (
        NOW + timedelta(days=29),
        NOW - timedelta(hours=1, minutes=30),
        NOW + timedelta(seconds=2),
        True,
    )


def test_json_paths_are_arrows(database: Any) -> None:
    sql = "SELECT JSON_VALUE(@doc, '$.a.b'), JSON_QUERY(@doc, '$.list[1]')"
    plan = _plan(sql, G, {"doc": {"a": {"b": "x"}, "list": [1, 2]}}, internal=True)
    assert "->" in plan.sql
    sql = 'SELECT CAST(\'{"a": {"b": "x"}, "n": [1, 2]}\' AS jsonb) -> \'a\' ->> \'b\''
    assert query(database, sql, P) == [("x",)]


def test_information_schema_of_a_database_without_tables(spanner_emulator: Any) -> None:
    """An empty view was ``SELECT NULL … WHERE FALSE``, which Spanner refuses (no WHERE
    without FROM): now no rows, no error, in both of Spanner's dialects."""
    from google.cloud import spanner

    for dialect, target in ((G, "spanner"), (P, TARGET)):
        url = spanner_emulator.create_database(dialect.value)
        _, project, _, instance, _, name = url.removeprefix("spanner://").split("/")
        try:
            database = spanner.Client(project=project).instance(instance).database(name)
            statement = parse_sql(
                "SELECT table_name FROM information_schema.tables WHERE parent_table_name = 'x'",
                dialect,
            )
            plan = statement.plan({}, target, catalog=({}, {}))
            assert isinstance(plan, QueryPlan)
            with database.snapshot() as snapshot:
                assert list(snapshot.execute_sql(plan.sql)) == []
        finally:
            spanner_emulator.drop_database(url)


def test_information_schema_views_in_postgresql_spelling(database: Any) -> None:
    rows = query(
        database,
        "SELECT table_schema, table_name, table_type, parent_table_name"
        " FROM information_schema.tables ORDER BY table_name",
        P,
    )
    assert rows == [
        ("public", "users", "BASE TABLE", None),
        ("public", "usertasks", "QUEUE", "users"),
    ]
    columns = query(
        database,
        "SELECT column_name, spanner_type FROM information_schema.columns"
        " WHERE table_name = 'usertasks' ORDER BY ordinal_position",
        P,
    )
    assert columns == [
        ("userid", "bigint"),
        ("messageid", "character varying(36)"),
        ("payload", "bytea"),
        ("deliver_time", "timestamp with time zone"),
    ]


def _check(database: Any, sql: str, params: Any = None) -> tuple[int, int]:
    """ASSERT_ROWS_MODIFIED's check as the driver runs it on this dialect: (expected, counted)
    — the statement's rows counted first, with the statement's own parameters."""
    plan = _plan(sql, P, params)
    assert isinstance(plan, DmlPlan) and plan.expected_rows is not None
    text, values, types = _numbered(plan.sql, plan.params)
    count = rows_modified(text)
    assert count is not None
    with database.snapshot() as snapshot:
        return plan.expected_rows, count(snapshot, values, types)


def test_assert_rows_modified_counts_what_the_dml_would_change(database: Any) -> None:
    _seed(database)
    delete = "DELETE FROM usertasks WHERE userid = $1 ASSERT_ROWS_MODIFIED 1"
    assert _check(database, delete, [1]) == (1, 2)
    rename = "UPDATE users SET username = 'x' WHERE userid = $1 ASSERT_ROWS_MODIFIED $2"
    assert _check(database, rename, [2, 1]) == (1, 1)
    copy = (
        "INSERT INTO users (userid, username) SELECT userid + 10, username FROM users"
        " ASSERT_ROWS_MODIFIED 3"
    )
    assert _check(database, copy) == (3, 2)
    values = "INSERT INTO users (userid, username) VALUES (7, 'a'), (8, 'b') ASSERT_ROWS_MODIFIED 2"
    assert _check(database, values) == (2, 2)


def test_googlesql_spanner_through_the_faces(face: Any, spanner_url: str) -> None:
    """On a GoogleSQL database: GENERATE_UUID() was written as PostgreSQL's GEN_RANDOM_UUID()
    ("Function not found"), and INFORMATION_SCHEMA of a database without tables as a WHERE
    without FROM; both run now, on both faces."""
    db = face.connect(spanner_url)
    try:
        with db.snapshot() as snapshot:
            (row,) = list(snapshot.execute_sql("SELECT GENERATE_UUID() AS u"))
            assert len(row[0]) == 36
            tables = "SELECT table_name FROM INFORMATION_SCHEMA.TABLES WHERE table_type = 'x'"
            assert list(snapshot.execute_sql(tables)) == []
    finally:
        db.close()
