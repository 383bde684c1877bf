"""When a PostgreSQL receive reads its queue's planner estimate (drivers.postgres.statistics)."""

from __future__ import annotations

from fakes import MonotonicClock

from txqueue.drivers.postgres.statistics import (
    CHECK_PERIOD,
    EVIDENCE,
    MIN_STREAK,
    QUIET_PERIOD,
    StatisticsWatch,
)


def after(watch: StatisticsWatch, queue: str, count: int, limit: int) -> float | None:
    """Record a receive of ``queue``; what the next receive of it must check first."""
    watch.received(queue, count, limit)
    return watch.due(queue)


def test_a_check_is_due_once_until_a_receive_takes_it() -> None:
    watch = StatisticsWatch(MonotonicClock())
    for _ in range(MIN_STREAK):
        watch.received("jobs", 1, limit=1)
    assert watch.due("jobs") == MIN_STREAK / 2
    assert watch.due("jobs") is None


def test_a_short_receive_drops_a_check_not_yet_taken() -> None:
    watch = StatisticsWatch(MonotonicClock())
    for _ in range(MIN_STREAK):
        watch.received("jobs", 1, limit=1)
    watch.received("jobs", 0, limit=1)  # the backlog is gone: nothing to mend
    assert watch.due("jobs") is None


def test_a_streak_of_full_receives_is_checked_once_it_reaches_min_streak() -> None:
    watch = StatisticsWatch(MonotonicClock())
    results = [after(watch, "jobs", 1, limit=1) for _ in range(MIN_STREAK)]
    assert results[:-1] == [None] * (MIN_STREAK - 1)
    assert results[-1] == MIN_STREAK / 2  # the estimate must show half of what was leased
    assert after(watch, "other", 1, limit=1) is None  # streaks are per queue


def test_a_short_receive_ends_the_streak_and_its_check_period() -> None:
    watch = StatisticsWatch(MonotonicClock())
    assert after(watch, "jobs", 90, limit=90) is None
    assert after(watch, "jobs", 89, limit=90) is None  # short: the count starts over
    assert after(watch, "jobs", 90, limit=90) is None
    assert after(watch, "jobs", 90, limit=90) == 90.0  # twice the batch size: 180 leased
    assert after(watch, "jobs", 0, limit=90) is None
    # A new streak is checked as soon as it is long enough, however recent the last check.
    assert after(watch, "jobs", 90, limit=90) is None
    assert after(watch, "jobs", 90, limit=90) == 90.0


def test_a_long_streak_is_checked_again_each_check_period_and_proves_at_most_evidence() -> None:
    clock = MonotonicClock()
    watch = StatisticsWatch(clock)
    assert after(watch, "jobs", 100, limit=100) is None  # below twice the batch size
    assert after(watch, "jobs", 100, limit=100) == 100.0
    for _ in range(50):
        assert after(watch, "jobs", 100, limit=100) is None  # within CHECK_PERIOD
    clock.now += CHECK_PERIOD
    assert after(watch, "jobs", 100, limit=100) == EVIDENCE / 2  # 5,300 leased
    clock.now += CHECK_PERIOD
    assert after(watch, "jobs", 1000, limit=1000) == 4 * 1000 / 2  # a larger batch


def test_an_analyze_in_vain_quiets_the_queue_for_quiet_period() -> None:
    clock = MonotonicClock()
    watch = StatisticsWatch(clock)
    after(watch, "jobs", 100, limit=100)
    assert after(watch, "jobs", 100, limit=100) == 100.0
    watch.in_vain("jobs")
    clock.now += QUIET_PERIOD - 1
    assert after(watch, "jobs", 100, limit=100) is None
    assert after(watch, "other", 100, limit=100) is None
    assert after(watch, "other", 100, limit=100) == 100.0  # other queues are not quieted
    clock.now += 1
    assert after(watch, "jobs", 100, limit=100) == 400 / 2
