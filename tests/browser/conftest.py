"""Fixtures of the dashboard's browser tests: Debian's Chromium driven by Playwright, against
the real ``txqueue dashboard`` command serving a SQLite database seeded through the public API:
one started as a user starts it (it generates its token and prints a login URL, which the
``page`` fixture opens), one with a token of ours (``guarded_page`` starts logged out).

One browser per session, a fresh context (cookies, storage) per test. Without Chromium,
Playwright or the ``dashboard`` extra the tests are skipped, except under ``CI=true`` where
they fail (as the PostgreSQL tests do without a server).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import Dashboard, Seeded, seed

import txqueue

CHROMIUM = Path("/usr/bin/chromium")
#: We run as root in CI (hence no sandbox); the rest keeps Chromium off the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_LIMIT = 30.0  # seconds for the dashboard to answer its first request


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true, where the browser tests must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a test module. Not for the session: Playwright's sync API
    keeps an asyncio loop running in this thread while it is open, and every asyncio test
    collected after the browser tests would then fail ("Runner.run() cannot be called from a
    running event loop")."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(dashboard: Dashboard) -> None:
    """Return once the dashboard answers HTTP; fail with its log if it exits or never does."""
    import httpx

    deadline = time.monotonic() + STARTUP_LIMIT
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{dashboard.url}/login", timeout=1.0)
            return
        except httpx.TransportError:
            pass
        try:  # the pause between tries doubles as the check that it is still running
            code = dashboard.process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"txqueue dashboard exited with {code}:\n{dashboard.log.read_text()}")
    pytest.fail(
        f"txqueue dashboard did not answer in {STARTUP_LIMIT:g} s:\n{dashboard.log.read_text()}"
    )


@pytest.fixture(scope="session")
def start_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``start_dashboard(database_url, token=None)``: a dashboard process, stopped at the end;
    without a token it generates one, kept under a private ``$XDG_RUNTIME_DIR`` of the test."""
    try:
        import txqueue.web  # noqa: F401
    except ImportError:
        unavailable("the dashboard extra is not installed (pip install -e '.[dev]')")
    started: list[Dashboard] = []
    command = Path(sys.executable).with_name("txqueue")

    def start(database_url: str, token: str | None = None) -> Dashboard:
        directory = tmp_path_factory.mktemp("dashboard")
        port = free_port()
        arguments = [str(command), "dashboard", "--database", database_url, "--port", str(port)]
        if token is not None:  # from a file: secrets stay off command lines
            token_file = directory / "token"
            token_file.write_text(token)
            token_file.chmod(0o600)
            arguments += ["--token-file", str(token_file)]
        runtime = directory / "runtime"
        runtime.mkdir(mode=0o700)
        environment = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        log = directory / "dashboard.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                arguments, stdout=output, stderr=subprocess.STDOUT, env=environment
            )
        dashboard = Dashboard(f"http://127.0.0.1:{port}", process, log, token)
        started.append(dashboard)
        wait_until_serving(dashboard)
        if token is None:
            printed = re.search(r"/login\?token=([\w-]+)", log.read_text())
            assert printed is not None, log.read_text()
            dashboard.login_path, dashboard.token = printed.group(0), printed.group(1)
        return dashboard

    yield start
    for dashboard in started:
        dashboard.process.terminate()
        try:
            dashboard.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dashboard.process.kill()
            dashboard.process.wait()


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """A SQLite database with three queues, dead letters, a bus, a pipeline, an enrollment."""
    return seed(f"sqlite:///{tmp_path_factory.mktemp('seeded')}/dashboard.db")


@pytest.fixture(scope="session")
def dashboard(seeded: Seeded, start_dashboard: Any) -> Dashboard:
    """The dashboard over the seeded database, started without a token (so it made one)."""
    return start_dashboard(seeded.url)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def guarded_dashboard(seeded: Seeded, start_dashboard: Any) -> Dashboard:
    """The dashboard over the seeded database, with a token."""
    return start_dashboard(seeded.url, token=secrets.token_urlsafe(24))  # type: ignore[no-any-return]


@pytest.fixture
def db(seeded: Seeded) -> Iterator[txqueue.Database]:
    """The seeded database, as the library sees it."""
    database = txqueue.connect(seeded.url)
    try:
        yield database
    finally:
        database.close()


def open_page(browser: Any, dashboard: Dashboard) -> Iterator[Any]:
    context = browser.new_context(base_url=dashboard.url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, dashboard: Dashboard) -> Iterator[Any]:
    """A page in a fresh browser context, logged in with the URL the dashboard printed."""
    for opened in open_page(browser, dashboard):
        opened.goto(dashboard.login_path)
        assert opened.url == f"{dashboard.url}/", opened.url  # the token left the address
        yield opened


@pytest.fixture
def guarded_page(browser: Any, guarded_dashboard: Dashboard) -> Iterator[Any]:
    """A page in a fresh browser context on the dashboard with a token."""
    yield from open_page(browser, guarded_dashboard)
