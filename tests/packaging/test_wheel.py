"""The wheel as a user gets it: built with ``python -m build``, installed into a fresh
virtualenv (its dependencies from the package index, none of the extras), and ``txqueue demo``
run from that virtualenv, away from the source tree. Catches what an editable install hides: a
module missing from the wheel, a dependency that only an extra brings, a broken entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(180)]


def _run(command: list[str], cwd: Path, timeout: float = 120) -> str:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_built_wheel_installs_in_a_fresh_virtualenv_and_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], tmp_path)
    [wheel] = dist.glob("txqueue-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], tmp_path, timeout=150)

    work = tmp_path / "work"
    work.mkdir()
    location = _run([str(python), "-c", "import txqueue; print(txqueue.__file__)"], work)
    assert Path(location.strip()).is_relative_to(venv), location  # the wheel, not the checkout

    output = _run([str(venv / "bin" / "txqueue"), "demo"], work)
    assert "done: 2 users, 0 messages left in UserTasks" in output, output
    help_text = _run([str(venv / "bin" / "txqueue"), "--help"], work)
    assert "pip install 'txqueue[events]'" in help_text  # no events extra: said, not hidden
