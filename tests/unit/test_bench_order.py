"""``txqueue bench`` alternates the two systems within a figure, each first in every other
round, so that a slow spell of a shared machine weighs on both sides of a ratio."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from txqueue.cli import bench as bench_module
from txqueue.cli.main import main


def test_the_systems_alternate_within_each_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def run(system: str, url: str, messages: int, rate: float, workers: int, spec: Any, keys: str):
        calls.append((spec["kind"], system))
        if spec["kind"] == "latency":
            return {"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0}
        return {"rate": 10.0, "stored": messages, "handled": messages, "duplicates": 0}

    monkeypatch.setattr(bench_module, "_run", run)
    arguments = ["bench", "--database", "sqlite:///unused.db", "--workload", "latency"]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*arguments, "--repeats", "4"])

    assert result.exit_code == 0, result.output
    assert [system for _, system in calls] == [
        "raw",
        "txqueue",
        "txqueue",
        "raw",
        "raw",
        "txqueue",
        "txqueue",
        "raw",
    ]
