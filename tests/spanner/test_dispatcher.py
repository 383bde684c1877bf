"""The event layer end to end on the Cloud Spanner emulator: a bus, a pipeline and an
enrollment; an event published in the application's transaction with its business row; a
``txqueue dispatcher`` process POSTs it (CloudEvents binary mode) to a local HTTP receiver,
retries a 503, logs every attempt; ``txqueue events undelivered`` lists what gave up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest
from click.testing import CliRunner
from cloudevents.core.v1.event import CloudEvent
from integration.events_receiver import Receiver, running_receiver, wait_until

import txqueue
from txqueue.cli.main import main

SECOND = timedelta(seconds=1)
PAID = "com.shop.order.paid"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as server:
        yield server


def _cli(url: str, *args: str) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*args, "--database", url])
    assert result.exit_code == 0, result.output
    return result.output


def test_publish_in_a_transaction_dispatch_retry_and_list_undelivered(
    spanner_url: str, receiver: Receiver
) -> None:
    receiver.script("/flaky", 503, 200)
    receiver.script("/down", 503)
    with txqueue.connect(spanner_url) as db:
        db.update_ddl(
            ["CREATE TABLE Orders (OrderId STRING(36), Total INT64) PRIMARY KEY (OrderId)"]
        )
        events = txqueue.Events(db)
        events.create_bus("orders")
        retry = txqueue.RetryPolicy(max_attempts=3, min_retry_delay=SECOND, max_retry_delay=SECOND)
        events.create_pipeline("notify", receiver.url("/flaky"), retry=retry, allow_private=True)
        once = txqueue.RetryPolicy(max_attempts=1)
        events.create_pipeline("audit", receiver.url("/down"), retry=once, allow_private=True)
        for pipeline in ("notify", "audit"):
            events.create_enrollment(
                f"paid-{pipeline}",
                bus="orders",
                pipeline=pipeline,
                cel_match=f'message.type == "{PAID}"',
            )

        def checkout(txn: txqueue.Transaction) -> str:
            txn.insert("Orders", ("OrderId", "Total"), [("order-17", 1200)])
            event = CloudEvent({"type": PAID, "source": "//shop", "id": "order-17"}, {"total": 12})
            return events.publish("orders", event, txn=txn)

        uid = db.run_in_transaction(checkout)

        def rolled_back(txn: txqueue.Transaction) -> None:
            event = {"type": PAID, "source": "//shop", "id": "order-18"}
            events.publish("orders", event, txn=txn)
            raise LookupError("no such customer")

        with pytest.raises(LookupError):
            db.run_in_transaction(rolled_back)

        command = [
            sys.executable,
            "-m",
            "txqueue.cli.main",
            "dispatcher",
            "--database",
            spanner_url,
        ]
        dispatcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            first, second = receiver.wait_for("/flaky", 2, timeout=60)
            [audited] = receiver.wait_for("/down", 1, timeout=60)

            def final() -> list[txqueue.DeliveryAttempt]:
                rows = events.attempts(uid)
                done = [r for r in rows if r.state in ("delivered", "failed")]
                return rows if len(done) == 2 else []

            rows = wait_until(final, timeout=60)
        finally:
            dispatcher.send_signal(signal.SIGINT)
            _, errors = dispatcher.communicate(timeout=60)
        assert dispatcher.returncode == 0, errors

        assert 0.95 <= second.arrived - first.arrived <= 5, "retried after min_retry_delay"
        for request in (first, second, audited):  # CloudEvents binary mode
            assert request.headers["ce-id"] == "order-17"
            assert request.headers["ce-type"] == PAID
            assert request.headers["ce-source"] == "//shop"
            assert request.headers["ce-specversion"] == "1.0"
            assert request.headers["ce-messageuid"] == uid
            assert json.loads(request.body) == {"total": 12}
        by_pipeline = {
            p: [(r.attempt, r.state, r.status) for r in rows if r.pipeline == p]
            for p in ("notify", "audit")
        }
        assert by_pipeline == {
            "notify": [(1, "retrying", 503), (2, "delivered", 200)],
            "audit": [(1, "failed", 503)],
        }
        [missed] = events.undelivered()
        assert (missed.pipeline, missed.message_uid) == ("audit", uid)
        with db.snapshot() as snapshot:
            orders = list(snapshot.execute_sql("SELECT OrderId FROM Orders"))
    assert orders == [("order-17",)]  # the business row, once
    # the rolled-back checkout published nothing
    assert {r.headers["ce-id"] for r in receiver.requests} == {"order-17"}

    listed = [
        json.loads(line)
        for line in _cli(spanner_url, "events", "undelivered", "--json").splitlines()
    ]
    assert [(r["pipeline"], r["message_uid"], r["status"]) for r in listed] == [("audit", uid, 503)]
    assert "order-17" in _cli(spanner_url, "events", "undelivered", "--pipeline", "audit")
    attempts = [
        json.loads(line) for line in _cli(spanner_url, "events", "attempts", uid).splitlines()
    ]
    assert sorted((a["pipeline"], a["attempt"], a["state"]) for a in attempts) == [
        ("audit", 1, "failed"),
        ("notify", 1, "retrying"),
        ("notify", 2, "delivered"),
    ]
