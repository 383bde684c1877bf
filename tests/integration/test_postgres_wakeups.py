"""Wake-ups on PostgreSQL: the NOTIFY follows COMMIT as a transaction of its own.

PostgreSQL holds one cluster-wide lock from a notifying transaction's pre-commit until its
commit is flushed, so a NOTIFY inside the sending transaction serialises every sender's WAL
flush. txqueue sends it right after COMMIT in the same pipeline (no extra round trip), as a
statement of its own that commits asynchronously; if only that statement fails, the send
has committed and says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import txqueue
from tests.faults.proxy import CommitDropProxy

pytestmark = pytest.mark.postgres

QUEUE = "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))"


def _notifies(listener: psycopg.Connection, seconds: float) -> list[psycopg.Notify]:
    """Every NOTIFY ``listener`` gets within ``seconds``."""
    got: list[psycopg.Notify] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        got += listener.notifies(timeout=left, stop_after=1)
    return got


def test_the_notify_follows_the_commit_as_a_transaction_of_its_own(
    pg_database_url: str,
) -> None:
    with txqueue.connect(pg_database_url) as db:
        db.update_ddl([QUEUE])
    with (
        CommitDropProxy.for_url(pg_database_url, log=True) as proxy,
        psycopg.connect(pg_database_url, autocommit=True) as listener,
        txqueue.connect(proxy.url(pg_database_url) + "&pool_size=1") as db,
    ):
        listener.execute("LISTEN txqueue")
        proxy.messages.clear()
        with db.batch() as batch:
            batch.send("jobs", (1,), b"x")

        [notify] = _notifies(listener, 2.0)
        assert notify.payload == "jobs"
        assert listener.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
        executed = [text for _, kind, text in proxy.messages if kind in ("E", "Q")]
        commit = next(i for i, text in enumerate(executed) if text.startswith("COMMIT"))
        assert not any("pg_notify" in text for text in executed[:commit]), executed
        [after] = executed[commit + 1 :]
        assert "pg_notify" in after and "set_config('synchronous_commit', 'off', true)" in after


@pytest.fixture
def no_notify_url(pg_database_url: str) -> Iterator[str]:
    """The database as a role that may not run ``pg_notify``: every NOTIFY fails."""
    role = f"nonotify_{urlsplit(pg_database_url).path.strip('/')}"[:60]
    with psycopg.connect(pg_database_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
        admin.execute("REVOKE EXECUTE ON FUNCTION pg_notify(text, text) FROM PUBLIC")
    parts = urlsplit(pg_database_url)
    netloc = f"{role}@{parts.hostname}:{parts.port}"
    yield urlunsplit(parts._replace(netloc=netloc))
    with psycopg.connect(pg_database_url, autocommit=True) as admin:
        admin.execute(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER')
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')


def test_a_notify_that_fails_after_commit_does_not_fail_the_send(
    no_notify_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with txqueue.connect(no_notify_url) as db:
        db.update_ddl([QUEUE])
        with (
            psycopg.connect(no_notify_url, autocommit=True) as probe,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            probe.execute("SELECT pg_notify('txqueue', 'jobs')")

        with db.batch() as batch:  # committed; only the NOTIFY after it is refused
            batch.send("jobs", (1,), b"x")
        db.run_in_transaction(lambda txn: txn.send("jobs", (2,), b"y"))

        keys = sorted(m.key for m in db.receive_now("jobs", max_batch_size=10))
        assert keys == [(1,), (2,)]
        refused = [r for r in caplog.records if "NOTIFY after COMMIT failed" in r.getMessage()]
        assert len(refused) == 2, "each refused NOTIFY is logged"


def test_a_send_in_the_applications_transaction_notifies_at_its_commit(
    pg_database_url: str,
) -> None:
    with (
        txqueue.connect(pg_database_url) as db,
        psycopg.connect(pg_database_url, autocommit=True) as listener,
        psycopg.connect(pg_database_url) as app,
    ):
        db.update_ddl([QUEUE])
        listener.execute("LISTEN txqueue")
        with db.batch(connection=app) as batch:
            batch.send("jobs", (1,), b"x")
        assert _notifies(listener, 0.5) == [], "NOTIFYed before the application committed"

        app.commit()
        assert [n.payload for n in _notifies(listener, 2.0)] == ["jobs"]
