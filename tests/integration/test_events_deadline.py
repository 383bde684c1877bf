"""Attempts end on time: a total deadline per HTTP attempt, whatever the endpoint trickles.

A hostile endpoint (`trickle_server`) answers one header line every half second forever, so
no single read ever times out. Each attempt must still end at ``attempt_timeout`` (both
deliverers), be recorded as a transient timeout, leave the other pipelines' deliveries alone,
and a dispatcher told to stop (SIGTERM) must not wait for the endpoint. An attempt whose lease
was lost before it was recorded still counts toward ``max_attempts``. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from events_receiver import Receiver, wait_until
from trickle_server import TrickleServer, trickling

import txqueue
from txqueue.events.delivery import AsyncHttpDeliverer, HttpDeliverer
from txqueue.events.outcomes import AttemptKind
from txqueue.events.records import DELIVERIES

DEADLINE = timedelta(seconds=2)
EVENT = {"type": "t", "source": "//s", "id": "e"}


@pytest.fixture
def trickle() -> Iterator[TrickleServer]:
    with trickling(interval=0.5) as server:
        yield server


def test_the_sync_deliverer_ends_a_trickling_attempt_at_its_deadline(
    trickle: TrickleServer,
) -> None:
    outcome: list[object] = []

    def deliver() -> None:
        with HttpDeliverer(DEADLINE, allow_private=True) as deliverer:
            outcome.append(deliverer.deliver(trickle.url(), {}, b"{}"))

    started = time.monotonic()
    thread = threading.Thread(target=deliver, daemon=True)
    thread.start()
    thread.join(8)
    assert not thread.is_alive(), "the attempt outlived its 2 s deadline by 6 s"
    [attempt] = outcome
    assert isinstance(attempt, txqueue.events.delivery.Attempt)
    assert attempt.outcome is AttemptKind.TRANSIENT and attempt.status is None
    assert attempt.error is not None and attempt.error.startswith("timeout after 2 s")
    assert 1.9 <= attempt.latency.total_seconds() <= 3.5
    assert time.monotonic() - started <= 4.0


async def test_the_async_deliverer_ends_a_trickling_attempt_at_its_deadline(
    trickle: TrickleServer,
) -> None:
    async with AsyncHttpDeliverer(DEADLINE, allow_private=True) as deliverer:
        attempt = await asyncio.wait_for(deliverer.deliver(trickle.url(), {}, b"{}"), 8)
    assert attempt.outcome is AttemptKind.TRANSIENT and attempt.status is None
    assert attempt.error is not None and attempt.error.startswith("timeout after 2 s")
    assert 1.9 <= attempt.latency.total_seconds() <= 3.5


def _pipelines(events: txqueue.Events, slow: str, fast: str, max_attempts: int = 1) -> None:
    events.create_bus("orders")
    retry = txqueue.RetryPolicy(max_attempts=max_attempts)
    events.create_pipeline("slow", slow, retry=retry, allow_private=True)
    events.create_pipeline("fast", fast, allow_private=True)
    events.create_enrollment(
        "slow", bus="orders", pipeline="slow", cel_match='message.type == "slow"'
    )
    events.create_enrollment(
        "fast", bus="orders", pipeline="fast", cel_match='message.type == "fast"'
    )


def test_a_trickling_endpoint_gets_one_attempt_and_holds_up_no_other_pipeline(
    database_url: str, trickle: TrickleServer, receiver: Receiver
) -> None:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        _pipelines(events, trickle.url(), receiver.url("/fast"))
        slow = events.publish("orders", {**EVENT, "type": "slow"})
        with txqueue.Dispatcher(database_url, attempt_timeout=DEADLINE):
            trickle.wait_for(1)
            fast = [
                events.publish("orders", {**EVENT, "type": "fast", "id": f"f{n}"}) for n in range(5)
            ]
            requests = receiver.wait_for("/fast", 5, timeout=5)  # promptly, beside the slow one
            [row] = wait_until(lambda: events.attempts(slow), timeout=6)
            delivered = wait_until(
                lambda: [r for r in events.attempts(pipeline="fast") if r.state == "delivered"],
                timeout=5,
            )
        assert sorted(r.headers["ce-messageuid"] for r in requests) == sorted(fast)
        assert len(receiver.received("/fast")) == 5  # once each
        assert len(delivered) == 5
        assert (row.attempt, row.state, row.outcome, row.status) == (1, "failed", "transient", None)
        assert row.error is not None and row.error.startswith("timeout after 2 s")
        assert "gave up after 1 attempt(s)" in row.error
        assert row.latency is not None and 1.9 <= row.latency.total_seconds() <= 3.5
        assert len(trickle.arrivals) == 1
        assert not db.list_messages(DELIVERIES)  # recorded and acked: nothing to re-attempt
        assert [u.message_uid for u in events.undelivered()] == [slow]


async def test_the_asyncio_dispatcher_ends_a_trickling_attempt_at_its_deadline(
    database_url: str, trickle: TrickleServer, receiver: Receiver
) -> None:
    with txqueue.connect(database_url) as db:
        _pipelines(txqueue.Events(db), trickle.url(), receiver.url("/fast"))
    adb = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(adb)
        slow = await events.publish("orders", {**EVENT, "type": "slow"})
        dispatcher = txqueue.AsyncDispatcher(adb, attempt_timeout=DEADLINE)
        running = asyncio.create_task(dispatcher.run())
        try:
            await asyncio.to_thread(trickle.wait_for, 1)
            fast = await events.publish("orders", {**EVENT, "type": "fast"})
            [request] = await asyncio.to_thread(receiver.wait_for, "/fast", 1, 5)
            deadline = time.monotonic() + 6
            while not (rows := await events.attempts(slow)):
                assert time.monotonic() < deadline, "the slow attempt was not recorded in 6 s"
                await asyncio.sleep(0.05)
        finally:
            dispatcher.stop()
            await asyncio.wait_for(running, 8)
        assert request.headers["ce-messageuid"] == fast
        [row] = rows
        assert (row.state, row.outcome) == ("failed", "transient")
        assert row.error is not None and row.error.startswith("timeout after 2 s")
        assert row.latency is not None and 1.9 <= row.latency.total_seconds() <= 3.5
        assert not await adb.list_messages(DELIVERIES)
        assert len(trickle.arrivals) == 1
    finally:
        await adb.close()


@pytest.mark.parametrize("max_attempts", [1, 2])
async def test_an_attempt_whose_lease_was_lost_counts_toward_max_attempts(
    database_url: str, receiver: Receiver, max_attempts: int
) -> None:
    now = [datetime.now(timezone.utc)]
    adb = await txqueue.connect_async(database_url, clock=lambda: now[0])
    try:
        events = txqueue.AsyncEvents(adb)
        await events.create_bus("orders")
        retry = txqueue.RetryPolicy(max_attempts=max_attempts)
        await events.create_pipeline("hold", receiver.url("/hold"), retry=retry, allow_private=True)
        await events.create_enrollment("all", bus="orders", pipeline="hold", cel_match="true")
        receiver.script("/hold", 503)
        receiver.hold.set()  # the first request waits until the lease has run out
        uid = await events.publish("orders", EVENT)
        dispatcher = txqueue.AsyncDispatcher(adb, attempt_timeout=timedelta(seconds=1))
        running = asyncio.create_task(dispatcher.run())
        try:
            await asyncio.to_thread(receiver.wait_for, "/hold", 1)
            now[0] += dispatcher.lease + timedelta(seconds=2)  # lease and its backoff are over
            receiver.hold.clear()
            receiver.release.set()

            async def finished() -> bool:
                return not await adb.list_messages(DELIVERIES)

            deadline = time.monotonic() + 10
            while not await finished():
                assert time.monotonic() < deadline, "the delivery did not finish in 10 s"
                await asyncio.sleep(0.05)
        finally:
            dispatcher.stop()
            await running
        rows = await events.attempts(uid)
        assert len(receiver.received("/hold")) == max_attempts
        assert [r.attempt for r in rows] == list(range(1, max_attempts + 1))
        assert rows[-1].state == "failed"
        assert f"gave up after {max_attempts} attempt(s)" in (rows[-1].error or "")
        assert "lease" in (rows[0].error or "")  # the lost attempt says what happened to it
    finally:
        await adb.close()


def test_sigterm_stops_a_dispatcher_held_by_a_trickling_endpoint(
    database_url: str, trickle: TrickleServer, receiver: Receiver
) -> None:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        _pipelines(events, trickle.url(), receiver.url("/fast"), max_attempts=5)
        for number in range(3):
            events.publish("orders", {**EVENT, "type": "slow", "id": f"s{number}"})
        command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database"]
        options = ["--concurrency", "1", "--attempt-timeout", "2", "--purge-interval", "never"]
        process = subprocess.Popen(
            [*command, database_url, *options],
            env={**os.environ, "TXQUEUE_ALLOW_PRIVATE_DESTINATIONS": "1"},
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            trickle.wait_for(1, timeout=10)
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            try:
                _, errors = process.communicate(timeout=8)
            except subprocess.TimeoutExpired:
                pytest.fail("the dispatcher did not stop within 8 s of SIGTERM")
            took = time.monotonic() - stopping
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        assert process.returncode == 0, errors
        assert took <= 6.0  # the attempt's 2 s deadline, the record, the exit
        assert len(trickle.arrivals) == 1  # the requests not started were given back
        # The attempt in flight ended at its deadline and was recorded before the exit.
        [row] = events.attempts()
        assert (row.state, row.outcome) == ("retrying", "transient")
        # None lost: the two given back and the retry wait for the next dispatcher.
        assert len(db.list_messages(DELIVERIES)) == 3


def test_deliveries_waiting_behind_a_slow_endpoint_keep_their_lease(
    database_url: str, trickle: TrickleServer, receiver: Receiver
) -> None:
    # One HTTP thread and 9 deliveries to the trickling endpoint, each attempt 1 s: the last
    # ones wait 7-8 s for the thread, longer than their lease (2 x 1 s + 5 s) had left.
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        _pipelines(events, trickle.url(), receiver.url("/fast"))
        uids = [
            events.publish("orders", {**EVENT, "type": "slow", "id": f"s{n}"}) for n in range(9)
        ]
        with txqueue.Dispatcher(database_url, concurrency=1, attempt_timeout=timedelta(seconds=1)):
            rows = wait_until(lambda: len(events.attempts()) >= 9 and events.attempts(), timeout=14)
            assert wait_until(lambda: not db.list_messages(DELIVERIES), timeout=3)
        assert len(trickle.arrivals) == 9  # one attempt each
        assert sorted(r.message_uid for r in rows) == sorted(uids)
        assert {(r.attempt, r.state) for r in rows} == {(1, "failed")}
        assert not [r.error for r in rows if "lease" in (r.error or "")]  # none ran out
