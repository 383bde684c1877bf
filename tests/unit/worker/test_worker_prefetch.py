"""How many messages a queue receives ahead of its free places (the worker's prefetch)."""

from __future__ import annotations

from typing import Any

from txqueue.core.retry import RetryPolicy
from txqueue.worker.app import HandlerSpec
from txqueue.worker.served_queue import QUICK, ServedQueue


def _queue(limit: int, prefetch: int | None, max_batch_size: int = 100) -> ServedQueue:
    spec = HandlerSpec("Tasks", lambda message: None, RetryPolicy(), max_batch_size=max_batch_size)
    renewer: Any = None  # not used by ahead()
    return ServedQueue(spec, renewer, limit, prefetch)


def _ran(queue: ServedQueue, duration: float, times: int = 1) -> None:
    for handling in range(times):
        queue.began(handling, 100.0)
        queue.ended(handling, 100.0 + duration)


def test_a_fixed_prefetch_is_kept_whatever_the_pace() -> None:
    queue = _queue(limit=4, prefetch=3)
    assert queue.ahead(0.0) == 3
    _ran(queue, 10.0)
    assert queue.ahead(200.0) == 3
    assert queue.held.size == 7


def test_by_default_none_before_a_handler_ended_and_none_for_slow_handlers() -> None:
    queue = _queue(limit=16, prefetch=None)
    assert queue.ahead(0.0) == 0
    _ran(queue, QUICK * 1.2)
    assert queue.ahead(200.0) == 0


def test_quick_handlers_get_what_they_finish_within_quick_up_to_a_full_batch() -> None:
    queue = _queue(limit=16, prefetch=None)
    assert queue.prefetch == 84  # a receive of max_batch_size with the 16 running
    _ran(queue, 0.0001)
    assert queue.ahead(200.0) == 84
    queue.average = QUICK / 2  # 16 handlers finish 32 within QUICK
    assert queue.ahead(200.0) == 32
    queue.average = QUICK * 0.99
    assert queue.ahead(200.0) == 16


def test_the_cap_is_at_least_the_limit() -> None:
    assert _queue(limit=80, prefetch=None).prefetch == 80
    assert _queue(limit=2, prefetch=None, max_batch_size=6).prefetch == 4


def test_a_handler_running_longer_than_quick_stops_receiving_ahead() -> None:
    queue = _queue(limit=4, prefetch=None)
    _ran(queue, 0.001, times=10)
    queue.began(1, 500.0)
    assert queue.ahead(500.0 + QUICK / 2) == queue.prefetch
    assert queue.ahead(500.0 + QUICK * 1.01) == 0
    queue.ended(1, 500.0 + QUICK * 1.01)  # it ended: the average moves, receiving ahead resumes
    assert queue.ahead(500.0 + QUICK * 1.01) > 0
