"""``txqueue queues pause|resume NAME`` and the paused column of ``txqueue queues``."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

GOOGLESQL = [
    "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE TABLE Notes (Id INT64 NOT NULL) PRIMARY KEY (Id)",
]
POSTGRESQL = [
    "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
    "CREATE TABLE notes (id bigint NOT NULL, PRIMARY KEY (id))",
]


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _ok(*args: str) -> str:
    code, output = _invoke(*args)
    assert code == 0, output
    return output


def _mail(url: str) -> None:
    with txqueue.connect(url) as db:
        db.update_ddl(POSTGRESQL if db.dialect == "postgresql" else GOOGLESQL)


def test_pause_and_resume_a_queue_and_list_it_in_every_format(database_url: str) -> None:
    _mail(database_url)
    assert "paused Mail" in _ok("queues", "pause", "Mail", "--database", database_url)
    _ok("queues", "pause", "Mail", "--database", database_url)  # again: fine
    with txqueue.connect(database_url) as db:
        assert db.queue_info("Mail").paused is True

    assert "paused" in _ok("queues", "--database", database_url)
    [record] = [
        json.loads(line)
        for line in _ok("queues", "--database", database_url, "--json").splitlines()
    ]
    assert record["paused"] is True
    [row] = csv.DictReader(
        io.StringIO(_ok("queues", "--database", database_url, "--format", "csv"))
    )
    assert row["paused"] == "true"

    # --database before the subcommand counts too
    assert "resumed Mail" in _ok("queues", "--database", database_url, "resume", "Mail")
    with txqueue.connect(database_url) as db:
        assert db.queue_info("Mail").paused is False
    table = _ok("queues", "--database", database_url)
    assert "running" in table and "paused" not in table
    [record] = [
        json.loads(line)
        for line in _ok("queues", "--database", database_url, "--json").splitlines()
    ]
    assert record["paused"] is False


def test_pausing_what_is_not_a_queue_fails_with_the_reason(database_url: str) -> None:
    _mail(database_url)
    code, output = _invoke("queues", "pause", "Missing", "--database", database_url)
    assert code == 1 and "NotFound" in output and "Missing" in output, output
    code, output = _invoke("queues", "resume", "Notes", "--database", database_url)
    assert code == 1 and "InvalidArgument" in output and "is a table" in output, output
