"""``txqueue sql`` as spanner-cli and gcloud users expect: ``help``, ``\\d`` and ``\\d NAME``,
Spanner's INFORMATION_SCHEMA views (from the CLI and from ``execute_sql``), a script from
``--file`` or stdin run statement by statement, or all in one transaction with
``--transaction``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

GOOGLESQL = [
    "CREATE TABLE Users (UserId INT64 NOT NULL, Name STRING(100)) PRIMARY KEY (UserId)",
    "CREATE TABLE Images (UserId INT64 NOT NULL, ImageId STRING(MAX) NOT NULL) "
    "PRIMARY KEY (UserId, ImageId), INTERLEAVE IN PARENT Users ON DELETE CASCADE",
    "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE UNIQUE INDEX UsersByName ON Users (Name DESC)",
]
POSTGRESQL = [
    "CREATE TABLE users (userid bigint NOT NULL, name varchar(100), PRIMARY KEY (userid))",
    "CREATE TABLE images (userid bigint NOT NULL, imageid varchar NOT NULL, "
    "PRIMARY KEY (userid, imageid)) INTERLEAVE IN PARENT users ON DELETE CASCADE",
    "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
    "CREATE UNIQUE INDEX usersbyname ON users (name DESC)",
]


@pytest.fixture
def url(database_url: str) -> str:
    with txqueue.connect(database_url) as db:
        db.update_ddl(POSTGRESQL if db.dialect == "postgresql" else GOOGLESQL)
    return database_url


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.output


def ok(*args: str, stdin: str | None = None) -> str:
    code, output = invoke(*args, stdin=stdin)
    assert code == 0, output
    return output


def lower(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [tuple(v.lower() if isinstance(v, str) else v for v in row) for row in rows]


# ---- INFORMATION_SCHEMA through the API ----------------------------------------------------


def test_information_schema_tables_columns_and_indexes(url: str) -> None:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        tables = list(
            snapshot.execute_sql(
                "SELECT TABLE_NAME, TABLE_TYPE, PARENT_TABLE_NAME, ON_DELETE_ACTION "
                "FROM INFORMATION_SCHEMA.TABLES ORDER BY TABLE_NAME"
            )
        )
        assert lower(tables) == [
            ("images", "base table", "users", "cascade"),
            ("mail", "queue", None, None),
            ("users", "base table", None, None),
        ]
        columns = list(
            snapshot.execute_sql(
                "SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, SPANNER_TYPE "
                "FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'Users' OR "
                "TABLE_NAME = 'users' ORDER BY ORDINAL_POSITION"
            )
        )
        expected_types = (
            ["bigint", "character varying(100)"]
            if db.dialect == "postgresql"
            else ["INT64", "STRING(100)"]
        )
        assert lower(columns) == [
            ("userid", 1, "no", expected_types[0].lower()),
            ("name", 2, "yes", expected_types[1].lower()),
        ]
        indexes = list(
            snapshot.execute_sql(
                "SELECT TABLE_NAME, INDEX_NAME, INDEX_TYPE, IS_UNIQUE "
                "FROM INFORMATION_SCHEMA.INDEXES ORDER BY TABLE_NAME, INDEX_NAME"
            )
        )
        assert ("users", "usersbyname", "index", True) in lower(indexes)
        assert ("mail", "primary_key", "primary_key", True) in lower(indexes)
        key = list(
            snapshot.execute_sql(
                "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.INDEX_COLUMNS "
                "WHERE INDEX_TYPE = 'PRIMARY_KEY' AND (TABLE_NAME = 'Images' "
                "OR TABLE_NAME = 'images') ORDER BY ORDINAL_POSITION"
            )
        )
        assert lower(key) == [("userid",), ("imageid",)]


def test_information_schema_lists_no_hidden_columns_nor_txqueue_tables(url: str) -> None:
    with txqueue.connect(url) as db:
        txqueue.Events(db).create_bus("orders")  # txqueue's own tables now exist
        with db.snapshot() as snapshot:
            names = [row[0] for row in snapshot.execute_sql(
                "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES")]  # fmt: skip
            columns = [row[0] for row in snapshot.execute_sql(
                "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS")]  # fmt: skip
    assert sorted(name.lower() for name in names) == ["images", "mail", "users"]
    assert not [name for name in columns if name.startswith("_txq")]
    assert {"delivertime", "deliver_time"} & {name.lower() for name in columns}


def test_an_unknown_information_schema_view_is_named(url: str) -> None:
    with (
        txqueue.connect(url) as db,
        db.snapshot() as snapshot,
        pytest.raises(txqueue.errors.InvalidArgument, match="SCHEMATA"),
    ):
        list(snapshot.execute_sql("SELECT * FROM INFORMATION_SCHEMA.SCHEMATA"))


# ---- the CLI: \d, help, INFORMATION_SCHEMA ---------------------------------------------------


def test_backslash_d_lists_tables_and_queues(url: str) -> None:
    listing = ok("sql", "\\d", "--database", url, "--format", "json")
    rows = {str(row["name"]).lower(): row for row in map(json.loads, listing.splitlines())}
    assert rows["mail"]["kind"] == "queue" and rows["users"]["kind"] == "table"
    assert str(rows["images"]["parent"]).lower() == "users"
    table = ok("sql", "\\d", "--database", url).lower()
    assert "mail" in table and "queue" in table and "images" in table


def test_backslash_d_name_shows_columns_key_interleaving_and_hidden_lease_columns(
    url: str,
) -> None:
    images = ok("sql", "\\d images", "--database", url).lower()
    assert "primary key (userid, imageid)" in images
    assert "interleaved in parent users on delete cascade" in images
    users = ok("sql", "\\d users", "--database", url).lower()
    assert "index usersbyname (name desc)" in users
    mail = ok("sql", "\\d mail", "--database", url, "--format", "json")
    columns = [json.loads(line)["column"].lower() for line in mail.splitlines()]
    assert columns[:2] == ["id", "payload"]
    assert {"_txq_lease_token", "_txq_lease_expiration", "_txq_delivery_count"} <= set(columns)
    code, output = invoke("sql", "\\d nope", "--database", url)
    assert code == 1 and "NotFound" in output


def test_the_shell_reads_help_and_backslash_d_from_stdin(url: str) -> None:
    output = ok("sql", "--database", url, stdin="help\n")
    assert "\\d NAME" in output and "INFORMATION_SCHEMA" in output
    assert "mail" in ok("sql", "--database", url, stdin="\\d\n").lower()


def test_a_script_mixes_statements_and_backslash_d(url: str) -> None:
    script = "SELECT 1 AS one;\n\\d\nSELECT\n  2 AS two;\n"
    output = ok("sql", "--database", url, "--format", "json", stdin=script)
    lines = [json.loads(line) for line in output.splitlines()]
    assert lines[0] == {"one": 1} and lines[-1] == {"two": 2}
    assert {str(line.get("name")).lower() for line in lines[1:-1]} == {"images", "mail", "users"}


def test_information_schema_queries_from_the_cli(url: str) -> None:
    output = ok(
        "sql",
        "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES ORDER BY TABLE_NAME",
        "--database",
        url,
        "--format",
        "csv",
    )
    assert [line.lower() for line in output.split()[1:]] == ["images", "mail", "users"]


# ---- scripts: statement by statement, or --transaction ---------------------------------------


def _users(url: str) -> list[int]:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        table = "users" if db.dialect == "postgresql" else "Users"
        return sorted(row[0] for row in snapshot.execute_sql(f"SELECT * FROM {table}"))


SCRIPT = "INSERT INTO users (userid) VALUES (1);\nINSERT INTO users (userid) VALUES (1);\n"


def test_a_script_file_runs_statement_by_statement_and_stops_at_the_first_error(
    url: str, tmp_path: Path
) -> None:
    script = tmp_path / "script.sql"
    script.write_text(SCRIPT + "INSERT INTO users (userid) VALUES (3);\n")
    code, output = invoke("sql", "--file", str(script), "--database", url)
    assert code == 1 and "AlreadyExists" in output
    assert _users(url) == [1]  # the first insert stays, the third never ran


def test_a_script_with_transaction_is_all_or_nothing(url: str, tmp_path: Path) -> None:
    code, output = invoke("sql", "--transaction", "--database", url, stdin=SCRIPT)
    assert code == 1 and "nothing was applied" in output
    assert _users(url) == []
    good = "INSERT INTO users (userid) VALUES (5);\nINSERT INTO users (userid) VALUES (6);\n"
    script = tmp_path / "good.sql"
    script.write_text(good + "SELECT COUNT(*) AS n FROM users;\n")
    output = ok("sql", "--transaction", "--file", str(script), "--database", url)
    assert "Statement modified 1 row" in output and "2" in output
    assert _users(url) == [5, 6]
    code, output = invoke("sql", "--transaction", "--database", url, stdin=GOOGLESQL[0])
    assert code == 1 and "DDL" in output


def test_sql_help_says_how_scripts_run() -> None:
    help_text = " ".join(ok("sql", "--help").split())
    assert "--transaction" in help_text and "--file" in help_text
    assert "stops at the first error" in help_text
