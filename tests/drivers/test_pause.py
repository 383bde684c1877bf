"""Pausing a queue: sends are taken, receives lease nothing, leases already taken run their
course, and the state is a row of the driver's catalog (seen by every connection)."""

from __future__ import annotations

from txqueue.drivers.protocol import PauseParams, ReceiveParams

from .support import LEASE, Harness, open_driver


def _pause(harness: Harness, paused: bool = True) -> None:
    harness.driver.set_paused(PauseParams(harness.jobs, paused))


def test_a_paused_queue_takes_sends_and_leases_nothing_until_resumed(harness: Harness) -> None:
    assert harness.driver.is_paused(harness.jobs) is False
    _pause(harness)
    _pause(harness)  # idempotent
    assert harness.driver.is_paused(harness.jobs) is True

    harness.send("a", "b")

    assert harness.receive_now() == []
    assert harness.job_ids() == ["a", "b"]
    _pause(harness, False)
    _pause(harness, False)  # idempotent
    assert harness.driver.is_paused(harness.jobs) is False
    assert sorted(m.key for m in harness.receive_now()) == [("a",), ("b",)]


def test_a_paused_queues_receiver_sees_nothing_becoming_ready(harness: Harness) -> None:
    harness.send("a")
    receiver = harness.driver.open_receiver(harness.jobs)
    try:
        _pause(harness)
        assert receiver.seconds_until_ready(harness.jobs) is None
        assert receiver.receive(_params(harness)) == []
        _pause(harness, False)
        due = receiver.seconds_until_ready(harness.jobs)
        assert due is not None and due <= 0
        assert [m.key for m in receiver.receive(_params(harness))] == [("a",)]
    finally:
        receiver.close()


def _params(harness: Harness) -> ReceiveParams:
    return ReceiveParams(harness.jobs, 10, LEASE, None)


def test_leases_taken_before_a_pause_are_renewed_released_and_acked(harness: Harness) -> None:
    harness.send("a", "b")
    first, second = harness.receive_now()
    _pause(harness)

    [renewal] = harness.renew([first.lease_token])
    assert renewal.new_token is not None
    assert harness.release([second.lease_token]) == 1
    harness.ack("a", renewal.new_token)

    assert harness.job_ids() == ["b"]
    assert harness.receive_now() == []  # b was released, but the queue is paused


def test_the_pause_is_stored_in_the_database(harness: Harness, face: str) -> None:
    _pause(harness)
    other = open_driver(face, harness.url)
    try:
        other.initialize(None)
        assert other.is_paused(harness.jobs) is True
    finally:
        other.close()
