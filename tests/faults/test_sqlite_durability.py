"""SQLite keeps every commit that returned when the process is killed, whatever ``synchronous``.

docs/guarantees.md states, after SQLite's documentation, that a process crash loses no
returned commit under any ``synchronous`` setting (power loss is another matter, and cannot
be staged here). A process commits one row per transaction, writing each down after its
COMMIT returned, and is killed with SIGKILL mid-stream: every row it wrote down must be there,
at most one more (the commit in flight), and the database must pass ``integrity_check``.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import txqueue

from .harness import create_schema, wait_for, workers_in

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


@pytest.mark.parametrize("synchronous", SYNCHRONOUS)
def test_a_killed_process_loses_no_returned_commit(
    tmp_path: Path, synchronous: str, fault_figures: dict[str, Any]
) -> None:
    path = tmp_path / "durable.db"
    url = f"sqlite:///{path}?synchronous={synchronous}"
    with txqueue.connect(url) as db:
        create_schema(db)
    kills = []
    with workers_in(tmp_path / "workers") as workers:
        for round_ in range(3):
            name = f"writer{round_}"
            workers.start(workers.config(name, url, 1.0), task="commits")
            goal = random.randint(20, 200)
            wait_for(
                lambda name=name, goal=goal: (
                    sum(1 for e in workers.journal(name) if e["ev"] == "committed") >= goal
                ),
                60,
                "commits",
            )
            workers.kill(name)
            written = {f"{name}-{e['n']}" for e in workers.journal(name) if e["ev"] == "committed"}
            kills.append((name, written))
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = {row[0] for row in connection.execute("SELECT effectid FROM effects")}
    finally:
        connection.close()
    for name, written in kills:
        mine = {effect for effect in stored if effect.startswith(f"{name}-")}
        assert written <= mine, f"{len(written - mine)} returned commits lost"
        assert len(mine) <= len(written) + 1
    fault_figures.update(
        synchronous=synchronous,
        kills=len(kills),
        commits_written_down=sum(len(w) for _, w in kills),
        rows_stored=len(stored),
    )
