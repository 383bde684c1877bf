"""Without the ``events`` extra (simulated: its packages cannot be imported in a subprocess),
``txqueue.Events`` raises an error naming ``pip install 'txqueue[events]'``, and the event
commands stay in ``txqueue --help`` and say the same when run. The rest of txqueue works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

INSTALL = "pip install 'txqueue[events]'"
EVENT_COMMANDS = ("buses", "pipelines", "enrollments", "events", "dispatcher")

# Each of the extra's packages, blocked in turn: the layer needs every one.
BLOCKERS = {
    package: f"import sys; sys.modules[{package!r}] = None\n"
    for package in ("cloudevents", "httpx", "cel", "jsonschema")
}


def _python(block: str, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", block + code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.mark.parametrize("package", sorted(BLOCKERS))
def test_events_without_the_extra_names_the_install_command(package: str, tmp_path: Path) -> None:
    code = (
        "import txqueue\n"
        "db = txqueue.connect('sqlite:///app.db')\n"
        "try:\n"
        "    txqueue.Events(db)\n"
        "except ImportError as error:\n"
        "    print('refused:', error)\n"
    )
    result = _python(BLOCKERS[package], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout, result.stdout
    assert INSTALL in result.stdout, result.stdout
    assert package in result.stdout, result.stdout  # which package is missing


def _cli(
    arguments: list[str], cwd: Path, blocked: str = "cloudevents"
) -> subprocess.CompletedProcess[str]:
    code = f"from txqueue.cli.main import main\nmain({arguments!r}, prog_name='txqueue')\n"
    return _python(BLOCKERS[blocked], code, cwd)


@pytest.mark.parametrize("package", sorted(BLOCKERS))
def test_the_event_commands_stay_in_help_without_the_extra(package: str, tmp_path: Path) -> None:
    result = _cli(["--help"], tmp_path, package)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")}
    assert set(EVENT_COMMANDS) <= listed, result.stdout
    assert {"queues", "worker", "sql"} <= listed


@pytest.mark.parametrize(
    "arguments",
    [
        ["buses", "list"],
        ["pipelines", "create", "p", "--destination", "https://example.com/"],
        ["enrollments", "list"],
        ["events", "undelivered"],
        ["dispatcher"],
        ["events", "--help"],
    ],
    ids=lambda arguments: " ".join(arguments),
)
def test_an_event_command_without_the_extra_names_the_install_command(
    arguments: list[str], tmp_path: Path
) -> None:
    result = _cli(arguments, tmp_path)
    output = result.stdout + result.stderr
    assert INSTALL in output, output
    assert "Traceback" not in output, output
    if arguments[-1] != "--help":
        assert result.returncode == 1, output
    assert not (tmp_path / "txqueue.db").exists()  # nothing was created
