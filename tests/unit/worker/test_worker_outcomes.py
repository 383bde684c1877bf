"""The outcome rule: return → ack, Retry → release, GiveUp → dead letter, errors → policy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txqueue import GiveUp, Retry, RetryPolicy
from txqueue.errors import InvalidArgument
from txqueue.worker.outcomes import Action, ActionKind, decide, exceeded_error

POLICY = RetryPolicy(
    max_attempts=5, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=60)
)


def test_return_acks() -> None:
    assert decide(None, 1, POLICY) == Action(ActionKind.ACK)
    assert decide(None, 99, POLICY) == Action(ActionKind.ACK)


def test_errors_are_released_with_doubling_delays_then_dead_lettered() -> None:
    error = ValueError("boom")
    actions = [decide(error, attempt, POLICY) for attempt in range(1, 6)]
    assert [a.kind for a in actions] == [ActionKind.RELEASE] * 4 + [ActionKind.DEAD_LETTER]
    assert [a.delay.total_seconds() for a in actions[:4]] == [1, 2, 4, 8]
    assert {a.error for a in actions} == {"ValueError('boom')"}


def test_delays_are_capped_by_max_retry_delay() -> None:
    policy = RetryPolicy(
        max_attempts=10, min_retry_delay=timedelta(seconds=4), max_retry_delay=timedelta(seconds=20)
    )
    delays = [decide(OSError(), k, policy).delay.total_seconds() for k in range(1, 10)]
    assert delays == [4, 8, 16, 20, 20, 20, 20, 20, 20]


def test_min_equal_max_is_linear() -> None:
    policy = RetryPolicy(
        max_attempts=4, min_retry_delay=timedelta(seconds=3), max_retry_delay=timedelta(seconds=3)
    )
    assert [decide(OSError(), k, policy).delay for k in (1, 2, 3)] == [timedelta(seconds=3)] * 3


def test_max_attempts_one_means_no_retry() -> None:
    assert decide(RuntimeError(), 1, RetryPolicy(max_attempts=1)).kind is ActionKind.DEAD_LETTER


def test_retry_uses_its_delay_or_the_policy() -> None:
    assert decide(Retry(timedelta(seconds=30)), 1, POLICY) == Action(
        ActionKind.RELEASE, timedelta(seconds=30), "Retry(retry requested)"
    )
    assert decide(Retry("2m", reason="busy"), 2, POLICY).delay == timedelta(minutes=2)
    assert decide(Retry(), 3, POLICY).delay == timedelta(seconds=4)
    assert decide(Retry(timedelta(0)), 1, POLICY).delay == timedelta(0)


def test_retry_on_the_last_attempt_dead_letters() -> None:
    action = decide(Retry(timedelta(seconds=1), reason="busy"), 5, POLICY)
    assert action == Action(ActionKind.DEAD_LETTER, error="Retry(busy)")


def test_give_up_dead_letters_at_once() -> None:
    assert decide(GiveUp("bad payload"), 1, POLICY) == Action(
        ActionKind.DEAD_LETTER, error="gave up: bad payload"
    )


def test_retry_rejects_a_negative_delay() -> None:
    with pytest.raises(InvalidArgument, match="delay"):
        Retry(timedelta(seconds=-1))


def test_exceeded_error_only_past_max_attempts() -> None:
    assert exceeded_error(5, POLICY) is None
    text = exceeded_error(6, POLICY)
    assert text is not None and "exceeded max_attempts=5" in text and "delivery 6" in text


def test_give_up_and_retry_are_not_confused_with_the_record_model() -> None:
    import txqueue

    assert txqueue.DeadLetter is not txqueue.GiveUp
    assert issubclass(txqueue.GiveUp, Exception) and issubclass(txqueue.Retry, Exception)


@given(
    attempts=st.integers(min_value=1, max_value=50),
    minimum=st.integers(min_value=1, max_value=600),
    extra=st.integers(min_value=0, max_value=600),
    attempt=st.integers(min_value=1, max_value=60),
)
def test_every_attempt_before_the_last_is_released_within_bounds(
    attempts: int, minimum: int, extra: int, attempt: int
) -> None:
    maximum = min(minimum + extra, 600)
    policy = RetryPolicy(attempts, timedelta(seconds=minimum), timedelta(seconds=maximum))
    action = decide(RuntimeError(), attempt, policy)
    if attempt < attempts:
        assert action.kind is ActionKind.RELEASE
        assert timedelta(seconds=minimum) <= action.delay <= timedelta(seconds=maximum)
        assert action.delay == min(
            timedelta(seconds=minimum) * 2 ** min(attempt - 1, 20), policy.max_retry_delay
        )
    else:
        assert action.kind is ActionKind.DEAD_LETTER
