"""Dead letters (move, list, replay, purge), counts and estimates, browsing, and the
idempotency ledger's expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from txqueue.drivers.protocol import BrowseParams, DeadLetterParams
from txqueue.errors import FailedPrecondition, NotFound

from .support import Harness, utcnow

SECOND = timedelta(seconds=1)


def test_dead_letter_moves_a_leased_message_with_its_failure(harness: Harness) -> None:
    harness.send("a", "b")
    now = utcnow() + SECOND
    first, _ = harness.receive_now(now=now)

    harness.driver.dead_letter(
        DeadLetterParams(harness.jobs, first.key, first.lease_token, "gave up", now)
    )

    assert harness.job_ids() == ["b"]
    [letter] = harness.driver.dead_letters(harness.jobs, 10)
    assert (letter.key, letter.payload, letter.last_error) == (("a",), b"x", "gave up")
    assert letter.attempts >= 1


def test_dead_letter_needs_the_lease_and_the_message(harness: Harness) -> None:
    harness.send("a", "b")
    now = utcnow() + SECOND
    first, second = harness.receive_now(now=now)
    with pytest.raises(FailedPrecondition):
        harness.driver.dead_letter(
            DeadLetterParams(harness.jobs, first.key, second.lease_token, "x", now)
        )
    with pytest.raises(NotFound):
        harness.driver.dead_letter(
            DeadLetterParams(harness.jobs, ("missing",), first.lease_token, "x", now)
        )
    assert harness.job_ids() == ["a", "b"]
    assert harness.driver.dead_letters(harness.jobs, 10) == []


def _dead_letters(harness: Harness, *ids: str) -> None:
    harness.send(*ids)
    now = utcnow() + SECOND
    for message in harness.receive_now(now=now):
        params = DeadLetterParams(harness.jobs, message.key, message.lease_token, "failed", now)
        harness.driver.dead_letter(params)


def test_dead_letters_are_listed_oldest_failure_first_up_to_the_limit(harness: Harness) -> None:
    _dead_letters(harness, "a")
    _dead_letters(harness, "b")
    letters = harness.driver.dead_letters(harness.jobs, 10)
    assert [letter.key for letter in letters] == [("a",), ("b",)]
    assert len(harness.driver.dead_letters(harness.jobs, 1)) == 1


def test_replay_sends_dead_letters_back_as_new_messages(harness: Harness) -> None:
    _dead_letters(harness, "a", "b", "c")
    assert harness.driver.replay_dead_letters(harness.jobs, [("a",)]) == 1
    assert harness.job_ids() == ["a"]
    [message] = harness.receive_now()
    assert message.delivery_count == 1
    assert harness.driver.replay_dead_letters(harness.jobs, None) == 2
    assert harness.driver.dead_letters(harness.jobs, 10) == []


def test_purge_deletes_dead_letters_for_good(harness: Harness) -> None:
    _dead_letters(harness, "a", "b", "c")
    assert harness.driver.purge_dead_letters(harness.jobs, [("b",), ("missing",)]) == 1
    assert [d.key for d in harness.driver.dead_letters(harness.jobs, 10)] == [("a",), ("c",)]
    assert harness.driver.purge_dead_letters(harness.jobs, None) == 2
    assert harness.driver.dead_letters(harness.jobs, 10) == []
    assert harness.job_ids() == []


def test_queue_counts_by_state_and_the_oldest_ready_age(harness: Harness) -> None:
    empty = harness.driver.queue_counts(harness.jobs)
    assert (empty["ready"], empty["leased"], empty["scheduled"]) == (0, 0, 0)
    start = utcnow()
    harness.send("old", deliver_time=start - timedelta(seconds=60))
    harness.send("new", "leased")
    harness.send("scheduled", deliver_time=start + timedelta(hours=1))
    [leased] = harness.receive_now(max_batch_size=1)

    counts = harness.driver.queue_counts(harness.jobs)

    assert leased.key == ("old",)
    assert (counts["ready"], counts["leased"], counts["scheduled"]) == (2, 1, 1)
    assert counts["oldest_ready_age_seconds"] == pytest.approx(0, abs=5)  # "new"


def test_estimate_counts_of_a_small_queue_are_exact(harness: Harness) -> None:
    harness.send("a", "b", "c")
    harness.receive_now(max_batch_size=1)
    estimate = harness.driver.estimate_counts(harness.jobs)
    assert estimate["estimated"] is False
    assert (estimate["ready"], estimate["leased"], estimate["scheduled"]) == (2, 1, 0)


def test_list_messages_pages_in_key_order_with_a_state_filter(harness: Harness) -> None:
    now = utcnow()
    harness.send("a1", "a2", "b1")
    harness.send("a3", deliver_time=now + timedelta(hours=1))
    [leased] = harness.receive_now(max_batch_size=1, now=now + SECOND)  # "a1"

    def browse(**fields: object) -> list[tuple[str, str]]:
        params = BrowseParams(
            **{
                "queue": harness.jobs,
                "state": None,
                "key_prefix": (),
                "after": None,
                "limit": 10,
                "now": now + SECOND,
                **fields,
            }
        )
        return [(m.key[0], m.state) for m in harness.driver.list_messages(params)]

    assert browse() == [("a1", "leased"), ("a2", "ready"), ("a3", "scheduled"), ("b1", "ready")]
    assert browse(limit=2) == [("a1", "leased"), ("a2", "ready")]
    assert browse(limit=2, after=("a2",)) == [("a3", "scheduled"), ("b1", "ready")]
    assert browse(state="ready") == [("a2", "ready"), ("b1", "ready")]
    assert browse(key_prefix=("a",)) == [("a1", "leased"), ("a2", "ready"), ("a3", "scheduled")]
    assert browse(key_prefix=("a2",), exact=True) == [("a2", "ready")]
    assert browse(key_prefix=("a",), exact=True) == []
    assert leased.key == ("a1",)


def test_expire_ledger_forgets_entries_older_than_the_retention(harness: Harness) -> None:
    transaction = harness.driver.begin()
    assert transaction.record_once("done") is True
    transaction.commit()

    assert harness.driver.expire_ledger(timedelta(hours=1)) == 0
    assert harness.driver.expire_ledger(timedelta(0)) == 1

    transaction = harness.driver.begin()
    try:
        assert transaction.record_once("done") is True, "the expired entry was not forgotten"
    finally:
        transaction.rollback()
