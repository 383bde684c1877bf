"""Wake-ups on PostgreSQL: the NOTIFY is sent after COMMIT, off the committing connection.

PostgreSQL holds one cluster-wide lock from a notifying transaction's pre-commit until its
commit is flushed, so a NOTIFY inside the sending transaction serialises every sender's WAL
flush. txqueue's commit only records the queues it sent to; the driver's notifier thread
sends their NOTIFY on a connection of its own, many commits' in one round, and a NOTIFY that
fails does not fail the send that committed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import txqueue
from tests.faults.proxy import CommitDropProxy
from txqueue.drivers.postgres import notifier
from txqueue.drivers.postgres.notifier import Notifier

pytestmark = pytest.mark.postgres

QUEUE = "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))"


def _notifies(listener: psycopg.Connection, seconds: float) -> list[psycopg.Notify]:
    """Every NOTIFY ``listener`` gets within ``seconds``."""
    got: list[psycopg.Notify] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        got += listener.notifies(timeout=left, stop_after=1)
    return got


def test_a_lone_send_is_one_statement_and_its_notify_follows_on_another_connection(
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
        sender = {ident for ident, kind, _ in proxy.messages if kind in ("E", "Q")}

        [notify] = _notifies(listener, 2.0)
        assert notify.payload == "jobs"
        assert listener.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
        by_connection: dict[int, list[str]] = {}
        for ident, kind, text in proxy.messages:
            if kind in ("E", "Q"):
                by_connection.setdefault(ident, []).append(text)
        [statement] = by_connection.pop(sender.pop())  # no BEGIN, no COMMIT, no NOTIFY
        assert statement.startswith("WITH _marker AS (INSERT INTO txqueue_commits"), statement
        assert "pg_notify" not in statement
        notified = [t for texts in by_connection.values() for t in texts if "pg_notify" in t]
        assert len(notified) == 1, by_connection


def test_notifies_of_many_commits_share_a_round(pg_database_url: str) -> None:
    """Queues owed faster than one round per ``SPACING`` are NOTIFYed together; the last
    owed is NOTIFYed too. ``owe`` itself does no I/O."""
    conninfo = pg_database_url
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute("LISTEN txqueue")
        notifications = Notifier(conninfo)
        started = time.monotonic()
        for number in range(2000):
            notifications.owe([f"q{number % 3}"])
        owing = time.monotonic() - started
        notifications.owe(["last"])
        notifications.close()  # sends what is still owed
        got = _notifies(listener, 1.0)
    payloads = [n.payload for n in got]
    assert "last" in payloads
    assert set(payloads) == {"q0", "q1", "q2", "last"}
    rounds_at_most = 2 + (owing + 0.05) / notifier.SPACING  # +0.05 s: the thread's start
    assert len(payloads) <= 4 * rounds_at_most, (len(payloads), owing)
    assert len(payloads) < 2001, "some NOTIFYs were shared"


@pytest.mark.timeout(60)
def test_a_forked_child_notifies_even_if_the_parent_held_the_lock(pg_database_url: str) -> None:
    """A child forked while the parent's notifier held its lock starts afresh (a copy of a
    held lock would never be released there)."""
    notifications = Notifier(pg_database_url)
    with psycopg.connect(pg_database_url, autocommit=True) as listener:
        listener.execute("LISTEN txqueue")
        notifications._lock.acquire()  # as if the parent's thread held it at the fork
        try:
            pid = os.fork()
            if pid == 0:  # the child: owe, send, and leave without running any cleanup
                signal.alarm(20)  # a child stuck on the copied lock dies instead of hanging
                code = 1
                try:
                    notifications.owe(["child"])
                    notifications.close()
                    code = 0
                finally:
                    os._exit(code)
        finally:
            notifications._lock.release()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [n.payload for n in _notifies(listener, 1.0)] == ["child"]


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
    # Closing the database sent what was still owed: every round is logged by then.
    refused = [r for r in caplog.records if "NOTIFY of ['jobs'] failed" in r.getMessage()]
    assert 1 <= len(refused) <= 2, "each refused NOTIFY round is logged"


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


def test_a_notify_that_arrives_while_the_receiver_runs_a_statement_still_wakes_it(
    pg_database_url: str,
) -> None:
    """A receiver runs statements between its waits (receive, ``seconds_until_ready``); a
    NOTIFY that reaches its connection during one must still end the next wait at once.
    psycopg keeps such notifications for ``notifies()`` from 3.2.4 on (before, they were
    dropped, and the receiver slept until its 1 s fallback poll): hence the dependency's
    lower bound."""
    with txqueue.connect(pg_database_url) as db:
        db.update_ddl([QUEUE])
        jobs = db.queue("jobs")
        receiver = db._driver.open_receiver(jobs)  # LISTENs
        try:
            with psycopg.connect(pg_database_url, autocommit=True) as other:
                other.execute("SELECT pg_notify('txqueue', 'jobs')")
            assert receiver.seconds_until_ready(jobs) is None  # the NOTIFY arrives meanwhile
            started = time.monotonic()
            receiver.wait(10.0)
            waited = time.monotonic() - started
        finally:
            receiver.close()
    assert waited < 0.9, f"the wait ran {waited:.2f} s: the NOTIFY was lost"
