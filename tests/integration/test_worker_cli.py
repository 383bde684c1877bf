"""``txqueue queues``, ``txqueue dead-letters ...`` and ``txqueue worker`` argument handling."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

QUEUE = "CREATE QUEUE Mail (UserId INT64 NOT NULL, Kind STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, Kind)"
PG_QUEUE = "CREATE QUEUE mail (userid bigint NOT NULL, kind varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (userid, kind))"


@pytest.fixture
def url(database_url: str) -> str:
    """A queue with one ready message and two dead letters."""
    with txqueue.connect(database_url) as db:
        db.update_ddl([PG_QUEUE if db.dialect == "postgresql" else QUEUE])
        with db.batch() as batch:
            for user in (1, 2, 3):
                batch.send("Mail", (user, "welcome"), f'{{"user": {user}}}'.encode())
        for message in db.receive("Mail", max_duration=timedelta(seconds=1), max_batch_size=2):
            db.dead_letter("Mail", message.key, message.lease_token, f"boom {message.key[0]}")
            if message.last_in_batch:
                break
    return database_url


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_queues_lists_counts(url: str) -> None:
    output = _run("queues", "--database", url)
    assert "ready" in output and "dead letters" in output
    [line] = [json.loads(x) for x in _run("queues", "--database", url, "--json").splitlines()]
    assert (line["name"].lower(), line["ready"], line["leased"], line["dead_letters"]) == (
        "mail",
        1,
        0,
        2,
    )


def test_dead_letters_list_and_show(url: str) -> None:
    assert "boom 1" in _run("dead-letters", "list", "Mail", "--database", url)
    rows = [
        json.loads(x)
        for x in _run("dead-letters", "list", "Mail", "--database", url, "--json").splitlines()
    ]
    assert [(r["key"], r["attempts"], r["last_error"]) for r in rows] == [
        ([1, "welcome"], 1, "boom 1"),
        ([2, "welcome"], 1, "boom 2"),
    ]
    shown = _run("dead-letters", "show", "Mail", '[2, "welcome"]', "--database", url)
    assert "boom 2" in shown and '{"user": 2}' in shown


def test_dead_letters_replay_and_purge(url: str) -> None:
    assert "replayed 1" in _run(
        "dead-letters", "replay", "Mail", '[1, "welcome"]', "--database", url
    )
    assert "purged 1" in _run("dead-letters", "purge", "Mail", "--all", "--database", url)
    with txqueue.connect(url) as db:
        info = db.queue_info("Mail")
    assert (info.ready, info.dead_letters) == (2, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dead-letters", "purge", "Mail"], "or --all"),
        (["dead-letters", "show", "Mail", "{1}"], "not JSON"),
        (["dead-letters", "show", "Mail", '"x"'], "JSON list"),
        (["dead-letters", "show", "Mail", '[9, "x"]'], "no dead letter"),
        (["dead-letters", "list", "Nope"], "NotFound"),
    ],
)
def test_dead_letters_bad_input(url: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, [*args, "--database", url])
    assert result.exit_code != 0 and message in result.output


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("nocolon", "module:attribute"),
        ("no_such_module_here:app", "cannot import"),
        ("txqueue:nothing", "no attribute"),
        ("txqueue:connect", "not a txqueue.App"),
    ],
)
def test_worker_refuses_bad_app_references(reference: str, message: str) -> None:
    result = CliRunner().invoke(main, ["worker", reference, "--database", "sqlite:///unused.db"])
    assert result.exit_code == 2 and message in result.output


def test_worker_refuses_a_bad_grace() -> None:
    result = CliRunner().invoke(
        main,
        [
            "worker",
            "tests.integration.worker_app:app",
            "--grace",
            "soon",
            "--database",
            "sqlite:///x.db",
        ],
    )
    assert result.exit_code != 0 and "grace" in result.output
