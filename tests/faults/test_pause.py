"""A worker frozen past its lease (SIGSTOP) cannot ack, and its effects roll back (SPEC §3).

Worker A receives the only message under a 1 s lease and is frozen with SIGSTOP — in its
handler, or (PostgreSQL) inside its transaction after writing the effect. The lease runs
out; worker B receives the message. A is then thawed (SIGCONT) and carries on with
`process_then_ack`: effect + ack fenced by its now stale lease token, in one transaction.

- thawed after B acked: A's ack finds no message (``NotFound``);
- thawed while B still holds the lease: A's token no longer holds it (``FailedPrecondition``);
- either way A's transaction rolls back, its effect with it: exactly one effect, B's.

SQLite has no "inside the transaction" variant: a frozen SQLite writer holds the database's
only write lock, so B could not even receive (a limit of SQLite, documented in
docs/guarantees.md).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import txqueue

from .harness import Sender, create_schema, history_of, wait_for, workers_in
from .history import History, check

LEASE = 1.0
STEP_TIMEOUT = 20.0


def _let_go(fifo: Path) -> None:
    """Release a worker held at a point: it is (blocked) reading this FIFO."""
    descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(descriptor, b"go\n")
    finally:
        os.close(descriptor)


def _event(workers: Any, name: str, event: str) -> dict[str, Any] | None:
    found = [e for e in workers.journal(name) if e["ev"] == event]
    return found[-1] if found else None


@pytest.fixture(
    params=[
        pytest.param(("sqlite", "handler", "after-b-acked"), id="sqlite-handler-thawed-after-ack"),
        pytest.param(
            ("sqlite", "handler", "while-b-holds"), id="sqlite-handler-thawed-while-leased"
        ),
        pytest.param(
            ("postgres", "handler", "after-b-acked"),
            id="postgres-handler-thawed-after-ack",
            marks=pytest.mark.postgres,
        ),
        pytest.param(
            ("postgres", "handler", "while-b-holds"),
            id="postgres-handler-thawed-while-leased",
            marks=pytest.mark.postgres,
        ),
        pytest.param(
            ("postgres", "effect", "after-b-acked"),
            id="postgres-in-transaction-thawed-after-ack",
            marks=pytest.mark.postgres,
        ),
    ]
)
def scenario(request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """(database URL, where A is frozen, when A is thawed)."""
    engine, freeze_at, thaw = request.param
    fixture = "sqlite_url" if engine == "sqlite" else "pg_database_url"
    return str(request.getfixturevalue(fixture)), freeze_at, thaw


@dataclass
class Result:
    a_outcome: dict[str, Any]
    b_outcome: dict[str, Any]
    history: History
    frozen_seconds: float


def freeze_and_thaw(
    database_url: str, directory: Path, freeze_at: str, thaw: str, sabotage: str | None = None
) -> Result:
    """Run the scenario of the module doc; ``sabotage`` breaks worker A on purpose."""
    db = txqueue.connect(database_url)
    try:
        create_schema(db)
        sender = Sender(db)
        [key] = sender.send(1)
        fifo_a, fifo_b = directory / "a.fifo", directory / "b.fifo"
        os.mkfifo(fifo_a)
        os.mkfifo(fifo_b)
        stop = directory / "stop"
        with workers_in(directory / "workers") as workers:
            options = {
                "hold_at": freeze_at,
                "hold_fifo": str(fifo_a),
                "stop_file": str(stop),
                "sabotage": sabotage,
            }
            workers.start(workers.config("A", database_url, LEASE, **options))
            wait_for(lambda: _event(workers, "A", "hold"), STEP_TIMEOUT, "A to hold the message")
            workers.signal("A", signal.SIGSTOP)
            frozen_at = time.time()
            received_a = _event(workers, "A", "receive")
            assert received_a is not None and received_a["key"] == key

            b_options: dict[str, Any] = {"stop_file": str(stop)}
            if thaw == "while-b-holds":
                b_options.update(hold_at="handler", hold_fifo=str(fifo_b))
            workers.start(workers.config("B", database_url, LEASE, **b_options))
            b_step = "acked" if thaw == "after-b-acked" else "hold"
            wait_for(lambda: _event(workers, "B", b_step), STEP_TIMEOUT, f"B to have {b_step}")
            received_b = _event(workers, "B", "receive")
            assert received_b is not None
            assert received_b["t"] > received_a["exp"], "B received before A's lease expired"

            _let_go(fifo_a)
            workers.signal("A", signal.SIGCONT)
            a_outcome = wait_for(lambda: _outcome(workers, "A"), STEP_TIMEOUT, "A's ack")
            thawed_at = time.time()
            if thaw == "while-b-holds":
                _let_go(fifo_b)
            b_outcome = wait_for(lambda: _outcome(workers, "B"), STEP_TIMEOUT, "B's ack")
            stop.touch()
            for name in ("A", "B"):
                wait_for(lambda name=name: not workers.alive(name), 10, f"{name} to stop")
                assert workers.crashed(name) is None, workers.crashed(name)
            history = history_of(db, sender, workers)
    finally:
        db.close()
    return Result(a_outcome, b_outcome, history, round(thawed_at - frozen_at, 2))


def _outcome(workers: Any, name: str) -> dict[str, Any] | None:
    return _event(workers, name, "ack_failed") or _event(workers, name, "acked")


def test_frozen_worker_cannot_ack_and_its_effects_roll_back(
    scenario: tuple[str, str, str], tmp_path: Path, fault_figures: dict[str, Any]
) -> None:
    database_url, freeze_at, thaw = scenario
    result = freeze_and_thaw(database_url, tmp_path, freeze_at, thaw)
    history = result.history
    report = check(history, lease=LEASE)
    failed = result.a_outcome
    fault_figures.update(
        frozen_seconds=result.frozen_seconds,
        a_outcome=failed["ev"] + ":" + failed.get("error", ""),
        checker=report.figures(),
    )
    assert failed["ev"] == "ack_failed", "the frozen worker acked with a stale lease token"
    expected = "NotFound" if thaw == "after-b-acked" else "FailedPrecondition"
    assert failed["error"] == expected
    assert result.b_outcome["ev"] == "acked"
    assert [e.worker for e in history.effects] == ["B"]
    assert report.clean, report
    assert not history.remaining


def test_an_ack_without_the_lease_token_is_caught(
    sqlite_url: str, tmp_path: Path, fault_figures: dict[str, Any]
) -> None:
    """With A acking by key alone, the thawed A wins: the checker reports a stale ack."""
    result = freeze_and_thaw(sqlite_url, tmp_path, "handler", "while-b-holds", "unfenced")
    report = check(result.history, lease=LEASE)
    fault_figures.update(a_outcome=result.a_outcome["ev"], checker=report.figures())
    assert result.a_outcome["ev"] == "acked"
    assert result.b_outcome["ev"] == "ack_failed"  # B, the lease holder, lost its work
    assert report.stale_ack == 1, report
