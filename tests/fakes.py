"""Fakes the tests share."""

from __future__ import annotations


class MonotonicClock:
    """A stand-in for ``time.monotonic`` that moves only when a test moves ``now``."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
