"""Two worker processes serve the test app for ~27 s, once per engine; the tests below check
what they recorded (one run per engine keeps the suite fast):

- a 25 s handler with a 4 s lease is kept alive by renewal and never runs twice;
- a handler that always fails is tried exactly ``max_attempts`` (4) times, 1 s, 2 s and 4 s
  apart (the policy's delays), then dead-lettered exactly once;
- a periodic schedule (every 1 s) runs once per slot although both workers seeded it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pgserver import create_database, drop_database
from worker_support import (
    STARTUP_SECONDS,
    WorkerProcess,
    create_queues,
    reap,
    records,
    send,
    stop_all,
    wait_for,
)

import txqueue

LONG_SECONDS = 25
TOLERANCE = 1.5


@dataclass
class Run:
    """What one scenario run left behind."""

    url: str
    events: list[dict[str, Any]]
    exit_codes: list[int]
    dead_letters: list[txqueue.DeadLetter]
    infos: dict[str, txqueue.QueueInfo]
    pids: list[int]


def _run(url: str, directory: Path) -> Run:
    create_queues(url)
    send(url, "Long", [1], {"sleep": LONG_SECONDS})
    send(url, "Failing", [1])
    options = ("--queue", "Long", "--queue", "Failing", "--queue", "Ticks")
    workers = [WorkerProcess(url, directory, *options, wait=False) for _ in range(2)]
    try:
        wait_for(
            lambda: records(directory, queue="long", event="end"),
            LONG_SECONDS + STARTUP_SECONDS,
            "the long handler to end",
            *workers,
        )
        with txqueue.connect(url) as db:
            wait_for(lambda: db.dead_letters("Failing"), 20, "the dead letter", *workers)
    finally:
        codes = stop_all(workers)
        reap()
    with txqueue.connect(url) as db:
        letters = db.dead_letters("Failing")
        infos = {q: db.queue_info(q) for q in ("Long", "Failing", "Ticks")}
    return Run(url, records(directory), codes, letters, infos, [w.pid for w in workers])


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    directory = tmp_path_factory.mktemp(f"scenario-{request.param}")
    if request.param == "sqlite":
        yield _run(f"sqlite:///{directory}/test.db", directory)
        return
    server_url = request.getfixturevalue("postgres_url")
    name = f"t_worker_scenarios_{directory.name.replace('-', '_')}"
    url = create_database(server_url, name)
    try:
        yield _run(url, directory)
    finally:
        drop_database(server_url, name)


@pytest.mark.timeout(150)
def test_workers_exit_cleanly(run: Run) -> None:
    assert run.exit_codes == [0, 0]


@pytest.mark.timeout(150)
def test_long_handler_is_kept_alive_and_runs_once(run: Run) -> None:
    starts = [e for e in run.events if e["queue"] == "long" and e["event"] == "start"]
    ends = [e for e in run.events if e["queue"] == "long" and e["event"] == "end"]
    assert len(starts) == 1 and len(ends) == 1, starts + ends
    assert starts[0]["delivery"] == 1
    assert ends[0]["time"] - starts[0]["time"] >= LONG_SECONDS - 0.1
    info = run.infos["Long"]
    assert (info.ready, info.leased, info.scheduled) == (0, 0, 0), "the long message was acked"


@pytest.mark.timeout(150)
def test_failing_handler_follows_the_retry_policy(run: Run) -> None:
    attempts = [e for e in run.events if e["queue"] == "failing"]
    assert [a["delivery"] for a in attempts] == [1, 2, 3, 4]
    gaps = [later["time"] - earlier["time"] for earlier, later in itertools.pairwise(attempts)]
    for gap, delay in zip(gaps, [1, 2, 4]):
        assert delay - 0.05 <= gap <= delay + TOLERANCE, gaps


@pytest.mark.timeout(150)
def test_failing_message_is_dead_lettered_once(run: Run) -> None:
    assert len(run.dead_letters) == 1
    letter = run.dead_letters[0]
    assert letter.key == (1,)
    assert letter.attempts == 4
    assert letter.last_error == "RuntimeError('always fails')"
    assert letter.first_failure < letter.last_failure
    info = run.infos["Failing"]
    assert (info.ready, info.leased, info.scheduled, info.dead_letters) == (0, 0, 0, 1)


@pytest.mark.timeout(150)
def test_periodic_runs_once_per_slot_across_workers(run: Run) -> None:
    ticks = [e for e in run.events if e["queue"] == "ticks"]
    slots = [datetime.fromisoformat(t["key"][1].replace("Z", "+00:00")) for t in ticks]
    assert len(slots) >= LONG_SECONDS - 5, "a 1 s schedule ran about once a second"
    assert len(set(slots)) == len(slots), "a slot ran twice"
    assert all(t["delivery"] == 1 for t in ticks)
    steps = [(b - a).total_seconds() for a, b in itertools.pairwise(sorted(slots))]
    # a run that starts after the next boundary skips to the one after (never replays)
    assert min(steps) == 1.0 and max(steps) <= 2.0, steps
    for tick, slot in zip(ticks, slots):
        assert tick["time"] >= slot.timestamp() - 0.05, "a run started before its slot"
    assert {t["pid"] for t in ticks} <= set(run.pids)
    info = run.infos["Ticks"]  # the chain's one message: waiting, or held by a worker's lease
    assert info.scheduled + info.ready + info.leased == 1, "exactly one chain"
