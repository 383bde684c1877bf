"""``txqueue bench`` on the Cloud Spanner emulator: the figures carry the label that says they
are no speed figures. (Every workload of txqueue and the raw google-cloud-spanner client,
counted, runs in tests/integration/test_bench_cli.py, whose engines include the emulator.)"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from txqueue.cli.bench import EMULATOR_LABEL
from txqueue.cli.main import main

MESSAGES = 10


def test_bench_on_the_emulator_is_labelled_correctness_only(
    spanner_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "bench.json"
    arguments = [
        "bench", "--database", spanner_url, "--workload", "send", "--messages", str(MESSAGES),
        "--batch", "5", "--repeats", "1", "--output", str(report),
    ]  # fmt: skip
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, arguments)
    assert result.exit_code == 0, result.output

    assert EMULATOR_LABEL in result.output
    data = json.loads(report.read_text())
    assert data["label"] == EMULATOR_LABEL
    for label, systems in data["results"].items():
        assert set(systems) == {"raw", "txqueue"}, label
        for system, (run,) in systems.items():
            assert run["stored"] == MESSAGES and run["rate"] > 0, (label, system, run)
    assert "txqueue / raw" in result.output
