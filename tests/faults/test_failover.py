"""Replicated PostgreSQL: multi-host URLs, connections a failover ended, a dropped COMMIT
that no synchronous standby acknowledged, and the failover check on a Patroni cluster.

The first three need only the test server: a multi-host URL whose first host is dead, the
pool's backends terminated as a failover's restart does, and a server whose
``synchronous_standby_names`` names a standby that never connects (every COMMIT waits for
it, as on a primary whose standby is gone). The last runs ``scripts/failover-check``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from pgserver import PostgresServer

import txqueue
from txqueue.drivers.postgres import _sync as postgres_sync
from txqueue.errors import CommitOutcomeUnknown

from .proxy import CommitDropProxy, fault_marker

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = [
    "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))",
]


def _dead_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: nothing listens there


def _hosts(url: str, *ports: int, **query: str) -> str:
    """``url`` with one host per port (all 127.0.0.1), its user and database kept."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = (f"{user}@" if user else "") + ",".join(f"127.0.0.1:{port}" for port in ports)
    extra = "&".join(f"{k}={v}" for k, v in query.items())
    return urlunsplit(
        parts._replace(netloc=netloc, query="&".join(filter(None, [parts.query, extra])))
    )


def test_a_multi_host_url_connects_past_a_dead_host_for_every_connection(
    pg_database_url: str,
) -> None:
    """The pool, a receive stream's LISTEN connection and the commit resolver all reach the
    live host listed second: a COMMIT whose reply the proxy drops is resolved through it."""
    live = urlsplit(pg_database_url).port or 5432
    with CommitDropProxy("127.0.0.1", live) as proxy:
        url = _hosts(
            pg_database_url,
            _dead_port(),
            proxy.port,
            target_session_attrs="read-write",
            sslmode="disable",
        )
        with txqueue.connect(url) as db:
            db.update_ddl(SCHEMA)
            received: list[txqueue.Message] = []

            def stream() -> None:
                for message in db.receive("jobs", max_duration="20s", lease_duration="30s"):
                    received.append(message)
                    return

            waiting = threading.Thread(target=stream)
            waiting.start()
            time.sleep(0.5)  # the stream is LISTENing (a late start still finds the row)
            db.run_in_transaction(
                lambda txn: txn.send("jobs", (1,), fault_marker("after", "multi").encode())
            )
            waiting.join(30)
            assert [message.key for message in received] == [(1,)]
        assert [drop.tag for drop in proxy.drops] == ["multi"]


def test_pooled_connections_a_failover_ended_are_not_lent(pg_database_url: str) -> None:
    """A failover restarts the old primary, ending every connection to it: the next
    operations get fresh connections instead of failing with Unavailable on dead ones
    while the server accepts them again."""
    with txqueue.connect(pg_database_url + "?pool_size=4") as db:
        db.update_ddl(SCHEMA)
        holders = [threading.Barrier(4)]

        def send(key: int) -> None:
            holders[0].wait(10)  # four sends at once: four pooled connections
            db.run_in_transaction(lambda txn: txn.send("jobs", (key,), b"x"))

        threads = [threading.Thread(target=send, args=(key,)) for key in range(1, 5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        with psycopg.connect(pg_database_url, autocommit=True) as admin:
            pids = [
                row[0]
                for row in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )
            ]
            assert pids
            admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
            # The terminated backends have closed their sockets once they are gone.
            deadline = time.monotonic() + 10
            while admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
            ).fetchone() != (0,):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        # Statements outside a transaction: no commit to resolve and retry.
        assert [db.queue_info("jobs").ready for _ in range(8)] == [4] * 8
        assert len(db.receive_now("jobs", max_batch_size=10)) == 4


def test_a_commit_no_synchronous_standby_acknowledged_is_never_reported_committed(
    private_postgres: Callable[..., PostgresServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every COMMIT waits for a standby that never comes. Its reply dropped, the resolver
    must not end the waiting backend and then read the marker: the commit is then visible
    on this server but on no standby, and a failover would undo it. Committed is a wrong
    answer; CommitOutcomeUnknown is the right one (the server cannot say in time)."""
    url = private_postgres().url
    with txqueue.connect(url) as db:
        db.update_ddl(SCHEMA)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'standby_that_never_comes'")
        admin.execute("SELECT pg_reload_conf()")
    monkeypatch.setattr(postgres_sync, "RESOLVE_TIMEOUT", 8.0)
    with CommitDropProxy.for_url(url) as proxy, txqueue.connect(proxy.url(url)) as db:
        outcome = "committed"
        try:
            db.run_in_transaction(
                lambda txn: txn.send("jobs", (1,), fault_marker("after", "sync").encode())
            )
        except CommitOutcomeUnknown:
            outcome = "unknown"
        assert [drop.tag for drop in proxy.drops] == ["sync"]
    assert outcome == "unknown", "a commit on no standby was reported committed"


@pytest.mark.slow
@pytest.mark.timeout(660)
def test_failover_check_loses_nothing_over_two_failovers() -> None:
    """``scripts/failover-check --failovers 2`` on a three-node Patroni cluster. Runs under
    CI=true (where missing Patroni/etcd is a failure) or wherever Patroni is installed."""
    installed = shutil.which("patroni") is not None and shutil.which("etcd") is not None
    if os.environ.get("CI") != "true" and not installed:
        pytest.skip("patroni/etcd are not installed (scripts/failover-check installs them)")
    if os.geteuid() != 0 and not installed:
        pytest.fail("patroni/etcd are missing and only root can install them", pytrace=False)
    result = subprocess.run(
        [str(ROOT / "scripts" / "failover-check"), "--failovers", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = result.stdout.strip().splitlines()
    last = lines[-1] if lines else ""
    print(result.stdout[-4000:], result.stderr[-4000:], sep="\n")
    assert re.fullmatch(
        r"failovers=2 lost=0 duplicated=0 wrong=0 unknown=\d+ recovery_p50_s=[\d.]+"
        r" recovery_max_s=[\d.]+",
        last,
    ), last or result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
