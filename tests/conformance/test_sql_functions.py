"""Functions in txqueue's SQL: Spanner SQL's pass, the engine's others are refused.

On PostgreSQL ``query_to_xml`` ran a query given as a string, past the rule that keeps
``txqueue_`` tables out of reach, and read pipelines' signing secrets; on SQLite
``fts3_tokenizer`` returned a heap pointer. Each is an InvalidArgument naming the function,
on both engines, both dialects and both faces.
"""

from __future__ import annotations

import pytest

from txqueue.errors import InvalidArgument

from .support import Env, seconds, sleep_until

SECRET = "whsec_dGhlLXNpZ25pbmctc2VjcmV0LTdmM2E="

#: Functions of the engines (PostgreSQL's, SQLite's) that are not Spanner SQL's.
REFUSED = [
    "pg_read_file('/etc/passwd')",
    "lo_import('/etc/passwd')",
    "current_setting('data_directory')",
    "set_config('statement_timeout', '1', false)",
    "pg_sleep(0)",
    "dblink('dbname=x', 'select 1')",
    "version()",
    "fts3_tokenizer('simple')",
    "load_extension('x')",
    "readfile('/etc/passwd')",
    "sqlite_version()",
]


def test_query_to_xml_does_not_read_txqueue_tables(env: Env) -> None:
    events = env.face.events(env.db)
    events.create_bus("orders")
    events.create_pipeline(
        "p", "http://127.0.0.1:9/hook", signing_secret=SECRET, allow_private=True
    )
    sql = (
        "SELECT query_to_xml('select * from txqueue_event_config', true, false, '') AS x FROM Users"
    )
    with env.db.snapshot() as snapshot, pytest.raises(InvalidArgument, match="query_to_xml"):
        list(snapshot.execute_sql(sql))


@pytest.mark.parametrize("call", REFUSED)
def test_engine_functions_are_refused(env: Env, call: str) -> None:
    refusal = rf"(?i)function {call.split('(')[0]}\(\) is not supported"
    with env.db.snapshot() as snapshot, pytest.raises(InvalidArgument, match=refusal):
        list(snapshot.execute_sql(f"SELECT {call} AS x"))


def test_refused_in_dml_too(env: Env) -> None:
    def work(txn: object) -> None:
        txn.execute_update(  # type: ignore[attr-defined]
            "UPDATE Users SET UserName = CAST(pg_read_file('/etc/passwd') AS STRING)"
            " WHERE UserId = 1"
            if env.db.dialect.value == "googlesql"
            else "UPDATE users SET username = pg_read_file('/etc/passwd') WHERE userid = 1"
        )

    with pytest.raises(InvalidArgument, match=r"function pg_read_file\(\)"):
        env.db.run_in_transaction(work)


def test_schema_qualified_functions_are_refused(env: Env) -> None:
    with env.db.snapshot() as snapshot, pytest.raises(InvalidArgument, match="schema-qualified"):
        list(snapshot.execute_sql("SELECT pg_catalog.lower('A') AS x"))


def test_spanner_functions_still_run(env: Env) -> None:
    env.db.run_in_transaction(
        lambda txn: txn.execute_update(
            "INSERT INTO Users (UserId, UserName) VALUES (1, 'Ada'), (2, 'Grace')"
        )
    )
    sql = (
        "SELECT COUNT(*), MAX(LENGTH(UserName)), LOWER(MIN(UserName)), UPPER('x'),"
        " COALESCE(NULL, 3), ABS(-2), SUBSTR('abcdef', 2, 3), CONCAT('a', 'b'),"
        " CURRENT_TIMESTAMP() IS NOT NULL, REPLACE('aXa', 'X', 'b'), TRIM(' t ')"
        " FROM Users WHERE UserName LIKE '%a%'"
        if env.db.dialect.value == "googlesql"
        else "SELECT count(*), max(length(username)), lower(min(username)), upper('x'),"
        " coalesce(NULL, 3), abs(-2), substr('abcdef', 2, 3), concat('a', 'b'),"
        " now() IS NOT NULL, replace('aXa', 'X', 'b'), btrim(' t ')"
        " FROM users WHERE username LIKE '%a%'"
    )
    with env.db.snapshot() as snapshot:
        rows = [tuple(row) for row in snapshot.execute_sql(sql)]
    assert rows == [(2, 5, "ada", "X", 3, 2, "bcd", "ab", True, "aba", "t")]


def test_the_current_timestamp_of_each_run_is_its_own(env: Env) -> None:
    """The same statement run twice reads the clock twice: a reused plan does not keep the
    first run's instant (SQLite binds the time as a parameter)."""
    sql = (
        "SELECT CURRENT_TIMESTAMP()"
        if env.db.dialect.value == "googlesql"
        else "SELECT CURRENT_TIMESTAMP"
    )
    [(first,)] = env.query(sql)
    sleep_until(first + seconds(0.01))
    [(second,)] = env.query(sql)
    assert second >= first + seconds(0.01)
