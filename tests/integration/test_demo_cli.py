"""``txqueue demo`` says where it left its database, and how to look inside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_says_where_it_left_its_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "txqueue.cli.main", "demo", "--database", url],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"the database is left at {tmp_path}/demo.db" in done.stdout
    assert f"  txqueue queues --database {url}\n" in done.stdout
    assert (tmp_path / "demo.db").exists()
