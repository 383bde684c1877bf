"""``txqueue bench`` alternates the two systems within a figure, each first in every other
round, so that a slow spell of a shared machine weighs on both sides of a ratio; its table
shows latencies to a tenth of a millisecond."""

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
            return {"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0 + 0.1 * len(calls)}
        return {"rate": 10.0, "stored": messages, "handled": messages, "duplicates": 0}

    monkeypatch.setattr(bench_module, "_run", run)
    arguments = ["bench", "--database", "sqlite:///unused.db", "--workload", "latency"]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*arguments, "--repeats", "4"])

    assert result.exit_code == 0, result.output
    # a median of an even count is a mean (3.45 here, 3.4500000000000002 in binary): shown
    # to a tenth of a millisecond
    assert result.output.count("1.0 / 3.5") == 2, result.output
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
