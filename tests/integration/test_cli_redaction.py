"""A database URL's password is never printed: the dispatcher's start line, the title of
``txqueue queues`` and the banner of the ``txqueue sql`` shell show ``user:***@host``.

The test server trusts local connections, so a URL carrying a password connects as well.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main
from txqueue.core.url import redact_url

pytestmark = pytest.mark.postgres

PASSWORD = "hunter2-never-printed"
PG_QUEUE = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"


def _with_password(url: str) -> str:
    """``postgresql://user@host…`` with a password, given as a user part and an option."""
    with_user_part = url.replace("@", f":{PASSWORD}@", 1)
    return f"{with_user_part}?application_name=redaction&password={PASSWORD}"


def _shown(url: str) -> str:
    """What the URL must look like when printed: the password, both times, as ***."""
    user, _, rest = url.partition("@")
    return f"{user}:***@{rest}?application_name=redaction&password=***"


def test_redact_url_keeps_user_host_and_database() -> None:
    assert redact_url("postgresql://ann:s3cret@db:5432/app?pool_size=4&password=x") == (
        "postgresql://ann:***@db:5432/app?pool_size=4&password=***"
    )
    assert redact_url("postgresql://ann@db/app") == "postgresql://ann@db/app"
    assert redact_url("sqlite:///tmp/app.db") == "sqlite:///tmp/app.db"


def test_queues_title(pg_database_url: str) -> None:
    url = _with_password(pg_database_url)
    with txqueue.connect(url) as db:
        db.update_ddl([PG_QUEUE])
    result = CliRunner().invoke(main, ["queues", "--database", url])
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    # The title is centred and wrapped over the table: compare without the white space.
    assert f"queuesin{_shown(pg_database_url)}" in "".join(result.output.split())


def test_dispatcher_start_line(pg_database_url: str) -> None:
    url = _with_password(pg_database_url)
    with subprocess.Popen(
        [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", url],
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            assert line.startswith("dispatcher delivering for "), line
            process.send_signal(signal.SIGINT)
            rest = process.stderr.read()
            assert process.wait(30) == 0, rest
        finally:
            if process.poll() is None:
                process.kill()
    assert PASSWORD not in line + rest
    assert _shown(pg_database_url) in line


def test_sql_shell_banner(pg_database_url: str) -> None:
    url = _with_password(pg_database_url)
    main_end, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "txqueue.cli.main", "sql", "--database", url],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "COLUMNS": "500", "TERM": "dumb"},
    )
    os.close(terminal)
    shown = b""
    try:
        deadline = time.monotonic() + 30
        while b"txqueue>" not in shown and time.monotonic() < deadline:
            ready, _, _ = select.select([main_end], [], [], 1)
            if ready:
                shown += os.read(main_end, 4096)
        os.write(main_end, b"\\q\n")
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main_end)
    printed = shown.decode(errors="replace")
    assert "txqueue>" in printed, printed
    assert PASSWORD not in printed
    assert f"txqueue sql on {_shown(pg_database_url)}" in printed.replace("\r\n", "")
