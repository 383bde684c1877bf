"""The README's quick start, as a user runs it: twice on SQLite in the same directory (the
second run must not trip over the first's tables and rows), and once on PostgreSQL with only
the URL changed, each in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Sybil

SQLITE_URL = "sqlite:///app.db"


@pytest.fixture
def quick_start(sybil_docs: Sybil, repository_root: Path) -> str:
    """The first ```python block under "## Quick start" in README.md, as Sybil reads it."""
    document = sybil_docs.parse(repository_root / "README.md")
    heading = document.text.index("## Quick start")
    source = next(str(e.parsed) for e in document.examples() if e.start > heading)
    assert SQLITE_URL in source, "the quick start connects to sqlite:///app.db"
    return source


def run(source: str, directory: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", source],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "(124, 'welcome-email-id') b'{\"type\": \"welcome\"}' 1" in done.stdout, done.stdout
    return done.stdout


def test_quick_start_runs_twice_on_sqlite(quick_start: str, tmp_path: Path) -> None:
    run(quick_start, tmp_path)
    run(quick_start, tmp_path)


@pytest.mark.postgres
def test_quick_start_runs_on_postgresql_with_only_the_url_changed(
    quick_start: str, tmp_path: Path, pg_database_url: str
) -> None:
    run(quick_start.replace(SQLITE_URL, pg_database_url), tmp_path)
