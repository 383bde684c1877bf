"""Acting on chosen messages at the driver: ``delete_messages`` and ``make_ready`` change all
of the keys or none, and refuse a live lease unless forced, in one transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest

from txqueue.drivers.protocol import DeleteMessagesParams, MakeReadyParams
from txqueue.errors import FailedPrecondition, NotFound

from .support import Harness, utcnow


def test_delete_messages_is_all_or_nothing(harness: Harness) -> None:
    harness.send("a", "b", "c")
    jobs = harness.jobs
    with pytest.raises(NotFound, match=r"\('z',\)"):
        harness.driver.delete_messages(DeleteMessagesParams(jobs, [("a",), ("z",)]))
    assert harness.job_ids() == ["a", "b", "c"]
    [leased] = harness.receive_now(max_batch_size=1)
    others = [key for key in [("a",), ("b",), ("c",)] if key != leased.key]
    with pytest.raises(FailedPrecondition):
        harness.driver.delete_messages(DeleteMessagesParams(jobs, [*others, leased.key]))
    assert harness.job_ids() == ["a", "b", "c"]
    assert harness.driver.delete_messages(DeleteMessagesParams(jobs, others)) == 2
    assert harness.driver.delete_messages(DeleteMessagesParams(jobs, [leased.key], True)) == 1
    assert harness.job_ids() == []


def test_make_ready_moves_the_deliver_time_and_ends_a_forced_lease(harness: Harness) -> None:
    harness.send("a", deliver_time=utcnow() + timedelta(days=1))
    harness.send("b")
    jobs = harness.jobs
    [leased] = harness.receive_now()
    assert leased.key == ("b",)
    with pytest.raises(FailedPrecondition, match=r"\('b',\)"):
        harness.driver.make_ready(MakeReadyParams(jobs, [("a",), ("b",)]))
    assert harness.receive_now() == []  # "a" is still a day away
    assert harness.driver.make_ready(MakeReadyParams(jobs, [("a",), ("b",)], force=True)) == 2
    assert sorted(m.key for m in harness.receive_now()) == [("a",), ("b",)]
