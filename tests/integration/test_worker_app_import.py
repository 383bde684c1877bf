"""``txqueue worker module:app`` imports the app from the current directory without letting
that directory shadow installed packages, and warns when other users may write to it.

Another user's ``prometheus_client.py`` planted in a shared directory ran as the worker
(as root, in the report): the directory came first on ``sys.path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TXQUEUE = os.path.join(os.path.dirname(sys.executable), "txqueue")

PLANTED = """\
import pathlib
pathlib.Path("planted-module-ran").write_text("it ran")
raise SystemExit("the planted prometheus_client ran")
"""

APP = """\
import prometheus_client  # the installed one, whatever lies beside this file

app = prometheus_client.__name__  # not an App: the worker stops once it has imported this
"""


def _worker(directory: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "worker", "myapp:app", "--database", f"sqlite:///{directory}/app.db"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir(mode=0o700)
    (folder / "prometheus_client.py").write_text(PLANTED)
    (folder / "myapp.py").write_text(APP)
    return folder


@pytest.mark.parametrize(
    "command",
    [(TXQUEUE,), (sys.executable, "-m", "txqueue.cli.main")],
    ids=["txqueue", "python -m"],
)
def test_a_planted_module_does_not_shadow_an_installed_one(
    directory: Path, command: tuple[str, ...]
) -> None:
    result = _worker(directory, *command)
    assert not (directory / "planted-module-ran").exists(), result.stderr
    # The app module itself was found in the directory (and refused for not being an App).
    assert result.returncode == 2, result.stderr
    assert "myapp:app is a str, not a txqueue.App" in result.stderr
    assert "writable by other users" not in result.stderr


def test_a_directory_others_may_write_to_gets_a_warning(directory: Path) -> None:
    (directory / "prometheus_client.py").unlink()
    (directory / "myapp.py").write_text("import txqueue\n\napp = txqueue.App()\n")
    directory.chmod(0o777 | 0o1000)  # world-writable, sticky: others can still add modules
    result = subprocess.run(
        [TXQUEUE, "worker", "myapp:app", "--database", "sqlite:///no/such/dir/app.db"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "is writable by other users (mode 1777)" in result.stderr, result.stderr
