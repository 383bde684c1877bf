"""``txqueue sql`` end to end on the Cloud Spanner emulator: a query, ``\\d`` and ``\\d NAME``
(the queue's hidden lease columns shown as on the other engines), DML, a script, a
``--transaction`` script that is all or nothing, and the shell as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

SCHEMA = [
    "CREATE TABLE Users (UserId INT64 NOT NULL, Name STRING(100)) PRIMARY KEY (UserId)",
    "CREATE TABLE Images (UserId INT64 NOT NULL, ImageId STRING(MAX) NOT NULL)"
    " PRIMARY KEY (UserId, ImageId), INTERLEAVE IN PARENT Users ON DELETE CASCADE",
    "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE UNIQUE INDEX UsersByName ON Users (Name DESC)",
]


@pytest.fixture
def url(spanner_url: str) -> str:
    with txqueue.connect(spanner_url) as db:
        db.update_ddl(SCHEMA)
        with db.batch() as batch:
            batch.send("Mail", ("m1",), b"hello")
    return spanner_url


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.output


def ok(*args: str, stdin: str | None = None) -> str:
    code, output = invoke(*args, stdin=stdin)
    assert code == 0, output
    return output


def _users(url: str) -> list[tuple[int, str | None]]:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        return [tuple(r) for r in snapshot.execute_sql("SELECT UserId, Name FROM Users ORDER BY 1")]


def test_query_backslash_d_and_dml(url: str) -> None:
    output = ok("sql", "SELECT 1 + 1 AS two, 'x' AS letter", "--database", url, "--format", "json")
    assert [json.loads(line) for line in output.splitlines()] == [{"two": 2, "letter": "x"}]

    listing = ok("sql", "\\d", "--database", url, "--format", "json")
    rows = {str(row["name"]): row for row in map(json.loads, listing.splitlines())}
    assert set(rows) == {"Images", "Mail", "Users"}
    assert (rows["Mail"]["kind"], rows["Users"]["kind"], rows["Images"]["parent"]) == (
        "queue",
        "table",
        "Users",
    )
    images = ok("sql", "\\d Images", "--database", url).lower()
    assert "primary key (userid, imageid)" in images
    assert "interleaved in parent users on delete cascade" in images
    assert "index usersbyname (name desc)" in ok("sql", "\\d Users", "--database", url).lower()
    mail = ok("sql", "\\d Mail", "--database", url, "--format", "json")
    columns = [json.loads(line)["column"].lower() for line in mail.splitlines()]
    assert columns[:2] == ["id", "payload"]
    assert {"_txq_lease_token", "_txq_lease_expiration", "_txq_delivery_count"} <= set(columns)
    code, output = invoke("sql", "\\d Nope", "--database", url)
    assert code == 1 and "NotFound" in output

    dml = "INSERT INTO Users (UserId, Name) VALUES (1, 'ada'), (2, 'bob')"
    assert "Statement modified 2 rows" in ok("sql", dml, "--database", url)
    update = "UPDATE Users SET Name = 'eve' WHERE UserId = 2"
    assert "Statement modified 1 row" in ok("sql", update, "--database", url)
    assert _users(url) == [(1, "ada"), (2, "eve")]
    code, output = invoke("sql", "INSERT INTO Users (UserId) VALUES (1)", "--database", url)
    assert code == 1 and "AlreadyExists" in output
    # a queue read with SQL: its declared columns (the payload as base64 in JSON)
    output = ok("sql", "SELECT Id, Payload FROM Mail", "--database", url, "--format", "json")
    [row] = [json.loads(line) for line in output.splitlines()]
    assert row["Id"] == "m1"


def test_scripts_statement_by_statement_and_in_one_transaction(url: str) -> None:
    script = "SELECT 1 AS one;\n\\d\nINSERT INTO Users (UserId, Name) VALUES (7, 'g');\nSELECT\n  2 AS two;\n"
    output = ok("sql", "--database", url, "--format", "json", stdin=script)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert lines[0] == {"one": 1} and lines[-1] == {"two": 2}
    assert _users(url) == [(7, "g")]

    twice = "INSERT INTO Users (UserId) VALUES (8);\nINSERT INTO Users (UserId) VALUES (9);\n"
    code, output = invoke("sql", "--transaction", "--database", url, stdin=twice)
    assert code == 1 and "nothing was applied" in output  # two NULL names: UsersByName
    assert _users(url) == [(7, "g")]
    good = "INSERT INTO Users (UserId) VALUES (8);\nSELECT COUNT(*) AS n FROM Users;\n"
    output = ok("sql", "--transaction", "--database", url, "--format", "json", stdin=good)
    assert {"n": 2} in [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert _users(url) == [(7, "g"), (8, None)]


def test_the_shell_as_a_process(url: str) -> None:
    script = (
        "help\n\\d\nINSERT INTO Users (UserId, Name) VALUES (9, 'zoe');\nSELECT Name FROM Users;\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "txqueue.cli.main", "sql", "--database", url],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    assert "INFORMATION_SCHEMA" in result.stdout  # help
    assert "Mail" in result.stdout and "queue" in result.stdout  # \d
    assert "Statement modified 1 row" in result.stdout and "zoe" in result.stdout
