"""A PostgreSQL server that refuses a connection for good: ``connect`` fails at once.

psycopg_pool retries a failed connect until its timeout (30 s here), whatever the cause,
and logs each attempt's reason. A missing database or role, or a wrong password, cannot
come right by waiting, so ``connect`` raises ``Unavailable`` with the server's reason
within a few seconds instead. A server that is down (or starting up) is
still waited for: it may come up within the wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import pytest
from pgserver import PostgresServer

import txqueue
from txqueue.errors import Unavailable

pytestmark = pytest.mark.postgres

MISSING = "txqueue_no_such_name"
#: Well under the pool's 30 s: only a refusal reported as it happens passes.
PROMPTLY = 10.0


def _refused(url: str, part: str) -> tuple[str, str]:
    """``url`` naming a database or a role that does not exist, and the server's reason."""
    parts = urlsplit(url)
    if part == "database":
        return urlunsplit(parts._replace(path=f"/{MISSING}")), f'database "{MISSING}"'
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{MISSING}@{host}")), f'role "{MISSING}"'


@pytest.mark.parametrize("part", ["database", "role"])
def test_a_missing_database_or_role_fails_at_once(
    postgres_url: str, part: str, fault_figures: dict[str, object]
) -> None:
    url, reason = _refused(postgres_url, part)
    started = time.monotonic()
    with pytest.raises(Unavailable, match=f"{reason} does not exist") as raised:
        txqueue.connect(url)
    elapsed = time.monotonic() - started
    fault_figures.update(seconds=round(elapsed, 2), error=str(raised.value))
    assert elapsed < PROMPTLY
    assert raised.value.__cause__ is not None  # psycopg's error, kept


@pytest.mark.parametrize("part", ["database", "role"])
async def test_the_asyncio_face_fails_at_once_too(
    postgres_url: str, part: str, fault_figures: dict[str, object]
) -> None:
    url, reason = _refused(postgres_url, part)
    started = time.monotonic()
    with pytest.raises(Unavailable, match=f"{reason} does not exist"):
        await txqueue.connect_async(url)
    elapsed = time.monotonic() - started
    fault_figures.update(seconds=round(elapsed, 2))
    assert elapsed < PROMPTLY


def test_a_server_that_is_down_is_waited_for(
    private_postgres: Callable[..., PostgresServer], fault_figures: dict[str, object]
) -> None:
    server = private_postgres()
    server.stop()
    starter = threading.Timer(1.0, server.restart)  # up again a second after the connect
    started = time.monotonic()
    starter.start()
    try:
        with txqueue.connect(server.url) as db:
            waited = time.monotonic() - started
            assert db.queues() == []
    finally:
        starter.join()
    fault_figures.update(waited=round(waited, 2))
    assert waited >= 1.0  # it connected once the server was up, not before
