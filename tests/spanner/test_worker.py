"""``txqueue worker`` end to end on the Cloud Spanner emulator: real worker processes.

The worker app (``worker_app.py``) writes each message's effect row in the handler's
transaction, with the ack; a handler that always fails is retried with backoff and then
dead-lettered. Two workers share the queue: the emulator aborts their concurrent
transactions, and the retries absorb that (one effect per message, none lost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from integration.worker_support import WorkerProcess, reap, records, stop_all, wait_for

import txqueue

from .worker_app import FAILING_POLICY, SCHEMA

APP = "tests.spanner.worker_app:app"
MESSAGES = 30


@pytest.fixture(autouse=True)
def _reap() -> Iterator[None]:
    yield
    reap()  # what a failed test left running


def _effects(url: str) -> Counter[int]:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        return Counter(int(row[0]) for row in snapshot.execute_sql("SELECT Id FROM Effects"))


def test_workers_handle_retry_and_dead_letter_on_spanner(spanner_url: str, tmp_path: Path) -> None:
    with txqueue.connect(spanner_url) as db:
        db.update_ddl(SCHEMA)
        with db.batch() as batch:
            for key in range(1, MESSAGES + 1):
                batch.send("Tasks", (key,), b"{}")
            batch.send("Failing", (1,), b"{}")
    workers = [WorkerProcess(spanner_url, tmp_path, app=APP) for _ in range(2)]

    wait_for(lambda: sum(_effects(spanner_url).values()) >= MESSAGES, 90, "the effects", *workers)
    with txqueue.connect(spanner_url) as db:
        wait_for(lambda: db.dead_letters("Failing"), 60, "the dead letter", *workers)
        assert stop_all(workers) == [0, 0]
        effects = _effects(spanner_url)
        assert effects == Counter(range(1, MESSAGES + 1))  # each once, none lost
        tasks = db.queue_info("Tasks")
        assert (tasks.ready, tasks.leased, tasks.scheduled) == (0, 0, 0)
        [letter] = db.dead_letters("Failing")
        failing = db.queue_info("Failing")
    assert letter.key == (1,)
    assert letter.attempts == FAILING_POLICY.max_attempts
    assert "always fails (3)" in (letter.last_error or "")
    assert (failing.ready, failing.leased, failing.dead_letters) == (0, 0, 1)
    attempts = records(tmp_path, event="attempt")
    assert [a["delivery"] for a in attempts] == [1, 2, 3]
    # retried after the policy's backoff: 1 s, then 2 s
    gaps = [b["time"] - a["time"] for a, b in pairwise(attempts)]
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9, gaps
    logs = "".join(w.log.read_text() for w in workers)
    assert "dead_lettered Failing [1]" in logs
