"""Status classes (seed 004), Retry-After parsing and the delay before the next attempt."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txqueue.core.retry import RetryPolicy
from txqueue.errors import InvalidArgument
from txqueue.events.outcomes import AttemptKind, classify_status, next_delay, parse_retry_after

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
SECOND = timedelta(seconds=1)

# The table of seed 004, written out rather than imported from the module under test.
RETRIED = {408, 409, 429, 500, 502, 503, 504}


@pytest.mark.parametrize("status", range(100, 600))
def test_every_status_is_classified_as_the_table_says(status: int) -> None:
    if 200 <= status < 300:
        expected = AttemptKind.SUCCESS
    elif status in RETRIED:
        expected = AttemptKind.TRANSIENT
    else:
        expected = AttemptKind.PERMANENT
    assert classify_status(status) is expected


@pytest.mark.parametrize("status", [0, 99, 600, 999, -1])
def test_statuses_outside_the_http_range_are_permanent(status: int) -> None:
    assert classify_status(status) is AttemptKind.PERMANENT


# --- Retry-After ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", timedelta(seconds=120)),
        (" 5 ", timedelta(seconds=5)),
        ("0", timedelta(0)),
        ("0000000000000007", timedelta(seconds=7)),
        ("99999999999999999999999", timedelta(days=365)),
        ("Mon, 06 May 2024 07:09:09 GMT", timedelta(seconds=60)),  # IMF-fixdate
        ("Monday, 06-May-24 07:10:09 GMT", timedelta(seconds=120)),  # obsolete RFC 850
        ("Mon May  6 07:08:19 2024", timedelta(seconds=10)),  # obsolete asctime
        ("Mon, 06 May 2024 09:08:39 +0200", timedelta(seconds=30)),
        ("Mon, 06 May 2024 07:00:00 GMT", timedelta(0)),  # in the past: no wait
    ],
)
def test_retry_after_forms(value: str, expected: timedelta) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    "value", [None, "", "soon", "-5", "1.5", "5s", "+5", "Mon, 99 Foo 2024 07:00:00 GMT", "1 2"]
)
def test_retry_after_garbage_is_ignored(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


def test_retry_after_needs_an_aware_now() -> None:
    with pytest.raises(InvalidArgument, match="now must be timezone-aware"):
        parse_retry_after("Mon, 06 May 2024 07:09:09 GMT", datetime(2024, 5, 6))


# --- next_delay ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 1), (2, 2), (3, 4), (4, 8), (6, 32), (7, 60), (50, 60)]
)
def test_next_delay_follows_the_policy(attempt: int, expected: int) -> None:
    assert next_delay(RetryPolicy(), attempt, None) == expected * SECOND


def test_retry_after_raises_the_delay() -> None:
    assert next_delay(RetryPolicy(), 1, 10 * SECOND) == 10 * SECOND


def test_retry_after_never_exceeds_the_maximum() -> None:
    assert next_delay(RetryPolicy(), 1, timedelta(hours=1)) == 60 * SECOND


def test_shorter_retry_after_does_not_shorten_the_delay() -> None:
    assert next_delay(RetryPolicy(), 4, 2 * SECOND) == 8 * SECOND
    assert next_delay(RetryPolicy(), 4, timedelta(0)) == 8 * SECOND


def test_linear_backoff_when_min_equals_max() -> None:
    policy = RetryPolicy(min_retry_delay=4 * SECOND, max_retry_delay=4 * SECOND)
    assert [next_delay(policy, attempt, None) for attempt in range(1, 6)] == [4 * SECOND] * 5


@pytest.mark.parametrize("attempt", [0, -1, True, 1.0])
def test_attempt_must_be_a_positive_integer(attempt: object) -> None:
    with pytest.raises(InvalidArgument, match="attempt must be an integer of at least 1"):
        next_delay(RetryPolicy(), attempt, None)  # type: ignore[arg-type]


@st.composite
def policies(draw: st.DrawFn) -> RetryPolicy:
    low = draw(st.integers(1, 600))
    high = draw(st.integers(low, 600))
    jitter = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    attempts = draw(st.integers(1, 10))
    return RetryPolicy(attempts, low * SECOND, high * SECOND, jitter)


@given(
    policy=policies(),
    attempt=st.integers(1, 100),
    retry_after=st.none() | st.integers(0, 10**7).map(lambda s: s * SECOND),
)
def test_next_delay_stays_within_the_policy_bounds(
    policy: RetryPolicy, attempt: int, retry_after: timedelta | None
) -> None:
    delay = next_delay(policy, attempt, retry_after)
    assert policy.min_retry_delay <= delay <= policy.max_retry_delay
    if retry_after is not None:
        assert delay >= min(retry_after, policy.max_retry_delay)
    if policy.jitter == 0:
        wanted = policy.delay(attempt)
        if retry_after is not None:
            wanted = max(wanted, retry_after)
        assert delay == min(wanted, policy.max_retry_delay)
