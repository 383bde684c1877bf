"""SQLite's authorizer holds translated statements to Spanner SQL's functions.

The translator already refuses such calls (``tests/conformance/test_sql_functions.py``);
this is the engine's own check behind it, seen from the driver: a ``TranslatedSql``
statement may not call ``fts3_tokenizer`` (which returns a heap pointer), ATTACH or PRAGMA,
while txqueue's own SQL (a plain ``str``) runs as before, on txqueue's pooled connections and
on the application's own.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from txqueue.drivers.base import TranslatedSql
from txqueue.drivers.sqlite import engine
from txqueue.errors import InvalidArgument


@pytest.fixture(params=["pooled", "own"])
def connection(request: pytest.FixtureRequest, tmp_path: Path) -> sqlite3.Connection:
    """One of txqueue's connections, or the application's own sqlite3 connection."""
    path = str(tmp_path / "app.db")
    if request.param == "pooled":
        made = engine.connect(path, "NORMAL", timedelta(seconds=1))
    else:
        made = sqlite3.connect(path, isolation_level=None)
    made.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    made.execute("INSERT INTO t VALUES (1, 'Ada')")
    request.addfinalizer(made.close)
    return made


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT fts3_tokenizer('simple')", r"function fts3_tokenizer\(\)"),
        ("SELECT load_extension('x')", r"function load_extension\(\)"),
        ("SELECT sqlite_version()", r"function sqlite_version\(\)"),
        ("SELECT lower(name), fts3_tokenizer('simple') FROM t", "fts3_tokenizer"),
        ("ATTACH DATABASE ':memory:' AS other", "ATTACH"),
        ("PRAGMA journal_mode=DELETE", "PRAGMA journal_mode"),
        ("CREATE TABLE u (id INTEGER)", "CREATE_TABLE u"),
    ],
)
def test_translated_statements_are_held_to_the_allow_list(
    connection: sqlite3.Connection, sql: str, refused: str
) -> None:
    with pytest.raises(InvalidArgument, match=refused):
        engine.execute_sql(connection, TranslatedSql(sql), None)
    # The refusal lasts for that statement only: txqueue's own SQL runs as before.
    assert engine.execute_sql(connection, "SELECT name FROM t", None).rows == [("Ada",)]
    pointer = engine.execute_sql(connection, "SELECT fts3_tokenizer('simple')", None).rows
    assert isinstance(pointer[0][0], bytes)


def test_allowed_functions_run(connection: sqlite3.Connection) -> None:
    sql = TranslatedSql(
        "SELECT lower(name), upper(name), count(*), abs(-1), substr(name, 2), length(name),"
        " hex(randomblob(2)) IS NOT NULL, name LIKE 'A%', strftime('%Y', 0, 'unixepoch'),"
        " json_extract('{\"a\": 1}', '$.a') FROM t"
    )
    assert engine.execute_sql(connection, sql, None).rows == [
        ("ada", "ADA", 1, 1, "da", 3, 1, 1, "1970", 1)
    ]
    count = engine.execute_update(
        connection, TranslatedSql("UPDATE t SET name = upper(name) WHERE id = ?"), (1,), 1
    )
    assert count == 1
