"""The worker as a subprocess, stopped with SIGINT (graceful) and SIGKILL (crash).

SIGINT: receiving stops, a handler that finishes within ``--grace`` is acked, the leases of
those that do not are released (receivable again at once), nothing is lost, exit status 0.
SIGKILL: the message comes back after its lease and is handled by the next worker.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from worker_support import (
    WorkerProcess,
    create_queues,
    queue_info,
    reap,
    records,
    send,
    wait_for,
)

import txqueue


@pytest.fixture
def url(database_url: str) -> Iterator[str]:
    create_queues(database_url)
    yield database_url
    reap()  # what a failed test left running


def test_sigint_acks_finished_handlers_and_releases_the_rest(url: str, tmp_path: Path) -> None:
    send(url, "Jobs", [1, 2], {"sleep": 60})
    send(url, "Jobs", [3], {"sleep": 1.5})
    worker = WorkerProcess(url, tmp_path, "--grace", "4s", "--queue", "Jobs")
    wait_for(lambda: len(records(tmp_path, event="start")) == 3, 30, "three handlers", worker)

    worker.signal(signal.SIGINT)
    assert worker.wait(30) == 0, worker.output()

    ended = [event["key"] for event in records(tmp_path, event="end")]
    assert ended == [[3]], "only the short handler finished within the grace period"
    info = queue_info(url, "Jobs")
    assert (info.ready, info.leased, info.scheduled) == (2, 0, 0), info
    with txqueue.connect(url) as db:
        again = list(db.receive("Jobs", max_duration=timedelta(seconds=1), max_batch_size=5))
    assert sorted(m.key for m in again) == [(1,), (2,)]
    assert {m.delivery_count for m in again} == {2}


def test_second_sigint_skips_the_grace_period(url: str, tmp_path: Path) -> None:
    send(url, "Jobs", [1], {"sleep": 60})
    worker = WorkerProcess(url, tmp_path, "--grace", "60s", "--queue", "Jobs")
    wait_for(lambda: records(tmp_path, event="start"), 30, "the handler to start", worker)

    worker.signal(signal.SIGINT)
    wait_for(lambda: "waiting up to" in worker.log.read_text(), 10, "the grace period", worker)
    worker.signal(signal.SIGINT)
    assert worker.wait(15) == 0, worker.output()
    assert queue_info(url, "Jobs").ready == 1


def test_sigkill_message_is_redelivered_after_its_lease(url: str, tmp_path: Path) -> None:
    send(url, "Jobs", [7], {"sleep": 2})
    first = WorkerProcess(url, tmp_path, "--queue", "Jobs")
    wait_for(lambda: records(tmp_path, event="start"), 30, "the first delivery", first)
    first.signal(signal.SIGKILL)
    first.wait(10)

    second = WorkerProcess(url, tmp_path, "--queue", "Jobs")
    wait_for(lambda: records(tmp_path, event="end"), 40, "the redelivery to finish", second)
    assert second.stop() == 0, second.output()

    starts = records(tmp_path, event="start")
    assert [(s["pid"], s["delivery"]) for s in starts] == [(first.pid, 1), (second.pid, 2)]
    # the lease (4 s, perhaps renewed once at 2 s) had to run out before the redelivery
    assert starts[1]["time"] - starts[0]["time"] >= 4 - 0.5
    assert [e["pid"] for e in records(tmp_path, event="end")] == [second.pid]
    info = queue_info(url, "Jobs")
    assert (info.ready, info.leased, info.scheduled, info.dead_letters) == (0, 0, 0, 0)
