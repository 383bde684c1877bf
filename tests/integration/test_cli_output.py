"""What the CLI prints of stored and remote text: literally (rich markup is not parsed, control
characters are shown as escapes) and, when stdout is not a terminal, whole (never cut)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner
from events_receiver import wait_until

import txqueue
from txqueue.cli.main import main

QUEUE = "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
PG_QUEUE = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"

CLOSING_TAG = "[/x]"
LINK = "[link=https://evil.example]click[/link]"
# An OSC 8 hyperlink opener (ESC ] 8 ; ; URL ESC \) and a bell.
HYPERLINK = "\x1b]8;;http://evil\x1b\\"
HYPERLINK_SHOWN = "\\x1b]8;;http://evil\\x1b\\"
BELL, BELL_SHOWN = "\x07", "\\x07"
DESTINATION = f"https://127.0.0.1/hooks/{'p' * 150}"
LONG_KEY = "order-" + "".join(str(number % 10) for number in range(194))


def _dead_letters(url: str, letters: dict[str, str], payload: bytes = b"{}") -> str:
    """Queue Mail holding one dead letter per ``key: reason``."""
    with txqueue.connect(url) as db:
        db.update_ddl([PG_QUEUE if db.dialect == "postgresql" else QUEUE])
        with db.batch() as batch:
            for key in letters:
                batch.send("Mail", (key,), payload)
        left = len(letters)
        for message in db.receive("Mail", max_duration=timedelta(seconds=5), max_batch_size=left):
            db.dead_letter("Mail", message.key, message.lease_token, letters[message.key[0]])
            left -= 1
            if not left:
                break
    return url


def _run(*args: str) -> str:
    """The command's output, through click's runner (stdout is not a terminal)."""
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _piped(*args: str) -> str:
    """The command's stdout, run as a process writing to a pipe (no COLUMNS to go by)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "txqueue.cli.main", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_no_raw_controls(output: str) -> None:
    raw = sorted({hex(ord(c)) for c in output if unicodedata.category(c) == "Cc" and c != "\n"})
    assert not raw, f"raw control characters in the output: {raw}\n{output!r}"


def test_rich_markup_in_keys_and_reasons_is_printed_literally(database_url: str) -> None:
    url = _dead_letters(database_url, {CLOSING_TAG: LINK, LINK: CLOSING_TAG})
    listing = _run("dead-letters", "list", "Mail", "--database", url)
    assert json.dumps([CLOSING_TAG]) in listing and json.dumps([LINK]) in listing
    assert f"{LINK} " in listing and f"{CLOSING_TAG} " in listing
    shown = _run("dead-letters", "show", "Mail", json.dumps([LINK]), "--database", url)
    assert LINK in shown and CLOSING_TAG in shown


def test_control_characters_are_shown_as_escapes(database_url: str) -> None:
    key, reason = f"a{HYPERLINK}b{BELL}", f"failed{BELL}: {HYPERLINK}here"
    url = _dead_letters(database_url, {key: reason}, payload=f"payload {HYPERLINK}".encode())
    listing = _run("dead-letters", "list", "Mail", "--database", url)
    _assert_no_raw_controls(listing)
    assert f"failed{BELL_SHOWN}: {HYPERLINK_SHOWN}here" in listing
    shown = _run("dead-letters", "show", "Mail", json.dumps([key]), "--database", url)
    _assert_no_raw_controls(shown)
    assert f"payload {HYPERLINK_SHOWN}" in shown and f"{HYPERLINK_SHOWN}here" in shown
    query = _run("sql", "SELECT @text AS text", "-p", f"text={HYPERLINK}{BELL}", "--database", url)
    _assert_no_raw_controls(query)
    assert f"{HYPERLINK_SHOWN}{BELL_SHOWN}" in query


def test_piped_listings_carry_every_value_whole(sqlite_url: str) -> None:
    reason = "a long reason: " + "word " * 30
    url = _dead_letters(sqlite_url, {LONG_KEY: reason})
    for output in (
        _run("dead-letters", "list", "Mail", "--database", url),
        _piped("dead-letters", "list", "Mail", "--database", url),
    ):
        assert json.dumps([LONG_KEY]) in output
        assert reason.strip() in output
    statement = f"SELECT '{LONG_KEY}' AS id"
    assert LONG_KEY in _run("sql", statement, "--database", url)
    assert LONG_KEY in _piped("sql", statement, "--database", url)
    assert "mail" in _piped("queues", "--database", url).lower()


def test_event_configuration_listings_print_markup_literally(sqlite_url: str) -> None:
    events = txqueue.Events(txqueue.connect(sqlite_url))
    events.create_bus("orders")
    events.create_pipeline("notify", DESTINATION, allow_private=True)
    events.create_enrollment(
        "tagged", bus="orders", pipeline="notify", cel_match=f'message.type == "{CLOSING_TAG}"'
    )
    events.database.close()
    assert f'message.type == "{CLOSING_TAG}"' in _run(
        "enrollments", "list", "--database", sqlite_url
    )
    assert DESTINATION in _run("pipelines", "list", "--database", sqlite_url)


# ---- remote text: a webhook's response body ----------------------------------------------

BODY = f"nope {HYPERLINK}click here{BELL} {CLOSING_TAG}"


class _Rejecting(BaseHTTPRequestHandler):
    """Answers every POST 400 with BODY."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = BODY.encode()
        self.send_response(400)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def rejecting_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Rejecting)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_response_body_is_escaped_in_the_dispatcher_log_and_the_listing(
    sqlite_url: str, rejecting_url: str
) -> None:
    with txqueue.connect(sqlite_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        retry = txqueue.RetryPolicy(max_attempts=1)
        events.create_pipeline("notify", rejecting_url, retry=retry, allow_private=True)
        events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        events.publish("orders", {"id": "order-1", "type": "paid", "source": "//shop"})
    command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", sqlite_url]
    dispatcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        undelivered = ("events", "undelivered", "--json", "--database", sqlite_url)
        wait_until(lambda: "order-1" in _run(*undelivered))
    finally:
        dispatcher.send_signal(signal.SIGINT)
        _, log = dispatcher.communicate(timeout=30)
    assert dispatcher.returncode == 0, log
    _assert_no_raw_controls(log)
    assert f"failed for good: HTTP 400 Bad Request: nope {HYPERLINK_SHOWN}click here" in log
    listing = _run("events", "undelivered", "--database", sqlite_url)
    _assert_no_raw_controls(listing)
    assert f"nope {HYPERLINK_SHOWN}click here{BELL_SHOWN} {CLOSING_TAG}" in listing
