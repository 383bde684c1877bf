"""The event layer's CLI as a user runs it: configure, publish, dispatch (a real process, stopped
with SIGINT), list undelivered messages and replay them. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

from click.testing import CliRunner
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.cli.main import main


def run(database: str, *args: str, code: int = 0) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*args, "--database", database])
    assert result.exit_code == code, result.output
    return result.output


def run_json(database: str, *args: str) -> Any:
    return json.loads(run(database, *args))


def _lines(output: str, count: int) -> list[str]:
    lines = output.splitlines()
    return lines if len(lines) == count else []


def test_configure_publish_dispatch_and_replay_from_the_shell(
    database_url: str, receiver: Receiver
) -> None:
    receiver.script("/hooks/orders", 503)
    run(database_url, "buses", "create", "orders")
    url = receiver.url("/hooks/orders")
    run(
        database_url,
        "pipelines",
        "create",
        "notify-shipping",
        "--destination",
        url,
        "--allow-private",
    )
    run(
        database_url, "enrollments", "create", "paid-orders", "--message-bus", "orders",
        "--destination-pipeline", "notify-shipping", "--cel-match", 'message.type == "com.shop.order.paid"',
    )  # fmt: skip

    # The seed's example: linear backoff of 4 s, five attempts.
    updated = run_json(
        database_url, "pipelines", "update", "notify-shipping",
        "--min-retry-delay=4", "--max-retry-delay=4", "--max-retry-attempts=1",
    )  # fmt: skip
    assert updated["retry"] == {
        "max_attempts": 1,
        "min_retry_delay_seconds": 4.0,
        "max_retry_delay_seconds": 4.0,
    }
    assert run_json(database_url, "pipelines", "describe", "notify-shipping") == updated
    assert "notify-shipping" in run(database_url, "pipelines", "list")
    assert json.loads(run(database_url, "buses", "list", "--json"))["archive"] is True

    uid = run(
        database_url, "events", "publish", "orders", "--event-type", "com.shop.order.paid",
        "--event-source", "//shop", "--event-id", "order-17", "--event-data", '{"total": 12}',
    ).strip()  # fmt: skip
    message = json.dumps({"type": "com.shop.order.paid", "source": "//shop", "id": "order-18"})
    second = run(database_url, "events", "publish", "orders", "--json-message", message).strip()

    command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", database_url]
    dispatcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        receiver.wait_for("/hooks/orders", 2)
        lines = wait_until(lambda: _lines(run(database_url, "events", "undelivered", "--json"), 2))
        rows = [json.loads(line) for line in lines]
        assert {r["message_uid"] for r in rows} == {uid, second}
        assert {r["status"] for r in rows} == {503}
        assert "order-17" in run(
            database_url, "events", "undelivered", "--pipeline", "notify-shipping"
        )

        receiver.script("/hooks/orders", 200)
        replayed = run(
            database_url, "events", "replay", "--pipeline", "notify-shipping", "--since", "1h"
        )
        assert len(replayed.split()) >= 2
        requests = receiver.wait_for("/hooks/orders", 4)
        assert {r.headers["ce-id"] for r in requests[2:]} == {"order-17", "order-18"}
        wait_until(lambda: "no undelivered" in run(database_url, "events", "undelivered"))
    finally:
        dispatcher.send_signal(signal.SIGINT)
        _, errors = dispatcher.communicate(timeout=30)
    assert dispatcher.returncode == 0, errors
    assert "dispatcher stopped: 4 attempt(s), 2 delivered" in errors
    log = run(database_url, "events", "attempts", uid)
    attempts = [json.loads(line) for line in log.splitlines()]
    assert [(a["state"], a["status"]) for a in attempts] == [("failed", 503), ("replayed", None)]


def test_errors_are_one_line_and_exit_1(database_url: str) -> None:
    run(database_url, "buses", "create", "orders")
    assert "AlreadyExists: bus 'orders' already exists" in run(
        database_url, "buses", "create", "orders", code=1
    )
    assert "InvalidArgument: bus name 'Orders!' is invalid" in run(
        database_url, "buses", "create", "Orders!", code=1
    )
    out = run(database_url, "pipelines", "create", "p", "--destination", "https://example.com/x",
              "--min-retry-delay", "0.5", code=1)  # fmt: skip
    assert "--min-retry-delay must be between 1 s and 600 s" in out  # the flag, not the argument
    out = run(database_url, "enrollments", "create", "e", "--bus", "orders", "--pipeline", "nope",
              "--cel-match", "true", code=1)  # fmt: skip
    assert "NotFound: pipeline 'nope' does not exist" in out
    out = run(database_url, "events", "publish", "orders", "--json-message", '{"id": "x"}', code=1)
    assert "InvalidArgument: CloudEvent attribute 'source' is required" in out
    assert "NotFound" in run(database_url, "buses", "delete", "nope", code=1)
    assert "deleted bus orders" in run(database_url, "buses", "delete", "orders")


def test_bus_archive_and_retention_settings(database_url: str) -> None:
    bus = run_json(database_url, "buses", "create", "quiet", "--no-archive", "--retention", "7d")
    assert (bus["archive"], bus["retention_seconds"]) == (False, 7 * 86400)
    bus = run_json(database_url, "buses", "update", "quiet", "--archive", "--retention", "forever")
    assert (bus["archive"], bus["retention_seconds"]) == (True, None)
    assert "purged 0 archived message(s)" in run(database_url, "events", "purge")
    with txqueue.connect(database_url) as db:
        assert txqueue.Events(db).get_bus("quiet").retention is None


def test_the_commands_are_registered() -> None:
    out = CliRunner().invoke(main, ["--help"]).output
    for command in ("buses", "pipelines", "enrollments", "events", "dispatcher"):
        assert command in out
