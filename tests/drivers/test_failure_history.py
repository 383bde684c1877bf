"""A message's failure history: every failed attempt (release with an error, dead-letter
move) is kept, newest ten, and moves with the message into its dead letter."""

from __future__ import annotations

from datetime import timedelta

from txqueue.core.failures import MAX_FAILURES, Raised
from txqueue.drivers.protocol import BrowseParams, DeadLetterParams, ReleaseParams

from .support import Harness, utcnow

SECOND = timedelta(seconds=1)


def _raised(number: int) -> Raised:
    try:
        raise KeyError(f"email {number}")
    except KeyError as error:
        return Raised.of(error)


def _fail(harness: Harness, times: int) -> None:
    """Lease message "a" and fail it ``times`` times, the last one into its dead letter."""
    now = utcnow() + SECOND
    for attempt in range(1, times + 1):
        now += SECOND
        [message] = harness.receive_now(now=now)
        assert message.delivery_count == attempt
        error = f"KeyError('email {attempt}')"
        if attempt < times:
            params = ReleaseParams(
                harness.jobs, [message.lease_token], timedelta(0), now, error, _raised(attempt)
            )
            assert harness.driver.release(params) == 1
        else:
            harness.driver.dead_letter(
                DeadLetterParams(
                    harness.jobs, message.key, message.lease_token, error, now, _raised(attempt)
                )
            )


def test_each_failed_attempt_is_kept_and_moves_into_the_dead_letter(harness: Harness) -> None:
    harness.send("a")
    _fail(harness, 3)
    [letter] = harness.driver.dead_letters(harness.jobs, 10)
    assert letter.last_error == "KeyError('email 3')"
    assert [(f.attempt, f.error_type, f.message) for f in letter.failures] == [
        (1, "KeyError", "'email 1'"),
        (2, "KeyError", "'email 2'"),
        (3, "KeyError", "'email 3'"),
    ]
    assert all("in _raised" in (f.traceback or "") for f in letter.failures)
    assert letter.failures[-1].failed_at == letter.last_failure
    assert letter.failures[0].failed_at == letter.first_failure


def test_a_message_waiting_for_its_retry_shows_its_failures(harness: Harness) -> None:
    harness.send("a", "b")
    now = utcnow() + SECOND
    first, _ = harness.receive_now(now=now)
    params = ReleaseParams(
        harness.jobs, [first.lease_token], timedelta(hours=1), now, "boom", _raised(1)
    )
    assert harness.driver.release(params) == 1
    page = harness.driver.list_messages(BrowseParams(harness.jobs, None, (), None, 10, now))
    waiting, untouched = page
    assert waiting.last_error == "boom"
    [failure] = waiting.failures
    assert (failure.attempt, failure.error_type, failure.failed_at) == (1, "KeyError", now)
    assert "KeyError: 'email 1'" in (failure.traceback or "")
    assert (untouched.last_error, untouched.failures) == (None, ())


def test_a_release_without_an_error_records_no_failure(harness: Harness) -> None:
    harness.send("a")
    [message] = harness.receive_now()
    assert harness.release([message.lease_token]) == 1
    [stored] = harness.driver.list_messages(BrowseParams(harness.jobs, None, (), None, 10))
    assert (stored.last_error, stored.failures) == (None, ())


def test_a_text_only_failure_is_kept_without_a_type(harness: Harness) -> None:
    harness.send("a")
    [message] = harness.receive_now()
    assert harness.release([message.lease_token], error="gave up") == 1
    [stored] = harness.driver.list_messages(BrowseParams(harness.jobs, None, (), None, 10))
    [failure] = stored.failures
    assert (failure.attempt, failure.error_type, failure.message) == (1, "", "gave up")
    assert failure.traceback is None


def test_the_history_keeps_the_newest_attempts(harness: Harness) -> None:
    harness.send("a")
    _fail(harness, MAX_FAILURES + 5)
    [letter] = harness.driver.dead_letters(harness.jobs, 10)
    assert letter.attempts == MAX_FAILURES + 5
    assert [f.attempt for f in letter.failures] == list(range(6, MAX_FAILURES + 6))


def test_plain_text_written_before_histories_reads_as_one_failure(harness: Harness) -> None:
    harness.send("a")
    now = utcnow() + SECOND
    [message] = harness.receive_now(now=now)
    assert harness.release([message.lease_token], now=now, error="old") == 1
    marker = harness.traits.marker
    last_error = f"{harness.traits.hidden_column_prefix}last_error"  # _txq_… or txqueue_…
    transaction = harness.driver.begin()
    try:  # what an older txqueue stored: the text alone
        transaction.execute_update(
            f"UPDATE jobs SET {last_error} = {marker} WHERE id = {marker}",
            ["legacy text", "a"],
        )
        transaction.commit()
    finally:
        transaction.rollback()
    [stored] = harness.driver.list_messages(BrowseParams(harness.jobs, None, (), None, 10, now))
    assert stored.last_error == "legacy text"
    assert [(f.attempt, f.message, f.failed_at) for f in stored.failures] == [
        (1, "legacy text", now)
    ]
    now += SECOND
    [message] = harness.receive_now(now=now)
    harness.driver.dead_letter(
        DeadLetterParams(harness.jobs, message.key, message.lease_token, "new", now, _raised(2))
    )
    [letter] = harness.driver.dead_letters(harness.jobs, 10)
    assert [(f.attempt, f.error_type, f.message) for f in letter.failures] == [
        (1, "", "legacy text"),
        (2, "KeyError", "'email 2'"),
    ]
