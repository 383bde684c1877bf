"""Leasing: receive_now, a receiver (receive, seconds_until_ready, wait, close), renew and
release. Times are pinned through the parameter objects' ``now``; no test sleeps for a lease."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from txqueue.core.leases import is_token
from txqueue.drivers.protocol import BrowseParams, ReceiveParams

from .support import LEASE, Harness, utcnow

SECOND = timedelta(seconds=1)


def test_receive_now_leases_ready_messages_oldest_first_up_to_the_batch_size(
    harness: Harness,
) -> None:
    start = utcnow()
    harness.send("later", deliver_time=start + timedelta(seconds=2))
    harness.send("first", deliver_time=start - timedelta(seconds=2))
    harness.send("second", deliver_time=start - SECOND)
    now = start + 5 * SECOND

    batch = harness.receive_now(max_batch_size=2, now=now)

    assert [message.key for message in batch] == [("first",), ("second",)]
    for message in batch:
        assert message.payload == b"x" and isinstance(message.payload, bytes)
        assert message.delivery_count == 1
        assert message.lease_expiration == now + LEASE
        assert is_token(message.lease_token)
    assert len({message.lease_token for message in batch}) == 2
    [last] = harness.receive_now(now=now)
    assert last.key == ("later",)
    assert harness.receive_now(now=now) == []


def test_receive_now_skips_scheduled_and_leased_messages(harness: Harness) -> None:
    now = utcnow()
    harness.send("scheduled", deliver_time=now + timedelta(hours=1))
    harness.send("ready")
    assert [m.key for m in harness.receive_now(now=now + SECOND)] == [("ready",)]
    assert harness.receive_now(now=now + 2 * SECOND) == []


def test_an_expired_lease_is_redelivered_after_its_backoff_with_a_new_token(
    harness: Harness,
) -> None:
    harness.send("a")
    now = utcnow() + SECOND
    [first] = harness.receive_now(lease=SECOND, now=now)
    expired = first.lease_expiration

    assert harness.receive_now(now=expired - timedelta(milliseconds=1)) == []
    redelivered = []
    for seconds in range(1, 120):  # the backoff after an expired lease is seconds, not hours
        redelivered = harness.receive_now(now=expired + seconds * SECOND)
        if redelivered:
            break
    [second] = redelivered
    assert second.delivery_count == 2
    assert second.lease_token != first.lease_token


def test_a_receiver_receives_and_tells_when_the_next_message_is_due(harness: Harness) -> None:
    receiver = harness.driver.open_receiver(harness.jobs)
    try:
        assert receiver.seconds_until_ready(harness.jobs) is None  # empty
        harness.send("soon", deliver_time=utcnow() + timedelta(seconds=30))
        due = receiver.seconds_until_ready(harness.jobs)
        assert due == pytest.approx(30, abs=2)
        harness.send("now")
        assert receiver.seconds_until_ready(harness.jobs) == pytest.approx(0, abs=1)
        batch = receiver.receive(ReceiveParams(harness.jobs, 5, LEASE, None))
        assert [message.key for message in batch] == [("now",)]
    finally:
        receiver.close()


def test_a_receivers_wait_ends_at_a_committed_send_or_at_its_timeout(harness: Harness) -> None:
    receiver = harness.driver.open_receiver(harness.jobs)
    try:
        started = utcnow()
        receiver.wait(0.3)
        assert utcnow() - started >= timedelta(seconds=0.25), "returned before the timeout"

        sender = threading.Timer(0.3, harness.send, args=("wake",))
        started = utcnow()
        sender.start()
        receiver.wait(10.0)
        waited = utcnow() - started
        sender.join()
        assert waited < timedelta(seconds=5), "the send's commit did not end the wait"
    finally:
        receiver.close()


def test_renew_extends_with_a_new_token_and_the_old_one_stops_working(harness: Harness) -> None:
    harness.send("a", "b")
    now = utcnow() + SECOND
    first, second = harness.receive_now(now=now)

    renewals = harness.renew([first.lease_token, second.lease_token], 2 * LEASE, now + SECOND)

    assert [r.old_token for r in renewals] == [first.lease_token, second.lease_token]
    for renewal in renewals:
        assert renewal.new_token is not None and is_token(renewal.new_token)
        assert renewal.lease_expiration == now + SECOND + 2 * LEASE
    [stale] = harness.renew([first.lease_token], LEASE, now + 2 * SECOND)
    assert stale.new_token is None


def test_renew_of_expired_or_made_up_tokens_gives_no_new_token(harness: Harness) -> None:
    harness.send("a")
    now = utcnow() + SECOND
    [message] = harness.receive_now(lease=SECOND, now=now)
    late = harness.renew([message.lease_token], LEASE, message.lease_expiration + SECOND)
    assert all(renewal.new_token is None for renewal in late)
    assert harness.renew(["garbage"], LEASE, now) == []
    assert harness.renew([], LEASE, now) == []


def test_release_makes_messages_receivable_after_the_delay(harness: Harness) -> None:
    harness.send("a", "b")
    now = utcnow() + SECOND
    first, second = harness.receive_now(now=now)

    assert harness.release([first.lease_token], timedelta(0), now) == 1
    assert harness.release([first.lease_token], timedelta(0), now) == 0  # not held any more
    assert harness.release([second.lease_token, "garbage"], timedelta(minutes=1), now) == 1

    [again] = harness.receive_now(now=now + SECOND)
    assert again.key == first.key and again.delivery_count == 2
    harness.ack(again.key[0], again.lease_token)
    assert harness.receive_now(now=now + 30 * SECOND) == []
    [delayed] = harness.receive_now(now=now + timedelta(minutes=1, seconds=1))
    assert delayed.key == second.key


def test_a_release_with_an_error_records_the_attempt(harness: Harness) -> None:
    harness.send("a")
    now = utcnow() + SECOND
    [message] = harness.receive_now(now=now)
    assert harness.release([message.lease_token], timedelta(0), now, error="it broke") == 1
    [stored] = harness.driver.list_messages(BrowseParams(harness.jobs, None, (), None, 10, now))
    assert (stored.state, stored.delivery_count, stored.last_error) == ("ready", 1, "it broke")
