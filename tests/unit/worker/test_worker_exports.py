"""The worker's public names: exported from txqueue and txqueue.worker, sorted and complete."""

from __future__ import annotations

import inspect

import txqueue
import txqueue.testing
import txqueue.worker


def test_top_level_exports() -> None:
    for name in ("App", "GiveUp", "Retry"):
        assert name in txqueue.__all__
        assert getattr(txqueue, name) is getattr(txqueue.worker, name)
    assert txqueue.__all__ == sorted(txqueue.__all__)


def test_worker_all_is_sorted_and_complete() -> None:
    names = txqueue.worker.__all__
    assert names == sorted(names)
    public = {
        name
        for name, value in vars(txqueue.worker).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(names)


def test_testing_all() -> None:
    assert txqueue.testing.__all__ == ["FakeClock", "drain", "drain_async"]
