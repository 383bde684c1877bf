"""``txqueue sql``: one-shot statements, scripts on stdin, the interactive shell."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from rich.console import Console

import txqueue
from txqueue.cli import sql as sql_cli
from txqueue.cli.main import main

SETUP = (
    "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId);"
    "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId);"
    "INSERT INTO Users (UserId, UserName) VALUES (124, 'New User');"
    "INSERT INTO UserTasks (UserId, MessageId, Payload) VALUES (124, 'welcome', b'hi');"
)


@pytest.fixture
def url(sqlite_url: str) -> str:
    result = CliRunner().invoke(main, ["sql", "--database", sqlite_url, SETUP])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "DDL applied", "DDL applied", "Statement modified 1 row", "Statement modified 1 row",
    ]  # fmt: skip
    return sqlite_url


def run(url: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["sql", "--database", url, *args], input=stdin)
    return result.exit_code, result.output


def test_a_query_prints_a_table(url: str) -> None:
    code, output = run(url, "SELECT UserId, UserName FROM Users")
    assert code == 0
    assert "UserName" in output and "New User" in output and "124" in output


def test_json_rows(url: str) -> None:
    code, output = run(url, "--json", "SELECT * FROM UserTasks")
    row = json.loads(output)
    assert code == 0 and row["MessageId"] == "welcome" and row["Payload"] == "hi"
    assert row["Payload_encoding"] == "text"  # bytes: text when UTF-8, else base64
    assert row["DeliverTime"].endswith("Z")


def test_receive_streams_rows_and_parameters_fill_renewlease(url: str) -> None:
    code, output = run(
        url,
        "--json",
        "SELECT UserId, SpannerLeaseToken FROM RECEIVE_UserTasks(max_duration=>'1s')",
    )
    assert code == 0
    token = json.loads(output)["SpannerLeaseToken"]
    code, output = run(
        url, "--json", "-p", f"t={token}", "SELECT * FROM RENEWLEASE_UserTasks([@t])"
    )
    assert code == 0 and json.loads(output)["SpannerOldLeaseToken"] == token


def test_errors_exit_with_1_and_name_the_problem(url: str) -> None:
    result = CliRunner().invoke(main, ["sql", "--database", url, "SELECT * FROM Nope"])
    assert result.exit_code == 1
    assert "NotFound" in result.output and "Nope" in result.output
    code, _ = run(url, "UPDATE UserTasks SET Payload = b'' WHERE true")
    assert code == 1


def test_a_script_on_stdin_runs_statement_by_statement(url: str) -> None:
    script = "-- ack\nDELETE FROM UserTasks\nWHERE UserId = 124 ASSERT_ROWS_MODIFIED 1;\nSELECT COUNT(*) AS n FROM UserTasks;\n"
    code, output = run(url, stdin=script)
    assert code == 0
    assert "Statement modified 1 row" in output and "│ 0 │" in output


@pytest.fixture
def db(url: str) -> Iterator[txqueue.Database]:
    database = txqueue.connect(url)
    yield database
    database.close()


def test_the_shell_reads_statements_over_several_lines(
    db: txqueue.Database, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    lines = iter(["SELECT", "  UserName", "FROM Users;", "SELECT * FROM Nope;", "\\q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    monkeypatch.setattr(sql_cli, "HISTORY", tmp_path / "history")  # type: ignore[operator]
    console = Console(record=True, width=100)
    runner = sql_cli._Runner(db, console, output_format="table", params=None)
    assert runner.shell("sqlite:///test.db") is True
    text = console.export_text()
    assert "New User" in text and "End statements with ';'" in text


def test_backslash_d_spells_types_in_the_databases_dialect(sqlite_url: str) -> None:
    """In the PostgreSQL dialect ``\\d QUEUE`` shows deliver_time and the hidden lease columns
    as that dialect's INFORMATION_SCHEMA spells types (they read ``TIMESTAMP``, GoogleSQL's)."""
    db = txqueue.connect(sqlite_url, dialect="postgresql")
    db.update_ddl(
        ["CREATE QUEUE mail (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"]
    )
    db.close()
    code, output = run(sqlite_url, "\\d mail", "--format", "json")
    types = {row["column"]: row["type"] for row in map(json.loads, output.splitlines())}
    assert code == 0
    assert types["id"] == "bigint" and types["deliver_time"] == "timestamp with time zone"
    assert types["_txq_lease_expiration"] == "timestamp with time zone"
    assert types["_txq_lease_token"] == "character varying"
    assert types["_txq_delivery_count"] == "bigint"


def test_help_spells_receive_in_the_databases_dialect(sqlite_url: str) -> None:
    db = txqueue.connect(sqlite_url, dialect="postgresql")
    db.update_ddl(["CREATE TABLE t (id bigint NOT NULL, PRIMARY KEY (id))"])  # records it
    db.close()
    code, output = run(sqlite_url, stdin="help\n")
    assert code == 0
    assert "spanner.receive_queue(NULL, NULL, '5s')" in output and "RECEIVE_" not in output
