"""Several dispatchers at once, and a dispatcher killed mid-attempt (kill -9): deliveries are
leased, so none is attempted twice at once and none is lost. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta

import pytest
from events_receiver import Receiver, wait_until

import txqueue

SECOND = timedelta(seconds=1)
EVENTS = 200


@pytest.fixture
def events(database_url: str, receiver: Receiver) -> Iterator[txqueue.Events]:
    db = txqueue.connect(database_url)
    events = txqueue.Events(db)
    events.create_bus("orders")
    events.create_pipeline("notify", receiver.url("/hook"), allow_private=True)
    events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
    yield events
    db.close()


def test_four_dispatchers_deliver_every_event_exactly_once(
    database_url: str, events: txqueue.Events, receiver: Receiver
) -> None:
    def publish_all(txn: txqueue.Transaction, first: int) -> None:
        for number in range(first, first + 50):
            events.publish("orders", {"type": "t", "source": "//s", "id": f"e{number}"}, txn=txn)

    # The first requests wait until five are in flight at once: more than one dispatcher's
    # concurrency of 4, so the gate opens only when a second dispatcher delivers too (the
    # first leases one batch of 64 while its requests wait, and leaves the rest ready).
    events.update_pipeline("notify", destination=receiver.url("/gate"), allow_private=True)
    receiver.gate_width = 5
    with ExitStack() as stack:
        dispatchers = [
            stack.enter_context(txqueue.Dispatcher(database_url, concurrency=4)) for _ in range(4)
        ]
        for first in range(0, EVENTS, 50):
            events.database.run_in_transaction(publish_all, first)
        requests = receiver.wait_for("/gate", EVENTS, timeout=60)
        wait_until(lambda: sum(d.stats.delivered for d in dispatchers) == EVENTS)
    assert receiver.gate_opened.is_set()
    counts = Counter(r.headers["ce-id"] for r in receiver.received("/gate"))
    assert len(requests) == EVENTS and set(counts.values()) == {1}
    assert sum(1 for d in dispatchers if d.stats.delivered) >= 2  # the work was shared
    delivered = [r for r in events.attempts(limit=10 * EVENTS) if r.state == "delivered"]
    assert len(delivered) == EVENTS


def test_a_killed_dispatcher_loses_no_delivery(
    database_url: str, events: txqueue.Events, receiver: Receiver
) -> None:
    events.update_pipeline("notify", destination=receiver.url("/hold"), allow_private=True)
    receiver.hold.set()  # the first request hangs: the dispatcher dies mid-attempt
    command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", database_url]
    doomed = subprocess.Popen(
        [*command, "--attempt-timeout", "1", "--purge-interval", "never"],
        env={**os.environ, "TXQUEUE_ALLOW_PRIVATE_DESTINATIONS": "1"},
        stderr=subprocess.DEVNULL,
    )
    try:
        uid = events.publish("orders", {"type": "t", "source": "//s", "id": "survivor"})
        receiver.wait_for("/hold", 1)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    receiver.hold.clear()
    receiver.release.set()

    # Its lease (2 x 1 s + 5 s) expires; another dispatcher delivers the same message.
    with txqueue.Dispatcher(database_url, attempt_timeout=SECOND):
        first, second = receiver.wait_for("/hold", 2, timeout=30)
        rows = wait_until(lambda: [r for r in events.attempts(uid) if r.state == "delivered"])
    assert first.headers["ce-messageuid"] == second.headers["ce-messageuid"] == uid
    assert [r.attempt for r in rows] == [1]  # the killed attempt left no record
    assert 7.0 <= second.arrived - first.arrived <= 20.0
