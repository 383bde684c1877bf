"""Every program in examples/ runs to the end as its docstring says, in its own process.

The sign-up service (Flask, SQLAlchemy, a worker) and the webhook pipeline talk real HTTP on
local ports; the scenarios run on both engines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *arguments: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def test_signup_web_app_and_its_worker(sqlite_url: str, tmp_path: Path) -> None:
    out = run("signup/run.py", "--database", sqlite_url, cwd=tmp_path)
    assert "POST /signup alice@example.com: 201" in out
    assert "POST /signup alice@example.com again: 409" in out
    assert "welcome email sent to alice@example.com" in out
    assert "welcome email sent to bob@example.com" in out
    assert "worker.py stopped (exit status 0)" in out


def test_webhook_pipeline_with_signature_checks(sqlite_url: str, tmp_path: Path) -> None:
    out = run("webhooks.py", "--database", sqlite_url, cwd=tmp_path)
    for order in ("order-17", "order-18", "order-19"):
        assert f"verified com.shop.order.paid {order}" in out
    assert "unsigned request: HTTP 401" in out


def test_scenarios(database_url: str, tmp_path: Path) -> None:
    out = run("scenarios.py", "--database", database_url, cwd=tmp_path)
    for line in (
        "welcome email: sent to user@example.com",
        "trial reminder: scheduled for",
        "image processing: image-uuid-1 DONE; image-uuid-2 deleted with its pending message",
        "hourly aggregation: ran for slot",
        "long report: 3 s of work under a 2 s lease, renewed",
        "all scenarios done",
    ):
        assert line in out, out
