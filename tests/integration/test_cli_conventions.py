"""CLI conventions: a read command never creates a database; every listing takes
``--format table|json|csv`` (``--json`` an alias) and shows payloads one way; piped output is
whole; help promises only what exists; errors name CLI flags."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

QUEUE = "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
PG_QUEUE = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
BINARY = b"\xff\x00\xfe binary"
LONG_ID = "event-" + "x" * 300


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def ok(*args: str) -> str:
    code, output = invoke(*args)
    assert code == 0, output
    return output


# ---- a read command never creates a database -------------------------------------------------

READ_COMMANDS = [
    ("queues",),
    ("dead-letters", "list", "Mail"),
    ("dead-letters", "show", "Mail", '["a"]'),
    ("messages", "list", "Mail"),
    ("messages", "show", "Mail", '["a"]'),
    ("messages", "delete", "Mail", '["a"]'),
    ("messages", "ready", "Mail", '["a"]'),
    ("sql", "SELECT 1"),
    ("buses", "list"),
    ("pipelines", "list"),
    ("pipelines", "describe", "p"),
    ("enrollments", "list"),
    ("events", "undelivered"),
    ("events", "unmatched"),
    ("events", "archived"),
    ("events", "attempts"),
]


@pytest.fixture
def empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory, holding no txqueue.db, and no $TXQUEUE_DATABASE_URL."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TXQUEUE_DATABASE_URL", raising=False)
    return tmp_path


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_a_read_command_without_a_database_says_how_to_point_at_one(
    empty_directory: Path, command: tuple[str, ...]
) -> None:
    code, output = invoke(*command)
    assert code == 2, output
    assert "--database" in output and "TXQUEUE_DATABASE_URL" in output, output
    assert not (empty_directory / "txqueue.db").exists()
    assert list(empty_directory.iterdir()) == []


def test_a_read_command_given_a_missing_sqlite_file_does_not_create_it(
    empty_directory: Path,
) -> None:
    code, output = invoke("queues", "--database", "sqlite:///typo.db")
    assert code == 2, output
    assert "typo.db" in output
    assert list(empty_directory.iterdir()) == []


def test_ddl_and_write_commands_still_create_the_default_database(empty_directory: Path) -> None:
    ok("sql", QUEUE)
    assert (empty_directory / "txqueue.db").exists()
    assert "Mail" in ok("queues")
    ok("buses", "create", "orders")
    assert "orders" in ok("buses", "list")


# ---- --format table|json|csv -----------------------------------------------------------------


def _mail(url: str) -> str:
    """Queue Mail holding two dead letters and two ready messages under the same keys, one
    with a binary payload and one with a text payload."""
    with txqueue.connect(url) as db:
        db.update_ddl([PG_QUEUE if db.dialect == "postgresql" else QUEUE])
        with db.batch() as batch:
            batch.send("Mail", ("bin",), BINARY)
            batch.send("Mail", ("text",), "héllo".encode())
        for message in db.receive("Mail", max_duration=timedelta(seconds=5), max_batch_size=2):
            db.dead_letter("Mail", message.key, message.lease_token, "failed")
            if message.last_in_batch:
                break
        with db.batch() as batch:  # ready messages with the same payloads, for queries
            batch.send("Mail", ("bin",), BINARY)
            batch.send("Mail", ("text",), "héllo".encode())
    return url


def _csv(output: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(output)))


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_queues_in_every_format(database_url: str) -> None:
    url = _mail(database_url)
    table = ok("queues", "--database", url, "--format", "table")
    assert "dead letters" in table
    [record] = _lines(ok("queues", "--database", url, "--format", "json"))
    assert str(record["name"]).lower() == "mail"
    assert record["dead_letters"] == 2 and record["ready"] == 2
    [alias] = _lines(ok("queues", "--database", url, "--json"))
    assert alias.keys() == record.keys() and alias["dead_letters"] == 2
    [row] = _csv(ok("queues", "--database", url, "--format", "csv"))
    assert row["name"].lower() == "mail" and row["dead_letters"] == "2"


def test_payloads_are_shown_one_way_in_dead_letters_and_sql(database_url: str) -> None:
    url = _mail(database_url)
    letters = {
        tuple(record["key"]): record  # type: ignore[arg-type]
        for record in _lines(ok("dead-letters", "list", "Mail", "--database", url, "--json"))
    }
    binary, text = letters[("bin",)], letters[("text",)]
    assert binary["payload"] == base64.b64encode(BINARY).decode()
    assert binary["payload_encoding"] == "base64"
    assert text["payload"] == "héllo" and text["payload_encoding"] == "text"
    query = "SELECT Id, Payload FROM Mail ORDER BY Id"
    rows = _lines(ok("sql", query, "--database", url, "--format", "json"))
    by_id = {row.get("Id", row.get("id")): row for row in rows}
    for key, letter in (("bin", binary), ("text", text)):
        row = by_id[key]
        payload_name = "Payload" if "Payload" in row else "payload"
        assert row[payload_name] == letter["payload"]
        assert row[f"{payload_name}_encoding"] == letter["payload_encoding"]
    rows_csv = _csv(ok("sql", query, "--database", url, "--format", "csv"))
    assert [row.get("Id", row.get("id")) for row in rows_csv] == ["bin", "text"]
    encodings = [row.get("Payload_encoding", row.get("payload_encoding")) for row in rows_csv]
    assert encodings == ["base64", "text"]
    receive = "SELECT Id, Payload FROM RECEIVE_Mail(max_duration=>'1s', max_batch_size=>2)"
    received = _csv(ok("sql", receive, "--database", url, "--format", "csv"))
    assert sorted(row.get("Id", row.get("id")) for row in received) == ["bin", "text"]
    csv_letters = _csv(ok("dead-letters", "list", "Mail", "--database", url, "--format", "csv"))
    assert {row["payload_encoding"] for row in csv_letters} == {"base64", "text"}


def test_event_listings_in_every_format(sqlite_url: str) -> None:
    ok("buses", "create", "orders", "--database", sqlite_url)
    ok("pipelines", "create", "notify", "--destination", "bus:orders", "--database", sqlite_url)
    ok("events", "publish", "orders", "--event-type", "paid", "--event-source", "//shop",
       "--event-id", "order-1", "--database", sqlite_url)  # fmt: skip
    for command in (("buses", "list"), ("pipelines", "list"), ("enrollments", "list")):
        ok(*command, "--database", sqlite_url, "--format", "csv")
    [bus] = _csv(ok("buses", "list", "--database", sqlite_url, "--format", "csv"))
    assert bus["name"] == "orders"
    [pipeline] = _lines(ok("pipelines", "list", "--database", sqlite_url, "--format", "json"))
    assert pipeline["name"] == "notify"
    [unmatched] = _csv(ok("events", "unmatched", "--database", sqlite_url, "--format", "csv"))
    assert unmatched["bus"] == "orders" and json.loads(unmatched["event"])["id"] == "order-1"
    [archived] = _lines(ok("events", "archived", "--database", sqlite_url, "--format", "json"))
    assert archived["bus"] == "orders" and archived["event"]["id"] == "order-1"  # type: ignore[index]
    assert "order-1" in ok("events", "archived", "--database", sqlite_url)


def test_json_and_csv_together_are_a_usage_error(sqlite_url: str) -> None:
    ok("sql", QUEUE, "--database", sqlite_url)
    code, output = invoke("queues", "--database", sqlite_url, "--json", "--format", "csv")
    assert code == 2 and "--json" in output


# ---- piped output is whole ---------------------------------------------------------------------


def test_events_undelivered_piped_through_cat_is_not_truncated(sqlite_url: str) -> None:
    ok("buses", "create", "orders", "--database", sqlite_url)
    ok("events", "publish", "orders", "--event-type", "paid", "--event-source", "//shop",
       "--event-id", LONG_ID, "--database", sqlite_url)  # fmt: skip
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = (
        f"{sys.executable} -m txqueue.cli.main events undelivered --pipeline ''"
        f" --database '{sqlite_url}' | cat"
    )
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, env=environment, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert LONG_ID in done.stdout
    assert "no enrollment of bus 'orders' matched" in done.stdout
    assert "…" not in done.stdout


# ---- help and errors ---------------------------------------------------------------------------


def test_events_help_lists_the_commands_it_promises() -> None:
    help_text = ok("events", "--help")
    commands = [line.split()[0] for line in help_text.split("Commands:")[1].splitlines() if line]
    assert sorted(commands) == [
        "archived", "attempts", "publish", "purge", "replay", "undelivered", "unmatched",
    ]  # fmt: skip


def test_a_private_destination_error_names_the_cli_flag(sqlite_url: str) -> None:
    code, output = invoke(
        "pipelines", "create", "p", "--destination", "http://127.0.0.1/hook",
        "--database", sqlite_url,
    )  # fmt: skip
    assert code == 1, output
    assert "--allow-private" in output
    assert "allow_private=True" not in output
