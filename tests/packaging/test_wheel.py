"""The wheel as a user gets it: built with ``python -m build``, installed into a fresh
virtualenv (its dependencies from the package index, none of the extras), and used from that
virtualenv, away from the source tree. Catches what an editable install hides: a module
missing from the wheel, a dependency that only an extra brings, a broken entry point, a
missing ``py.typed`` marker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(300)]

#: A small application, type-checked with mypy --strict against the installed wheel. Each
#: reveal_type names one of the entry points a user meets first.
USER_PROGRAM = textwrap.dedent(
    """
    from datetime import timedelta

    import txqueue
    from txqueue.errors import NotFound


    def main() -> int:
        db = txqueue.connect("sqlite:///typed.db")
        reveal_type(db)
        with db.batch() as batch:
            reveal_type(batch)
            batch.send(queue="Tasks", key=(1,), payload=b"x")
        handled = 0
        for message in db.receive("Tasks", max_duration=timedelta(seconds=1)):
            reveal_type(message)
            reveal_type(message.lease_token)
            reveal_type(message.delivery_count)
            handled += 1
        try:
            db.ack_now("Tasks", (1,))  # not a method: mypy must say so
        except NotFound:
            pass
        return handled


    async def main_async() -> None:
        adb = await txqueue.connect_async("sqlite:///typed.db")
        reveal_type(adb)
        async for message in adb.receive("Tasks", max_duration=timedelta(seconds=1)):
            reveal_type(message.deliver_time)
    """
)


@dataclass(frozen=True)
class Installed:
    """A fresh virtualenv with the built wheel installed, and a directory outside the checkout."""

    venv: Path
    work: Path
    dist: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _run(
    command: list[str], cwd: Path, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MYPYPATH")
    }
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment
    )
    if check:
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    # The sdist first, then the wheel built from it, as a release does (RELEASING.md).
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], root, timeout=240)
    [wheel] = dist.glob("txqueue-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], root)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], root, 150)
    work = root / "work"
    work.mkdir()
    yield Installed(venv, work, dist)


def test_the_release_artifacts_pass_twine_check(installed: Installed) -> None:
    artifacts = sorted(str(path) for path in installed.dist.iterdir())
    assert sorted(Path(a).suffix for a in artifacts) == [".gz", ".whl"], artifacts
    result = _run([sys.executable, "-m", "twine", "check", "--strict", *artifacts], installed.work)
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_the_built_wheel_installs_in_a_fresh_virtualenv_and_runs_the_demo(
    installed: Installed,
) -> None:
    work = installed.work
    location = _run([str(installed.python), "-c", "import txqueue; print(txqueue.__file__)"], work)
    assert Path(location.stdout.strip()).is_relative_to(installed.venv), location.stdout

    output = _run([str(installed.venv / "bin" / "txqueue"), "demo"], work).stdout
    assert "done: 2 users, 0 messages left in UserTasks" in output, output
    help_text = _run([str(installed.venv / "bin" / "txqueue"), "--help"], work).stdout
    assert "pip install 'txqueue[events]'" in help_text  # no events extra: said, not hidden


def _mypy_on_user_program(installed: Installed) -> subprocess.CompletedProcess[str]:
    program = installed.work / "user_program.py"
    program.write_text(USER_PROGRAM, encoding="utf-8")
    return _run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--python-executable",
            str(installed.python),
            "--config-file",
            os.devnull,
            str(program),
        ],
        installed.work,
        timeout=240,
        check=False,
    )


def test_a_user_program_type_checks_against_the_wheel_with_mypy_strict(
    installed: Installed,
) -> None:
    result = _mypy_on_user_program(installed)
    output = result.stdout + result.stderr
    revealed = re.findall(r'Revealed type is "([^"]+)"', output)
    assert len(revealed) == USER_PROGRAM.count("reveal_type("), output
    assert all("Any" not in shown for shown in revealed), revealed
    assert revealed[0] == "txqueue._sync.database.Database", revealed
    assert "txqueue.models.Message" in revealed, revealed
    # The one deliberate mistake is found, and is the only error: the package is typed.
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert len(errors) == 1 and '"ack_now"' in errors[0], output


def test_without_py_typed_mypy_refuses_to_read_the_package(installed: Installed) -> None:
    marker = Path(
        _run(
            [
                str(installed.python),
                "-c",
                "import pathlib, txqueue; print(pathlib.Path(txqueue.__file__).parent / 'py.typed')",
            ],
            installed.work,
        ).stdout.strip()
    )
    assert marker.is_file(), "the wheel ships no py.typed marker"
    content = marker.read_bytes()
    marker.unlink()
    try:
        result = _mypy_on_user_program(installed)
    finally:
        marker.write_bytes(content)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "missing library stubs or py.typed marker" in output, output
