"""``txqueue dead-letters show`` prints a dead letter's failure history: a table of the
attempts and each traceback (escaped, whole when piped); ``--format json`` includes it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

QUEUE = "CREATE QUEUE Mail (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
PG_QUEUE = "CREATE QUEUE mail (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"


def send_welcome(attempt: int) -> None:
    raise ConnectionError(f"smtp refused attempt {attempt}\x1b[2J")


@pytest.fixture
def url(database_url: str) -> str:
    """One dead letter that failed twice (a retry, then for good)."""
    with txqueue.connect(database_url) as db:
        db.update_ddl([PG_QUEUE if db.dialect == "postgresql" else QUEUE])
        with db.batch() as batch:
            batch.send("Mail", (7,), b"{}")
        for attempt in (1, 2):
            [message] = db.receive_now("Mail")
            try:
                send_welcome(attempt)
            except ConnectionError as error:
                if attempt == 1:
                    db.release_lease("Mail", [message.lease_token], timedelta(0), exception=error)
                else:
                    db.dead_letter(
                        "Mail", message.key, message.lease_token, repr(error), exception=error
                    )
    return database_url


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_show_prints_each_failed_attempt_with_its_traceback(url: str) -> None:
    shown = _run("dead-letters", "show", "Mail", "[7]", "--database", url)
    assert "failures, oldest first" in shown
    assert "ConnectionError" in shown
    assert "smtp refused attempt 1\\x1b[2J" in shown and "\x1b" not in shown
    assert "traceback of attempt 1:" in shown and "traceback of attempt 2:" in shown
    assert shown.count("in send_welcome") == 2
    [record] = [
        json.loads(line)
        for line in _run(
            "dead-letters", "show", "Mail", "[7]", "--database", url, "--format", "json"
        ).splitlines()
    ]
    assert record["key"] == [7] and record["attempts"] == 2
    failures = record["failures"]
    assert [(f["attempt"], f["error_type"]) for f in failures] == [
        (1, "ConnectionError"),
        (2, "ConnectionError"),
    ]
    assert failures[1]["message"] == "smtp refused attempt 2\x1b[2J"
    assert "in send_welcome" in failures[1]["traceback"]
